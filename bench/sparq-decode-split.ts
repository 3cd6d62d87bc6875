/**
 * Where a decode step of a real-shape model spends its time: the attention ops against the rest
 * (weight products, norms, RoPE, KV append, JS), dense and SparQ alternating over one cache:
 *   pnpm exec tsx bench/sparq-decode-split.ts [--model PATH] [--S 16384] [--threads 2] [--steps 8] [--rounds 5]
 * The model defaults to `sparq bench --shape llama2-7b --layers 2`'s file (run that once to write
 * it). Instead of a prefill (minutes at 16k on a loaded machine) every layer's cache gets S random
 * positions through the engine's kvAppend (uniform in [-1, 1], f16, the 'k-twice' layout with its
 * f16 K transposed, as sparq bench's SparQ run has): the kernels' speed does not depend on the values.
 * SparQ runs as sparq bench's row: r = d/8, k = S/8, l = k/4. Per method: the best round's mean ms
 * per step, the attention ops' share of it, tokens/s, and the same in the process's CPU time (user +
 * system, every thread: at --threads 1 the load-robust figure; with more, the pool's spinning counts). Set SPARQ_NATIVE_BUILD to a directory
 * holding another build's sparq_native.node to time that build.
 */
import { selectBackend, Tensor } from '@sparq/core';
import { Session, mulberry32, openModel, type AttentionConfig } from '@sparq/llm';
import '@sparq/native';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { nativeControls } from '../packages/cli/src/bench/native.ts';

const option = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(name);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
};
const path = option('--model', join(tmpdir(), 'sparq-shapes', 'llama2-7b-2of32-q4_k_m.gguf'));
const S = Number(option('--S', '16384'));
const threads = Number(option('--threads', '2'));
const steps = Number(option('--steps', '8'));
const rounds = Number(option('--rounds', '5'));

const engine = await selectBackend({ backend: 'native' });
const native = nativeControls();
if ('missing' in native) throw new Error(`bench/sparq-decode-split.ts needs the native addon: ${native.missing}`);
native.setThreads(threads);
const lm = openModel(engine, path);
const c = lm.config;
const sparq: AttentionConfig = { method: 'sparq', r: c.headDim / 8, k: S / 8, l: S / 32, reallocate: true };
const dense: AttentionConfig = { method: 'dense', r: 0, k: 0, l: 0, reallocate: false };
const session = new Session(engine, lm.model, {
  capacity: S + 2 * rounds * steps + 1,
  maxPrefill: 1,
  attention: sparq,
  kvDType: 'f16',
});

// S random positions in every layer's cache, 256 at a time.
const random = mulberry32(1);
const chunk = 256;
const k = Tensor.zeros('f32', [chunk, c.nKvHeads, c.headDim]);
const v = Tensor.zeros('f32', [chunk, c.nKvHeads, c.headDim]);
for (const cache of session.caches)
  for (let pos = 0; pos < S; pos += chunk) {
    for (let i = 0; i < k.size; i++) {
      k.data[i] = 2 * random() - 1;
      v.data[i] = 2 * random() - 1;
    }
    engine.kvAppend(cache, 0, k, v);
  }

// Time inside the attention ops: the engine's two decode entry points, wrapped.
let attentionMs = 0;
let attentionCpuMs = 0;
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
for (const name of ['attentionDecode', 'sparqDecode'] as const) {
  const op = engine[name].bind(engine) as (...a: unknown[]) => void;
  (engine as unknown as Record<string, unknown>)[name] = (...a: unknown[]) => {
    const t0 = performance.now(),
      c0 = cpuMs();
    op(...a);
    attentionMs += performance.now() - t0;
    attentionCpuMs += cpuMs() - c0;
  };
}

console.log(
  `# ${path}: ${c.nLayers} layers, ${c.nHeads} heads over ${c.nKvHeads} KV heads, d ${c.headDim}; S ${S}, f16 KV, ${threads} threads`,
);
const methods = [
  { name: 'dense', config: dense },
  { name: `sparq r ${sparq.r} k ${sparq.k} l ${sparq.l}`, config: sparq },
];
const best = methods.map(() => ({ ms: Infinity, attention: 0, cpu: Infinity, attentionCpu: 0 }));
let token = 1;
for (let round = 0; round < rounds; round++)
  methods.forEach((m, i) => {
    session.setAttention(m.config);
    session.decode(token++); // one step first: the method's first call pays its scratch growth
    attentionMs = 0;
    attentionCpuMs = 0;
    const t0 = performance.now(),
      c0 = cpuMs();
    for (let s = 0; s < steps - 1; s++) session.decode(token++);
    const ms = (performance.now() - t0) / (steps - 1),
      cpu = (cpuMs() - c0) / (steps - 1);
    if (ms < best[i].ms) best[i] = { ...best[i], ms, attention: attentionMs / (steps - 1) };
    if (cpu < best[i].cpu) best[i] = { ...best[i], cpu, attentionCpu: attentionCpuMs / (steps - 1) };
  });
console.log(
  'method                       | wall ms/step | attention | other | tok/s | CPU ms/step | attention | other',
);
const f = (x: number, w: number) => x.toFixed(2).padStart(w);
methods.forEach((m, i) => {
  const b = best[i];
  console.log(
    `${m.name.padEnd(28)} | ${f(b.ms, 12)} | ${f(b.attention, 9)} | ${f(b.ms - b.attention, 5)} | ${(1000 / b.ms).toFixed(1).padStart(5)} | ${f(b.cpu, 11)} | ${f(b.attentionCpu, 9)} | ${f(b.cpu - b.attentionCpu, 5)}`,
  );
});
console.log(
  `SparQ over dense: ${(best[0].ms / best[1].ms).toFixed(2)}x wall, ${(best[0].cpu / best[1].cpu).toFixed(2)}x CPU`,
);
