/**
 * Memory read bandwidth, measured in the same run as a benchmark, so that its
 * "percent of the bandwidth bound" is against this machine's state right now
 * (SPEC 8: about 41 GB/s on one core, noisy 33-45 run to run; 2 cores 46-90).
 *
 *   import { measureReadBandwidth } from './bandwidth.ts';
 *   const gbPerSecond = await measureReadBandwidth(1);   // or: pnpm exec tsx bench/bandwidth.ts
 *
 * The native addon's attnReadSum sums a 1 GiB Float32Array with SIMD on the
 * given number of native threads (no stores); the buffer is far larger than the
 * caches, so every pass streams from DRAM. The median of several passes wins.
 */
import { Bench } from 'tinybench';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';

const addon = attentionAddon(loadAddon());
let buffer: Float32Array | null = null;

/** Median time in ms of `fn` over about `timeMs` of runs (tinybench, after warm-up). */
export async function medianMs(name: string, fn: () => void, timeMs: number): Promise<number> {
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(100, timeMs / 2), warmupIterations: 3, iterations: 5 });
  bench.add(name, fn);
  await bench.run();
  const result = bench.tasks[0].result as unknown as { latency?: { p50?: number; mean: number } } | undefined;
  const ms = result?.latency?.p50 ?? result?.latency?.mean;
  if (ms === undefined) throw new Error(`${name}: tinybench gave no latency`);
  return ms;
}

/** GB/s of a streaming read on `threads` native threads over about `timeMs` (the default thread count is restored after). */
export async function measureReadBandwidth(threads: number, timeMs = 1500): Promise<number> {
  if (!buffer) {
    buffer = new Float32Array(256 * 1024 * 1024); // 1 GiB
    buffer.fill(1); // touch every page: untouched pages all map to one zero page and would read from cache
  }
  const x = buffer;
  const before = addon.attnThreads();
  addon.attnSetThreads(threads);
  try {
    const ms = await medianMs(`read ${threads}t`, () => addon.attnReadSum(x), timeMs);
    return x.byteLength / (ms * 1e6);
  } finally {
    addon.attnSetThreads(before);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const threads of [1, 2]) console.log(`read bandwidth, ${threads} thread${threads > 1 ? 's' : ''}: ${(await measureReadBandwidth(threads)).toFixed(1)} GB/s`);
}
