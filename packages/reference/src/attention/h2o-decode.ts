/**
 * h2oDecode: H2O, heavy-hitter eviction (Zhang et al., 2023; spec.md §3), stateful.
 *
 *   q, out (batch, nHeads, headDim); params k; state (H2OState):
 *   acc     (batch, nKvHeads, capacity)  attention weight accumulated per position
 *   evicted (batch, nKvHeads, capacity)  1 = evicted for good
 *
 * One step, per (sequence, KV head):
 *   C   = valid positions not evicted, the current token included
 *   while |C| > k: evict for good the j in C with the smallest acc outside the recent window
 *   (the w newest valid positions, w = floor(k/4) as spec.md §3 says and at least 1: the current
 *   token is always kept); ties: lowest index
 *   y_t = softmax(q_t · K[C]^T / sqrt(d)) · V[C]                     exact attention over C
 *   acc[j] += mean over the group's heads of the weight of j, for j in C
 * So no step attends more than k positions. Eviction starts at generation: the first step after
 * a prefill evicts the cache down to k by the scores the prefill's weights seeded (h2oSeed), as
 * the authors' code does; each later step evicts one (the previous step's k plus the new token).
 * Counted per KV head: |C|*d of K, |C|*d of V, 2*|C| of acc (each attended
 * position's score read and written; the eviction scan re-uses those values),
 * and 2*d per query head. Steady state, g = 1: 2kd + 2d + 2k. spec.md §3 writes
 * 2S for the score traffic, modelling a dense score vector over all S
 * positions; this implementation keeps scores for the survivors only.
 */
import type { AttentionOptions, BudgetParams, H2OState, KVCache, Tensor } from '@sparq/core';
import { attendPositions } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { forEachDecodeGroup } from './group.ts';

export function h2oDecode(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  state: H2OState,
  params: BudgetParams,
  options?: AttentionOptions,
): void {
  const stats = options?.stats;
  forEachDecodeGroup(out, q, cache, stats, (group) => {
    const { seq, kvh, g } = group;
    const base = (seq * cache.nKvHeads + kvh) * cache.capacity; // this head's slice of acc / evicted
    // C: the surviving valid positions (ascending), the current token included.
    let candidates = validPositions(cache, seq).filter((j) => state.evicted[base + j] === 0);
    // Evict down to k, never touching the recent window.
    const window = Math.max(1, Math.floor(params.k / 4)); // <= k, so |C| > k leaves a victim outside it
    const windowStart = cache.nPast[seq] - window;
    while (candidates.length > params.k) {
      let victim = -1;
      // Strict < keeps the lowest index among equal accumulated weights.
      for (const j of candidates) {
        if (j >= windowStart) continue;
        if (victim < 0 || state.acc[base + j] < state.acc[base + victim]) victim = j;
      }
      state.evicted[base + victim] = 1;
      candidates = candidates.filter((j) => j !== victim);
    }
    const probs = attendPositions(group, cache, candidates, stats); // (g, |C|)
    // Accumulate the group-mean weight of every attended position.
    const n = candidates.length;
    for (let c = 0; c < n; c++) {
      let w = 0;
      for (let t = 0; t < g; t++) w += probs[t * n + c];
      state.acc[base + candidates[c]] += w / g;
    }
    if (stats) stats.auxElements += 2 * n;
  });
}
