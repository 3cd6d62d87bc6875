/**
 * attentionDecode: dense decode attention (spec.md §1), the baseline every other
 * method approximates.
 *
 *   q, out (batch, nHeads, headDim); head h reads KV head floor(h / g)
 *   y_h = softmax(q_h · K^T / sqrt(d) over valid positions [nPad, nPast)) · V
 *
 * Cost per KV head (spec.md §3): K and V read in full, 2*S*d, plus q and y, 2*d per
 * query head. Accumulation: f64 dot products and sums, f32 scores and output.
 */
import type { AttentionOptions, KVCache, Tensor } from '@sparq/core';
import { attendPositions } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { forEachDecodeGroup } from './group.ts';

export function attentionDecode(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  options?: AttentionOptions,
): void {
  // Every (sequence, KV head) group attends all of its sequence's valid positions.
  forEachDecodeGroup(out, q, cache, options?.stats, (group) => {
    attendPositions(group, cache, validPositions(cache, group.seq), options?.stats);
  });
}
