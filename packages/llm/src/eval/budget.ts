/**
 * The written rule that picks each method's parameters for a target
 * compression ratio (spec.md §3's elements for the method over dense's, averaged
 * over the decode steps a task scores; a step over S valid positions):
 *
 *   sparq   r = round(target * d), clamped to 1..d: the r-column pass over K
 *           (S*r elements) then costs half the budget (target * S*d of 2*S*d),
 *           leaving the other half for the k rows of K and V; l = floor(k/4)
 *   h2o     (r unused)
 *   lminf   (r unused)
 *           k = the budget whose mean ratio over the task's steps is nearest the
 *           target (the lower k on a tie), searched over 1..max S
 *   oracle  the k SparQ gets at that target: oracle top-k is the selection SparQ
 *           approximates; it reads all of K, so its own ratio is >= 1/2
 *   dense   ratio 1
 *
 * With head dim 8 some targets are out of reach: H2O's score traffic alone
 * (2*S elements) is 1/d = 1/8 of dense, so at 1/8 it gets k = 1.
 */
import type { AttentionMethod } from '@sparq/core';
import { attentionCost, type AttentionConfig } from '../attention-method.ts';

/** The compression ratios the sweep compares methods at. */
export const COMPRESSION_TARGETS: readonly number[] = [1 / 2, 1 / 4, 1 / 8];

/** Mean over the steps (S valid positions each) of spec.md §3's method / dense ratio. */
export function meanCompression(a: AttentionConfig, steps: readonly number[], d: number): number {
  if (steps.length === 0) return 1;
  const dense: AttentionConfig = { ...a, method: 'dense' };
  let sum = 0;
  for (const S of steps) sum += attentionCost(a, S, d) / attentionCost(dense, S, d);
  return sum / steps.length;
}

/** The largest step (at least 1). */
const largest = (steps: readonly number[]): number => steps.reduce((a, b) => Math.max(a, b), 1);

/** SparQ's query components for a target ratio: half the budget to the r-column pass. */
export function sparqComponents(target: number, d: number): number {
  return Math.min(d, Math.max(1, Math.round(target * d)));
}

/**
 * The k in 1..max(steps) whose mean ratio is nearest `target` (the lower k on a tie).
 * The ratio never decreases with k, so a binary search finds the first k at or
 * above the target; the answer is it or the k below it.
 */
export function nearestBudget(base: AttentionConfig, target: number, steps: readonly number[], d: number): number {
  const ratio = (k: number) => meanCompression({ ...base, k, l: Math.floor(k / 4) }, steps, d);
  let lo = 1;
  let hi = largest(steps);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ratio(mid) >= target) hi = mid;
    else lo = mid + 1;
  }
  return lo > 1 && target - ratio(lo - 1) <= Math.abs(ratio(lo) - target) ? lo - 1 : lo;
}

/** The configuration of `method` at `target` for a task whose decode steps are `steps`. */
export function configForTarget(
  method: AttentionMethod,
  target: number,
  steps: readonly number[],
  d: number,
): AttentionConfig {
  const base: AttentionConfig = { method, r: d, k: 1, l: 0, reallocate: true };
  if (method === 'dense') return { ...base, k: largest(steps) };
  const sparq = { ...base, method: 'sparq' as const, r: sparqComponents(target, d) };
  const k = nearestBudget(method === 'oracle' || method === 'sparq' ? sparq : { ...base, method }, target, steps, d);
  if (method === 'sparq' || method === 'oracle') return { ...sparq, method, k, l: Math.floor(k / 4) };
  return { ...base, k, l: Math.floor(k / 4) };
}
