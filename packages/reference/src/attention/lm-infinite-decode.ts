/**
 * lmInfiniteDecode: LM-Infinite / StreamingLLM (spec.md §3): attention sinks plus a
 * recent window, a fixed pattern that never looks at the scores.
 *
 *   q, out (batch, nHeads, headDim); params k; k' = min(k, nValid)
 *   kept = the first `sinks` valid positions + the most recent k' - sinks,
 *   sinks = min(16, k' - 1), so the current token (the most recent) is always kept:
 *   k = 1 attends only the current token; k <= 16 keeps k - 1 sinks and the current token.
 *   When nValid <= k every valid position is kept (dense).
 *   y_t = softmax(q_t · K[kept]^T / sqrt(d)) · V[kept]
 * Cost per KV head for g = 1: 2*k'*d + 2*d.
 */
import type { AttentionOptions, BudgetParams, KVCache, Tensor } from '@sparq/core';
import { attendPositions } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { forEachDecodeGroup } from './group.ts';

/** Attention sinks of LM-Infinite and StreamingLLM: the first positions of the sequence. */
export const LM_INFINITE_SINKS = 16;

/** The positions LM-Infinite keeps out of `valid` (ascending) for budget k. */
export function lmInfinitePositions(valid: Int32Array, k: number): Int32Array {
  const n = valid.length;
  if (n <= k) return valid;
  const sinks = Math.min(LM_INFINITE_SINKS, k - 1);
  const kept = new Int32Array(k);
  // Sinks from the front, then the recent window from the back.
  kept.set(valid.subarray(0, sinks), 0);
  kept.set(valid.subarray(n - (k - sinks)), sinks);
  return kept;
}

export function lmInfiniteDecode(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  params: BudgetParams,
  options?: AttentionOptions,
): void {
  forEachDecodeGroup(out, q, cache, options?.stats, (group) => {
    attendPositions(group, cache, lmInfinitePositions(validPositions(cache, group.seq), params.k), options?.stats);
  });
}
