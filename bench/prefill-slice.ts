/**
 * The prefill of one prompt on a GGUF file (sparq alone: no llama.cpp), for A/B runs of the native
 * kernels on a real shape, e.g. the Llama 3 8B slice that `sparq bench --shape llama3-8b --layers 2` writes:
 *   pnpm exec tsx bench/prefill-slice.ts FILE [--tokens 512] [--threads 2] [--reps 3]
 *
 * Prints the best of --reps prefills (one Session.prefill of --tokens random ids, the 'int8' product)
 * as wall-clock tokens/s and as tokens per CPU-second (every thread's time, the pool's spin included).
 */
import { loadBackends } from '@sparq/core';
import '@sparq/native';
import { Session, buildModel, readModelFile } from '@sparq/llm';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
};
const file = process.argv[2];
if (!file || file.startsWith('--'))
  throw new Error(
    'bench/prefill-slice.ts FILE: the GGUF file to prefill (e.g. $TMPDIR/sparq-shapes/llama3-8b-2of32-q4_k_m.gguf)',
  );
const TOKENS = Number(arg('--tokens', '512'));
const REPS = Number(arg('--reps', '3'));
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native');
if (!engine) throw new Error('bench/prefill-slice.ts needs the native backend (pnpm build:native)');
attentionAddon(loadAddon()).attnSetThreads(Number(arg('--threads', '2')));
const model = buildModel(engine, readModelFile(file, engine).loaded);
let seed = 7;
const vocab = model.config.vocabSize;
const tokens = Array.from(
  { length: TOKENS },
  () => 3 + ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % (vocab - 3)),
);
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
let wall = Infinity;
let cpu = Infinity;
for (let r = 0; r < REPS; r++) {
  const session = new Session(engine, model, {
    capacity: TOKENS,
    maxPrefill: TOKENS,
    attention: { method: 'dense', r: 0, k: 0, l: 0, reallocate: false },
    productPath: 'int8',
  });
  const [w0, c0] = [performance.now(), cpuMs()];
  session.prefill(tokens);
  wall = Math.min(wall, performance.now() - w0);
  cpu = Math.min(cpu, cpuMs() - c0);
}
console.log(
  `prefill ${TOKENS} tokens: ${((1000 * TOKENS) / wall).toFixed(1)} tok/s wall (${wall.toFixed(0)} ms), ${((1000 * TOKENS) / cpu).toFixed(1)} tok per CPU-s (${cpu.toFixed(0)} ms); best of ${REPS}, ${loadAddon().info().kernel}`,
);
