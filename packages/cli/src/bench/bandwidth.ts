/**
 * Memory read bandwidth, measured in the same run as a benchmark, so that the
 * "% of the bandwidth bound" compares with this machine's state right now
 * (busy neighbours lower both). The native addon sums a buffer far larger than
 * the caches (so every pass streams from DRAM) on the given number of threads;
 * the median pass wins. bench/bandwidth.ts runs the same probe.
 *
 * The gather probe reads the same buffer as rows at scattered positions, the
 * way SparQ step 3 fetches the K and V rows of its top k: each row is a few
 * cache lines that no hardware prefetcher predicts, so one core's pace is its
 * misses in flight over the memory latency, not the stream bandwidth (`sparq
 * bench` prints both rates side by side).
 */
import { allocBuffer } from '@sparq/core';
import { mulberry32 } from '@sparq/llm';
import type { NativeControls } from './native.ts';
import { medianMs } from './timing.ts';

/** 1 GiB: far beyond any CPU's last-level cache. */
export const PROBE_BYTES = 1 << 30;

let buffer: Float32Array | null = null;

/** The probes' buffer of `bytes`, allocated on first use (and again when the size changes). */
function probeBuffer(bytes: number): Float32Array {
  if (!buffer || buffer.byteLength !== bytes) {
    buffer = null; // let a previous size go before allocating the next
    // Allocated as the engine's KV caches and weights are (huge pages where the OS grants them), so that
    // "% of the bandwidth" compares kernels with a read of the same kind of memory.
    buffer = new Float32Array(allocBuffer(bytes));
    buffer.fill(1); // touch every page: untouched pages all map to one zero page and would read from cache
  }
  return buffer;
}

/** GB/s (1e9 bytes) of a streaming read of `bytes` on `threads` native threads, timed over about `timeMs`. */
export function measureReadBandwidth(native: NativeControls, threads: number, timeMs = 1500, bytes = PROBE_BYTES): number {
  const x = probeBuffer(bytes);
  native.setThreads(threads);
  try {
    const ms = medianMs(() => native.readSum(x), { timeMs, minRuns: 3, warmup: 1 });
    return x.byteLength / (ms * 1e6);
  } finally {
    native.setThreads(native.defaultThreads);
  }
}

/** What the gather probe reads: rows of `rowBytes` (a multiple of 4), each kept with probability `density` (SparQ's k / S). */
export interface GatherShape {
  rowBytes: number;
  density: number;
}

/**
 * GB/s of the rows read by a gather over a buffer of `bytes`: a random subset of its rows at the
 * given density, in increasing order (as SparQ step 3 visits its positions), on `threads` native threads.
 */
export function measureGatherBandwidth(native: NativeControls, threads: number, { rowBytes, density }: GatherShape, timeMs = 1500, bytes = PROBE_BYTES): number {
  if (!(rowBytes >= 4 && rowBytes % 4 === 0 && rowBytes <= bytes)) throw new RangeError(`gather probe: rowBytes ${rowBytes} must be a multiple of 4 in [4, ${bytes}]`);
  if (!(density > 0 && density <= 1)) throw new RangeError(`gather probe: density ${density} out of range (0, 1]`);
  const x = probeBuffer(bytes);
  const rowFloats = rowBytes / 4;
  const count = Math.floor(x.length / rowFloats);
  const random = mulberry32(3);
  const picked: number[] = [];
  for (let i = 0; i < count; i++) if (random() < density) picked.push(i);
  const rows = Int32Array.from(picked.length > 0 ? picked : [0]);
  native.setThreads(threads);
  try {
    const ms = medianMs(() => native.gatherSum(x, rowFloats, rows), { timeMs, minRuns: 3, warmup: 1 });
    return (rows.length * rowBytes) / (ms * 1e6);
  } finally {
    native.setThreads(native.defaultThreads);
  }
}
