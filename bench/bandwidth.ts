/**
 * Memory read bandwidth, measured in the same run as a benchmark, so that its
 * "percent of the bandwidth bound" is against this machine's state right now
 * (spec.md §8: about 41 GB/s on one core, noisy 33-45 run to run; 2 cores 46-90).
 *
 *   import { measureReadBandwidth } from './bandwidth.ts';
 *   const gbPerSecond = await measureReadBandwidth(1);   // or: pnpm exec tsx bench/bandwidth.ts
 *
 * The probe is `sparq bench`'s (packages/cli/src/bench/bandwidth.ts): the native
 * addon's attnReadSum sums a 1 GiB Float32Array with SIMD on the given number of
 * native threads (no stores), far larger than the caches. This file adds the
 * tinybench timer the other bench/ scripts share.
 */
import { Bench } from 'tinybench';
import { measureReadBandwidth as probe } from '../packages/cli/src/bench/bandwidth.ts';
import { nativeControls } from '../packages/cli/src/bench/native.ts';

const native = nativeControls();

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
  if ('missing' in native) throw new Error(`read bandwidth needs the native addon: ${native.missing}`);
  return probe(native, threads, timeMs);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const threads of [1, 2])
    console.log(
      `read bandwidth, ${threads} thread${threads > 1 ? 's' : ''}: ${(await measureReadBandwidth(threads)).toFixed(1)} GB/s`,
    );
}
