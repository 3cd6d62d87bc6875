/**
 * Thread scaling on this machine: decode attention (32 heads x d 128, batch 1,
 * f32 KV) run directly on one thread, and through AttentionPool's piscina
 * workers (each takes a range of KV heads of the one shared cache).
 *   pnpm exec tsx bench/pool.ts
 *
 * - reference: direct call vs the pool with 2 workers (the pool is the only way
 *   the TypeScript backend uses a second core);
 * - native: its own std::thread pool at 1 and 2 threads, vs the piscina pool
 *   with 2 workers (native's thread pool is process-wide and concurrent calls
 *   take turns, so piscina adds message overhead, not parallelism, on native);
 * - the native pool's hand-off: a Q8_0 'int8' matvec small enough to stay in the
 *   L3 (512, 2048 and 5632 rows of 2048), one call at a time, on 1 and 2 threads:
 *   what splitting a decode-sized op over the pool costs beyond its work
 *   (packages/native/src/common/threads.cc).
 */
import { KVCache, Tensor, loadBackends, type Engine } from '@sparq/core';
import { AttentionPool } from '@sparq/pool';
import '@sparq/reference';
import '@sparq/native';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { medianMs } from './bandwidth.ts';

const H = 32;
const D = 128;
const SPARQ = { r: 16, k: 128, l: 32 };

const { available } = await loadBackends();
const engines = new Map(available.map((e) => [e.name, e]));
const native = attentionAddon(loadAddon());
const nativeDefault = native.attnThreads();

/** A full shared cache of S positions with random K and V (appended through the engine). */
function makeCache(engine: Engine, S: number): KVCache {
  const cache = new KVCache({ nKvHeads: H, headDim: D, capacity: S, shared: true });
  const chunk = 256;
  const k = Tensor.zeros('f32', [chunk, H, D]);
  const v = Tensor.zeros('f32', [chunk, H, D]);
  for (let at = 0; at < S; at += chunk) {
    for (let i = 0; i < k.size; i++) {
      k.data[i] = Math.random() * 2 - 1;
      v.data[i] = Math.random() * 2 - 1;
    }
    engine.kvAppend(cache, 0, k, v);
  }
  return cache;
}

const q = Tensor.zeros('f32', [1, H, D], { shared: true });
for (let i = 0; i < q.size; i++) q.data[i] = Math.random() * 2 - 1;
const out = Tensor.zeros('f32', [1, H, D], { shared: true });

/** Median ms of an async step: tinybench times the awaited promise. */
async function pooledMs(
  pool: AttentionPool,
  method: 'dense' | 'sparq',
  cache: KVCache,
  timeMs: number,
): Promise<number> {
  const { Bench } = await import('tinybench');
  const bench = new Bench({ time: timeMs, warmupIterations: 3, iterations: 5 });
  bench.add(method, () => pool.decode(method, out, q, cache, method === 'sparq' ? SPARQ : null));
  await bench.run();
  const result = bench.tasks[0].result as unknown as { latency?: { p50?: number; mean: number } };
  return result.latency?.p50 ?? result.latency!.mean;
}

const direct = (engine: Engine, method: 'dense' | 'sparq', cache: KVCache) =>
  method === 'dense' ? () => engine.attentionDecode(out, q, cache) : () => engine.sparqDecode(out, q, cache, SPARQ);

console.log(
  `# thread scaling: ${H} heads x d ${D}, f32 KV, batch 1; SparQ r ${SPARQ.r} k ${SPARQ.k} l ${SPARQ.l}; median ms per step`,
);
console.log('backend     method      S   direct 1t  direct 2t  pool 2w   best 2-core / 1t');
for (const [name, S, timeMs] of [
  ['reference', 2048, 1500],
  ['native', 32768, 1500],
] as const) {
  const engine = engines.get(name);
  if (!engine) {
    console.log(`${name}: unavailable, skipped`);
    continue;
  }
  const cache = makeCache(engine, S);
  const pool = new AttentionPool({ backend: name, threads: 2 });
  for (const method of ['dense', 'sparq'] as const) {
    native.attnSetThreads(1);
    const one = await medianMs(`${name} ${method} 1t`, direct(engine, method, cache), timeMs);
    native.attnSetThreads(2);
    const two = name === 'native' ? await medianMs(`${name} ${method} 2t`, direct(engine, method, cache), timeMs) : NaN;
    native.attnSetThreads(nativeDefault);
    const pooled = await pooledMs(pool, method, cache, timeMs);
    const best = Math.min(pooled, Number.isNaN(two) ? Infinity : two);
    const col = (x: number) => (Number.isNaN(x) ? '-' : x.toFixed(2)).padStart(9);
    console.log(
      `${name.padEnd(10)}  ${method.padEnd(6)} ${String(S).padStart(6)} ${col(one)}  ${col(two)}  ${col(pooled)}   ${(one / best).toFixed(2)}x`,
    );
  }
  await pool.close();
}
console.log(
  '\ndirect 2t = native std::thread pool with 2 threads (reference has no threads of its own); pool 2w = @sparq/pool, 2 piscina workers',
);

// The pool's hand-off: median of 2,000 single calls each (weights hot in the L3).
console.log('\n# native pool hand-off: Q8_0 int8 matvec x 2048 columns, weights in L3, median us per call');
const nativeEngine = engines.get('native');
if (!nativeEngine) console.log('native: unavailable, skipped');
else {
  for (const rows of [512, 2048, 5632]) {
    const w = Tensor.zeros('q8_0', [rows, 2048]);
    nativeEngine.quantize(
      w,
      Tensor.f32(
        [rows, 2048],
        Float32Array.from({ length: rows * 2048 }, () => Math.random() - 0.5),
      ),
    );
    const x = Tensor.f32(
      [2048],
      Float32Array.from({ length: 2048 }, () => Math.random() - 0.5),
    );
    const y = Tensor.zeros('f32', [rows]);
    const times: string[] = [];
    for (const threads of [1, 2]) {
      native.attnSetThreads(threads);
      for (let i = 0; i < 200; i++) nativeEngine.matvec(y, w, x, 'int8');
      const us: number[] = [];
      for (let i = 0; i < 2000; i++) {
        const t0 = performance.now();
        nativeEngine.matvec(y, w, x, 'int8');
        us.push(1000 * (performance.now() - t0));
      }
      us.sort((a, b) => a - b);
      times.push(`${threads} thread${threads > 1 ? 's' : ''} ${us[1000].toFixed(1)}`);
    }
    native.attnSetThreads(nativeDefault);
    console.log(`${String(rows).padStart(5)} rows: ${times.join(', ')}`);
  }
}
