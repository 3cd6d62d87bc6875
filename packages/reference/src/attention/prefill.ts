/**
 * attentionPrefill: causal dense attention for the N newest positions of one
 * sequence (spec.md §1; prefill always stays dense, spec.md §2).
 *
 *   q, out (N, nHeads, headDim); the N tokens already sit at positions
 *   nPast - N .. nPast - 1 of sequence `seq`.
 *   Token i sees valid positions [nPad, nPast - N + i]: the cache before it and itself.
 *
 * So token N - 1 sees exactly what a decode step would: the last row of a
 * prefill equals attentionDecode on the same cache. With options.h2o, H2O's
 * scores are then seeded from the same rows (h2oSeed).
 */
import type { KVCache, PrefillOptions, Tensor } from '@sparq/core';
import { attendPositions } from './attend.ts';
import { validPositions } from './cache-read.ts';
import { countIo, headGroup } from './group.ts';
import { h2oSeed } from './h2o-seed.ts';

export function attentionPrefill(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  seq: number,
  options?: PrefillOptions,
): void {
  const stats = options?.stats;
  if (stats) stats.calls++;
  const n = q.shape[0];
  const valid = validPositions(cache, seq); // (nValid) ascending, ends at nPast - 1
  // Token i is the (n - 1 - i)-th from the end: drop the positions after it (the causal mask).
  for (let i = 0; i < n; i++) {
    const visible = valid.subarray(0, valid.length - (n - 1 - i));
    // Each KV head's group of query heads, for this token.
    for (let kvh = 0; kvh < cache.nKvHeads; kvh++) {
      const group = headGroup(out, q, cache, i, seq, kvh);
      countIo(stats, group);
      attendPositions(group, cache, visible, stats);
    }
  }
  if (options?.h2o) h2oSeed(options.h2o, q, cache, seq);
}
