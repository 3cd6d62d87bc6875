/**
 * The async text API (`sparq`'s loadModel → createSession → generate) on
 * stories260K: the same text as llama2.c and as the `sparq generate` command;
 * the event loop keeps running during generation; an abort stops before the
 * next forward step, in prefill and in decode, and the session continues
 * exactly where it stopped; stop strings; one generation at a time.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadModel, type LanguageModel, type TextSession } from 'sparq';
import { expectedText, files, storiesMissing } from './support.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const describeStories = storiesMissing ? describe.skip : describe;
const GREEDY = { temperature: 0 } as const;
/** A prompt of about 150 tokens: several prefill chunks of 16. */
const LONG_PROMPT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her mom and her dog. '.repeat(
    4,
  );
const CHUNK = 16;

/** Runs a generation to the end, calling `each(piece, index)` per piece; returns the pieces. */
async function pieces(
  iterable: AsyncIterable<string>,
  each?: (piece: string, index: number) => void,
): Promise<string[]> {
  const out: string[] = [];
  for await (const piece of iterable) {
    each?.(piece, out.length);
    out.push(piece);
  }
  return out;
}

describeStories(`async text API on stories260K${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  // The reference backend, as the CLI test forces it: the two runs share every number.
  let model: LanguageModel;
  const load = async () =>
    (model ??= await loadModel(files.model.path, { backend: 'reference', tokenizer: files.tok512.path }));
  const session = async (options: { contextSize?: number; prefillChunk?: number } = {}): Promise<TextSession> =>
    (await load()).createSession({ contextSize: 200, prefillChunk: CHUNK, ...options });

  it("streams llama2.c's greedy 200 text from an empty prompt", async () => {
    const s = await session();
    const g = s.generate('', GREEDY);
    const text = (await pieces(g)).join('');
    expect(text).toBe(expectedText());
    expect(g.result).toMatchObject({
      finishReason: 'context',
      promptTokens: 1,
      generatedTokens: 200,
      decodeSteps: 199,
      text,
    });
    expect(g.result!.attention.elementsRead).toBeGreaterThan(0);
    expect(s.stats).toMatchObject({
      position: 200,
      contextSize: 200,
      generatedTokens: 200,
      attention: { decodeSteps: 199, method: 'dense', compressionRatio: 1 },
    });
    expect(s.stats.decodeTokensPerSecond).toBeGreaterThan(0);
    expect(s.stats.prefillTokensPerSecond).toBeGreaterThan(0);
  });

  it('gives the text `sparq generate` prints after the echoed prompt', async () => {
    const prompt = 'Once upon a time, there was a dog';
    const cli = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'packages/cli/src/main.ts'),
        'generate',
        '--model',
        files.model.path,
        '--tokenizer',
        files.tok512.path,
        '--prompt',
        prompt,
        '-n',
        '200',
        '--temperature',
        '0',
      ],
      {
        cwd: ROOT,
        env: { ...process.env, SPARQ_BACKEND: 'reference' },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(cli.stderr).toContain('tok/s');
    const m = await load();
    const text = (await (await session()).generate(prompt, GREEDY).collect()).text;
    expect(text.length).toBeGreaterThan(100);
    expect(m.detokenize(m.tokenize(prompt)) + text).toBe(cli.stdout);
  });

  it('keeps a 1 ms timer ticking while it generates', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const t0 = performance.now();
    try {
      await (await session()).generate(LONG_PROMPT, GREEDY).collect();
    } finally {
      clearInterval(timer);
    }
    const ms = performance.now() - t0;
    // A generation that held the event loop would see no tick at all.
    expect(ticks, `${ticks} ticks in ${ms.toFixed(0)} ms`).toBeGreaterThanOrEqual(Math.min(20, Math.floor(ms / 10)));
  });

  it('an abort during prefill stops before the next chunk; the chunks forwarded stay, and generation continues from them exactly', async () => {
    const m = await load();
    const tokens = m.tokenize(LONG_PROMPT);
    expect(tokens.length).toBeGreaterThan(4 * CHUNK);
    const s = await session();
    const controller = new AbortController();
    const progress: number[] = [];
    const g = s.generate(tokens, {
      ...GREEDY,
      signal: controller.signal,
      onProgress: ({ done, total }) => {
        progress.push(done);
        expect(total).toBe(tokens.length);
        if (done === 2 * CHUNK) controller.abort();
      },
    });
    expect(await pieces(g)).toEqual([]);
    expect(g.result!.finishReason).toBe('abort');
    expect(progress).toEqual([CHUNK, 2 * CHUNK]);
    // Two whole chunks in the cache, nothing of the third.
    expect(s.position).toBe(2 * CHUNK);
    expect(s.history).toEqual(tokens.slice(0, 2 * CHUNK));

    const resumed = await s.generate(tokens.slice(2 * CHUNK), { ...GREEDY, maxTokens: 40 }).collect();
    const fresh = await (await session()).generate(tokens, { ...GREEDY, maxTokens: 40 }).collect();
    expect(fresh.text.length).toBeGreaterThan(40);
    expect(resumed.text).toBe(fresh.text);
  });

  it('an abort from a timer during prefill runs no forward step after it', async () => {
    const s = await session({ prefillChunk: 4 });
    const controller = new AbortController();
    let positionAtAbort = -1;
    controller.signal.addEventListener('abort', () => (positionAtAbort = s.position));
    setTimeout(() => controller.abort(), 1);
    const g = s.generate(LONG_PROMPT, { ...GREEDY, signal: controller.signal });
    await pieces(g);
    expect(g.result!.finishReason).toBe('abort');
    expect(positionAtAbort).toBeGreaterThanOrEqual(0);
    expect(s.position).toBe(positionAtAbort);
    expect(s.position % 4).toBe(0);
  });

  it('an abort during decode stops within one token; generating on gives the uninterrupted text', async () => {
    const whole = await (await session()).generate('Lily', { ...GREEDY, maxTokens: 60 }).collect();
    const s = await session();
    const controller = new AbortController();
    let positionAtAbort = -1;
    const first = s.generate('Lily', { ...GREEDY, maxTokens: 60, signal: controller.signal });
    const got = await pieces(first, (_, i) => {
      if (i === 9) {
        controller.abort();
        positionAtAbort = s.position;
      }
    });
    expect(got.length).toBe(10);
    expect(first.result!.finishReason).toBe('abort');
    expect(s.position).toBe(positionAtAbort);
    const rest = await s.generate('', { ...GREEDY, maxTokens: 60 - first.result!.generatedTokens }).collect();
    expect(first.result!.text + rest.text).toBe(whole.text);
    expect(rest.promptTokens).toBe(1); // the token sampled before the abort, forwarded now
  });

  it('leaving the loop early is an abort too, and the session stays usable', async () => {
    const s = await session();
    const g = s.generate('Lily', GREEDY);
    for await (const piece of g) if (piece) break;
    expect(g.result!.finishReason).toBe('abort');
    expect((await s.generate('', { ...GREEDY, maxTokens: 5 }).collect()).generatedTokens).toBe(5);
  });

  it('ends at a stop string, which is not shown', async () => {
    const whole = (await (await session()).generate('', { ...GREEDY, maxTokens: 80 }).collect()).text;
    const at = whole.indexOf('Lily');
    expect(at).toBeGreaterThan(0);
    const r = await (await session()).generate('', { ...GREEDY, maxTokens: 80, stop: ['zebra', 'Lily'] }).collect();
    expect(r).toMatchObject({ finishReason: 'stop', text: whole.slice(0, at) });
  });

  it('runs one generation at a time on a session, and says why otherwise', async () => {
    const s = await session();
    const a = s.generate('Lily', GREEDY)[Symbol.asyncIterator]();
    await a.next();
    await expect(s.generate('Tom').collect()).rejects.toThrow('another generation is running');
    await a.return(undefined);
    expect((await s.generate('', { ...GREEDY, maxTokens: 3 }).collect()).generatedTokens).toBe(3);
  });

  it('rejects bad options and an oversized prompt with the valid range', async () => {
    const m = await load();
    const seqLen = m.config.seqLen;
    expect(() => m.createSession({ contextSize: seqLen + 1 })).toThrow(
      `contextSize ${seqLen + 1}, expected an integer in [1, ${seqLen}]`,
    );
    expect(() => m.createSession({ attention: { method: 'sparq', r: 9 } })).toThrow(
      'attention.r 9, expected an integer in [1, 8]',
    );
    const s = await session({ contextSize: 8 });
    expect(() => s.generate('', { temperature: -1 })).toThrow('temperature -1, expected a finite number >= 0');
    await expect(s.generate(LONG_PROMPT).collect()).rejects.toThrow(
      /prompt tokens at position 0 need \d+ positions, the context holds 8/,
    );
    expect((await s.generate('', { ...GREEDY, maxTokens: 2 }).collect()).generatedTokens).toBe(2);
  });
});
