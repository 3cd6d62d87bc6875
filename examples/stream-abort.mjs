// Streaming with abort: text streams until a stop button would end it (here:
// after PIECES pieces, default 24), Ctrl-C, or a deadline (default 10 s),
// whichever comes first; prefill progress goes to stderr; then the session
// carries on from where it stopped.
//   node stream-abort.mjs MODEL [PIECES] [DEADLINE_MS]
import { loadModel } from 'sparq';

const [path, pieces = '24', deadline = '10000'] = process.argv.slice(2);
if (!path) {
  console.error('usage: node stream-abort.mjs MODEL [PIECES] [DEADLINE_MS]');
  process.exit(2);
}

const model = await loadModel(path);
const session = model.createSession({ prefillChunk: 16 });
const prompt =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.';

// The stop button: aborted once PIECES pieces have been shown (a small model
// would otherwise reach its end of text or its context before any deadline).
const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
const generation = session.generate(prompt, {
  temperature: 0.8,
  seed: 42,
  signal: AbortSignal.any([stop.signal, AbortSignal.timeout(Number(deadline))]),
  onProgress: ({ done, total }) => console.error(`prefill ${done}/${total}`),
});
let shown = 0;
for await (const piece of generation) {
  process.stdout.write(piece);
  if (++shown === Number(pieces)) stop.abort();
}
const first = generation.result;
console.error(
  `\n-- ${first.finishReason} after ${first.generatedTokens} tokens (${first.decodeTokensPerSecond.toFixed(0)} tok/s)`,
);

// The session keeps what was generated: 20 more tokens follow on.
const more = await session.generate('', { maxTokens: 20, temperature: 0 }).collect();
process.stdout.write(more.text + '\n');
console.error(`-- ${more.finishReason}; the session holds ${session.position} of ${session.contextSize} positions`);
