/**
 * ggml's Q8_K activation blocks: how ggml quantizes the activations before multiplying them with
 * the K-quants (Q2_K .. Q6_K) and IQ4_XS. Each row of x (n, cols) is cut into super-blocks of 256
 * elements, each becoming 256 int8 codes sharing one f32 step (ggml's `quantize_row_q8_K_ref`,
 * which x86 runs as it is):
 *
 *   max  = the x_j of largest |x_j| (the first such j)
 *   scale = f32(-127 / max)                     negative for a positive max: the codes flip sign
 *   q_j  = min(127, nearest(f32(scale * x_j)))  halves to even (ggml's nearest_int)
 *   dx_b = f32(1 / scale)                        so x_j = dx_b q_j within half a step
 *   a block of zeros: dx_b = 0, every q_j = 0
 *
 * ggml also stores the sums of each 16 consecutive codes (bsums), from which its kernels take
 * the minimum terms sum_j m dx q_j = m dx (sum of the sub-block's q_j); the product here sums the
 * codes itself (block-int8-matvec.ts), the same integers.
 * When scale overflows (|max| below about 3.7e-37), ggml's nearest_int of an infinity stores the
 * code 0, as activationCode does, and dx_b = -0: the products are 0.
 */
import type { Tensor } from '@sparq/core';
import { activationCode, type ActivationBlocks } from './activations-q8-0.ts';

const f32 = Math.fround;

/** Elements per Q8_K activation block: a K-quant super-block. */
export const Q8_K_BLOCK = 256;

/** x (n, cols) f32 -> Q8_K activation blocks; 256 divides cols. */
export function quantizeQ8_K(x: Tensor<'f32'>, n: number, cols: number): ActivationBlocks {
  const q = new Int8Array(n * cols);
  const dx = new Float32Array((n * cols) / Q8_K_BLOCK);
  for (let b = 0; b < dx.length; b++) {
    const at = x.offset + b * Q8_K_BLOCK; // the block's first element in x.data; b * 256 in q
    // The signed value of largest magnitude (strictly larger: ties keep the first).
    let max = 0;
    for (let j = 0; j < Q8_K_BLOCK; j++) if (Math.abs(x.data[at + j]) > Math.abs(max)) max = x.data[at + j];
    if (max === 0) continue; // dx 0, codes 0
    const scale = f32(-127 / max);
    for (let j = 0; j < Q8_K_BLOCK; j++) q[b * Q8_K_BLOCK + j] = activationCode(f32(scale * x.data[at + j]));
    dx[b] = f32(1 / scale);
  }
  return { block: Q8_K_BLOCK, q, dx, s: new Float32Array(0) };
}
