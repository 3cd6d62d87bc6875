/**
 * ggml's Q8_1 activation blocks: how ggml quantizes the activations before multiplying them with
 * Q4_1 and Q5_1 weights, whose elements carry a minimum m (w_j = d_w c_j + m). A Q8_1 block is a
 * Q8_0 block (activations-q8-0.ts: 32 codes q, step dx_b = f16(d)) plus the block's sum, stored
 * as f16 too:
 *
 *   s_b = f16(f32(d * sum_j q_j))      (d the unrounded f32 step; the integer sum is exact)
 *
 * The weight's minimum multiplies s_b: sum_j m dx q_j is taken as m s_b, so besides the codes'
 * rounding the product carries the f16 rounding of s_b (relative 2^-11 of |d sum_j q_j|).
 */
import { roundToF16, type Tensor } from '@sparq/core';
import { Q8_0_BLOCK, quantizeQ8_0Block, type ActivationBlocks } from './activations-q8-0.ts';

const f32 = Math.fround;

/** x (n, cols) f32 -> Q8_1 activation blocks; 32 divides cols. */
export function quantizeQ8_1(x: Tensor<'f32'>, n: number, cols: number): ActivationBlocks {
  const q = new Int8Array(n * cols);
  const dx = new Float32Array((n * cols) / Q8_0_BLOCK);
  const s = new Float32Array(dx.length);
  for (let b = 0; b < dx.length; b++) {
    const { d, sum } = quantizeQ8_0Block(q, b * Q8_0_BLOCK, x.data, x.offset + b * Q8_0_BLOCK);
    dx[b] = roundToF16(d);
    s[b] = roundToF16(f32(d * sum));
  }
  return { block: Q8_0_BLOCK, q, dx, s };
}
