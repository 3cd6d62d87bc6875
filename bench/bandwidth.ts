/**
 * Memory read bandwidth on one core, measured in the same run as a benchmark so
 * its "percent of the bandwidth bound" is against this machine's state right now
 * (SPEC 8: about 41 GB/s, noisy 33-45 run to run).
 *
 *   import { measureReadBandwidth } from './bandwidth.ts';
 *   const { gbPerSecond } = measureReadBandwidth();   // or: pnpm exec tsx bench/bandwidth.ts
 *
 * The native addon's readBandwidth sums a 256 MB Float32Array with SIMD (four
 * accumulators, no stores) and reports the fastest of `repeats` passes; the
 * buffer is far larger than the caches, so every pass streams from DRAM.
 */
import { loadAddon } from '../packages/native/lib/addon.ts';
import { basicAddon } from '../packages/native/lib/basic-ops.ts';

export interface ReadBandwidth {
  /** Bytes read per pass. */
  bytes: number;
  /** Fastest pass, seconds. */
  seconds: number;
  /** bytes / seconds / 1e9. */
  gbPerSecond: number;
}

/** Reads a `megabytes` MB buffer `repeats` times with the native addon; the best pass wins. */
export function measureReadBandwidth(megabytes = 256, repeats = 5): ReadBandwidth {
  const addon = basicAddon(loadAddon());
  const x = new Float32Array((megabytes * 2 ** 20) / 4);
  x.fill(1); // touch every page first, so the passes measure reads, not page faults
  const { seconds, bytes } = addon.readBandwidth(x, repeats);
  return { bytes, seconds, gbPerSecond: bytes / seconds / 1e9 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const bw = measureReadBandwidth();
  console.log(`read bandwidth: ${bw.gbPerSecond.toFixed(1)} GB/s (${(bw.bytes / 2 ** 20).toFixed(0)} MB in ${(bw.seconds * 1e3).toFixed(2)} ms, best of 5, one core)`);
}
