/**
 * The exact-attention pieces every op composes (spec.md §1), for one head group
 * (group.ts) over a list of positions:
 *
 *   scores  (g, n) = q_t · K[pos]^T / sqrt(d)        reads n K rows  (n*d elements; int8-key-scores.ts for q8_0 / q4_0)
 *   probs   (g, n) = softmax of each row               (softmax.ts)
 *   y_t     (d)    = sum_j probs[t, j] * V[pos_j]      reads n V rows  (n*d elements)
 *
 * Dense uses all valid positions; SparQ step 3 uses i2; the baselines use their
 * own budgets. Each K or V row is read once and used by the whole group.
 */
import { isBlockKV, type AttentionStats, type KVCache } from '@sparq/core';
import { readRow } from './cache-read.ts';
import type { HeadGroup } from './group.ts';
import { int8KeyScores } from './int8-key-scores.ts';
import { softmaxRows } from './softmax.ts';

/**
 * scores (g, n) <- q_t · K[positions[j]] * scale, for each head t of the group. Counts n*d K elements.
 * Quantized K rows (q8_0, q4_0) are scored in integers against the quantized query (int8-key-scores.ts).
 */
export function keyScores(
  scores: Float32Array,
  group: HeadGroup,
  cache: KVCache,
  positions: Int32Array,
  scale: number,
  stats?: AttentionStats,
): void {
  const { g, d, q, qAt } = group;
  const n = positions.length;
  if (stats) stats.kElements += n * d;
  if (isBlockKV(cache.kDType)) return int8KeyScores(scores, group, cache, positions, scale);
  const kRow = new Float32Array(d); // (d) one key row, widened to f32
  // One key row per position, shared by the group's heads.
  for (let j = 0; j < n; j++) {
    readRow(kRow, cache, 'k', cache.kRowOffset(group.seq, group.kvh, positions[j]));
    // Dot product per head, summed in f64, stored as an f32 logit.
    for (let t = 0; t < g; t++) {
      let dot = 0;
      for (let i = 0; i < d; i++) dot += q[qAt + t * d + i] * kRow[i];
      scores[t * n + j] = dot * scale;
    }
  }
}

/** out_t (d) <- sum_j probs[t, j] * V[positions[j]], for each head t. Counts n*d V elements. */
export function weightedValues(
  group: HeadGroup,
  cache: KVCache,
  positions: Int32Array,
  probs: Float32Array,
  stats?: AttentionStats,
): void {
  const { g, d, out, outAt } = group;
  const n = positions.length;
  const vRow = new Float32Array(d); // (d) one value row, widened to f32
  const acc = new Float64Array(g * d); // (g, d) accumulators, f64 so the order of summation hardly matters
  // One value row per position, added into every head's accumulator.
  for (let j = 0; j < n; j++) {
    readRow(vRow, cache, 'v', cache.vRowOffset(group.seq, group.kvh, positions[j]));
    for (let t = 0; t < g; t++) {
      const p = probs[t * n + j];
      for (let i = 0; i < d; i++) acc[t * d + i] += p * vRow[i];
    }
  }
  // Round once into the f32 output.
  for (let e = 0; e < g * d; e++) out[outAt + e] = acc[e];
  if (stats) stats.vElements += n * d;
}

/**
 * Exact attention of the group over `positions` (the whole of spec.md §1 on a
 * subset): scores, softmax, weighted values into the group's output rows.
 * Returns probs (g, n) for callers that need the weights (H2O).
 */
export function attendPositions(
  group: HeadGroup,
  cache: KVCache,
  positions: Int32Array,
  stats?: AttentionStats,
): Float32Array {
  const n = positions.length;
  const probs = new Float32Array(group.g * n); // (g, n)
  keyScores(probs, group, cache, positions, 1 / Math.sqrt(group.d), stats);
  softmaxRows(probs, group.g, n);
  weightedValues(group, cache, positions, probs, stats);
  return probs;
}
