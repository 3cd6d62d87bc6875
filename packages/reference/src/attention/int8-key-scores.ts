/**
 * Key scores over quantized K rows (q8_0, q4_0): q · k as an integer dot product, the way
 * llama.cpp scores such a cache (issue 24).
 *
 *   scores (g, n) = q_t · K[pos_j] * scale    for the g heads t of a group, n positions j
 *
 * 1. Each query row q_t (d) is quantized into ggml's Q8_0 activation blocks along the head
 *    dimension (activations-q8-0.ts, the quantizer of the 'int8' weight products): per block b of
 *    32 components, int8 codes x_i and the step dq_b = f16(amax / 127).
 * 2. Each key row is read as integers (ggml-block.ts BlockCodes): per block b the codes c_i
 *    (q8_0: the int8; q4_0: the nibble - 8) and the block's f16 scale dk_b.
 * 3. Per block, the exact integer isum_b = sum_i c_i x_i (|isum_b| <= 32 * 128 * 127 < 2^19), and
 *      scores[t, j] = f32(scale * sum_b (dk_b dq_b) isum_b),
 *    the sum in f64, where every term is exact (dk_b dq_b has at most 22 significant bits, times
 *    isum_b at most 41), so the only approximation against f32 arithmetic is the query's rounding.
 *
 * Why integers: dense decode over a q8_0 row would otherwise widen, convert and scale every key
 * element to f32 and spend g f32 multiply-adds on it, one per head of the group. On the cores this
 * project runs on that arithmetic, not the memory, bounds the step once g >= 4 (docs/kv-cache.md
 * counts it: q8_0 on AVX-512 reads at most 24 GB/s per core at g = 4). An int8 dot product does 64
 * products per VNNI instruction (vpdpbusd) against 16 f32 FMAs, and the row's codes are used as
 * stored. It is also what llama.cpp computes: for a q8_0 or q4_0 K cache its CPU backend quantizes
 * Q into Q8_0 blocks (`vec_dot_type`) and calls `vec_dot_q8_0_q8_0` / `vec_dot_q4_0_q8_0`, with and
 * without flash attention; so sparq's logits over such a cache are now llama.cpp's up to f32 rounding.
 *
 * Every op that scores quantized K rows goes through here (keyScores, attend.ts): dense decode,
 * causal prefill, SparQ step 3 (the gathered rows), oracle top-k, H2O and LM-Infinite. Prefill
 * does too, so that the last row of a prefill still equals a decode step on the same cache (an
 * invariant the suites test), and because llama.cpp's prefill multiplies the same Q8_0 blocks.
 * SparQ step 1 reads K transposed (its own f32 / f16 / integer columns, kt-codes.ts), not rows, and
 * keeps its f32 sums; V is weighted in f32 (attend.ts weightedValues).
 */
import { Tensor, type BlockDType, type KVCache } from '@sparq/core';
import { Q8_0_BLOCK, quantizeQ8_0 } from '../ops/activations-q8-0.ts';
import { blockCodesBytes } from '../ops/quantize.ts';
import type { HeadGroup } from './group.ts';

/** scores (g, n) <- q_t · K[positions[j]] * scale by the integer product above; K rows q8_0 or q4_0 (keyScores counts the reads). */
export function int8KeyScores(
  scores: Float32Array,
  group: HeadGroup,
  cache: KVCache,
  positions: Int32Array,
  scale: number,
): void {
  const { g, d } = group;
  const n = positions.length;
  const blocks = d / Q8_0_BLOCK; // core refuses block caches whose d is not a multiple of 32
  // The group's queries (g, d) as Q8_0 blocks: codes x (g, d), steps dq (g, blocks).
  const acts = quantizeQ8_0(new Tensor('f32', group.q, [g, d], undefined, group.qAt), g, d);
  const codes = new Int32Array(d); // (d) one key row's codes c
  const dk = new Float32Array(blocks); // (blocks) its block scales
  const mins = new Float32Array(blocks); // q8_0 / q4_0 have none (-0); blockCodesBytes writes them
  // One key row per position, as integers, shared by the group's heads.
  for (let j = 0; j < n; j++) {
    const at = cache.kRowOffset(group.seq, group.kvh, positions[j]);
    blockCodesBytes(cache.kDType as BlockDType, codes, dk, mins, cache.k as Uint8Array, at, d);
    for (let t = 0; t < g; t++) {
      let dot = 0; // f64: every term below is exact
      for (let b = 0; b < blocks; b++) {
        // The block's integer dot product, exact in int32 (and in a JS number).
        let isum = 0;
        for (let i = b * Q8_0_BLOCK; i < (b + 1) * Q8_0_BLOCK; i++) isum += codes[i] * acts.q[t * d + i];
        dot += dk[b] * acts.dx[t * blocks + b] * isum;
      }
      scores[t * n + j] = dot * scale;
    }
  }
}
