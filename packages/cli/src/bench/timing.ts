/**
 * The timer of `sparq bench`: the median of repeated runs, robust to the
 * outliers a shared, noisy machine produces (another process taking the core
 * for a while). Synchronous: the kernels it times are.
 */

export interface TimingOptions {
  /** Keep running until this much time has passed (ms)... */
  timeMs: number;
  /** ...and at least this many timed runs. */
  minRuns?: number;
  /** Untimed runs first (page faults, caches, branch predictors). */
  warmup?: number;
}

/** Median milliseconds of one call of `fn`. */
export function medianMs(fn: () => void, { timeMs, minRuns = 5, warmup = 2 }: TimingOptions): number {
  for (let i = 0; i < warmup; i++) fn();
  const samples: number[] = [];
  const start = performance.now();
  while (samples.length < minRuns || performance.now() - start < timeMs) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  return median(samples);
}

/** The middle value (mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median: no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
