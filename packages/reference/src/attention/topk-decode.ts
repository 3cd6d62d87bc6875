/**
 * topkDecode: oracle top-k attention, which is also FlexGen's output (spec.md §3;
 * SparQ paper, Table 2 and Appendix G). The upper bound on position selection:
 * it reads all of K to find the positions that truly matter.
 *
 *   q, out (batch, nHeads, headDim); params k; k' = min(k, nValid)
 *   per KV head: p_t = softmax(q_t · K^T / sqrt(d)) over valid positions   reads nValid * d of K
 *                sel = top-k' positions by sum_t p_t (ties: lowest index)
 *                y_t = softmax(q_t · K[sel]^T / sqrt(d)) · V[sel]          reads k' * d of V
 * The second softmax re-uses the logits of the first pass (no second read of K).
 * Cost per KV head for g = 1: S*d + k'*d + 2*d (FlexGen's row of spec.md §3).
 */
import type { AttentionOptions, BudgetParams, KVCache, Tensor } from '@sparq/core';
import { keyScores, weightedValues } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { forEachDecodeGroup } from './group.ts';
import { topIndices } from './select.ts';
import { softmaxRows } from './softmax.ts';

export function topkDecode(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  params: BudgetParams,
  options?: AttentionOptions,
): void {
  const stats = options?.stats;
  forEachDecodeGroup(out, q, cache, stats, (group) => {
    const { g } = group;
    const valid = validPositions(cache, group.seq); // (n) ascending
    const n = valid.length;
    // Exact logits over every valid position (the full read of K).
    const logits = new Float32Array(g * n); // (g, n)
    keyScores(logits, group, cache, valid, 1 / Math.sqrt(group.d), stats);
    const probs = logits.slice(); // (g, n)
    softmaxRows(probs, g, n);
    // Rank positions by the group's summed probabilities.
    const score = new Float64Array(cache.capacity); // indexed by position
    for (let j = 0; j < n; j++) for (let t = 0; t < g; t++) score[valid[j]] += probs[t * n + j];
    const sel = topIndices(valid, params.k, score); // (k') ascending
    // Softmax over the selected logits only, then the weighted sum of their values.
    const m = sel.length;
    const selProbs = new Float32Array(g * m); // (g, k')
    for (let t = 0; t < g; t++) for (let s = 0; s < m; s++) selProbs[t * m + s] = logits[t * n + (sel[s] - valid[0])];
    softmaxRows(selProbs, g, m);
    weightedValues(group, cache, sel, selProbs, stats);
  });
}
