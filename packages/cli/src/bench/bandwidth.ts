/**
 * Memory read bandwidth, measured in the same run as a benchmark, so that the
 * "% of the bandwidth bound" compares with this machine's state right now
 * (busy neighbours lower both). The native addon sums a buffer far larger than
 * the caches (so every pass streams from DRAM) on the given number of threads;
 * the median pass wins. bench/bandwidth.ts runs the same probe.
 */
import { allocBuffer } from '@sparq/core';
import type { NativeControls } from './native.ts';
import { medianMs } from './timing.ts';

/** 1 GiB: far beyond any CPU's last-level cache. */
export const PROBE_BYTES = 1 << 30;

let buffer: Float32Array | null = null;

/** GB/s (1e9 bytes) of a streaming read of `bytes` on `threads` native threads, timed over about `timeMs`. */
export function measureReadBandwidth(
  native: NativeControls,
  threads: number,
  timeMs = 1500,
  bytes = PROBE_BYTES,
): number {
  if (!buffer || buffer.byteLength !== bytes) {
    buffer = null; // let a previous size go before allocating the next
    // Allocated as the engine's KV caches and weights are (huge pages where the OS grants them), so that
    // "% of the bandwidth" compares kernels with a read of the same kind of memory.
    buffer = new Float32Array(allocBuffer(bytes));
    buffer.fill(1); // touch every page: untouched pages all map to one zero page and would read from cache
  }
  const x = buffer;
  native.setThreads(threads);
  try {
    const ms = medianMs(() => native.readSum(x), { timeMs, minRuns: 3, warmup: 1 });
    return x.byteLength / (ms * 1e6);
  } finally {
    native.setThreads(native.defaultThreads);
  }
}

/** Lets the probe's buffer go (the end-to-end part measures resident memory; the next probe allocates again). */
export function releaseProbeBuffer(): void {
  buffer = null;
}
