/**
 * h2oSeed: H2O's accumulated scores from a prefill (Zhang et al., 2023, as the authors' code runs
 * it: the prefill's attention weights start the accumulation that decode steps continue).
 *
 *   q (N, nHeads, headDim): the prefill's queries, of positions nPast - N .. nPast - 1 of `seq`;
 *   state.acc (batch, nKvHeads, capacity)
 *
 * For each KV head and each valid position j:
 *   acc[j] += sum over the prefill rows i that see j (causal: j <= nPast - N + i)
 *             of the mean over the group's heads t of softmax_i,t(j)
 * Reads K only: the weights, not the outputs (attentionPrefill computes those). Called once per
 * prefill call, after it, with the same q; nothing is evicted here (eviction starts at
 * generation: h2oDecode).
 */
import type { H2OState, KVCache, Tensor } from '@sparq/core';
import { keyScores } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { headGroup } from './group.ts';
import { softmaxRows } from './softmax.ts';

export function h2oSeed(state: H2OState, q: Tensor<'f32'>, cache: KVCache, seq: number): void {
  const n = q.shape[0];
  const valid = validPositions(cache, seq); // (nValid) ascending, ends at nPast - 1
  // Row i is the (n - 1 - i)-th token from the end: it sees the valid positions up to itself.
  for (let i = 0; i < n; i++) {
    const visible = valid.subarray(0, valid.length - (n - 1 - i));
    const m = visible.length;
    for (let kvh = 0; kvh < cache.nKvHeads; kvh++) {
      const group = headGroup(q, q, cache, i, seq, kvh);
      const probs = new Float32Array(group.g * m); // (g, m) this row's weights, per head of the group
      keyScores(probs, group, cache, visible, 1 / Math.sqrt(group.d));
      softmaxRows(probs, group.g, m);
      // Group-mean weight of each visible position, added to its accumulated score.
      const base = (seq * cache.nKvHeads + kvh) * cache.capacity;
      for (let c = 0; c < m; c++) {
        let w = 0;
        for (let t = 0; t < group.g; t++) w += probs[t * m + c];
        state.acc[base + visible[c]] += w / group.g;
      }
    }
  }
}
