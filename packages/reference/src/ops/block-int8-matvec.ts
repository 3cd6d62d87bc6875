/**
 * The 'int8' product for ggml block weights (issues 11 and 29; spec.md §5): what `matvec` / `matmul`
 * compute with path 'int8' when w is a block dtype. It is ggml's own compute path: its quantized
 * products multiply the weights' integer codes with activations quantized to 8 bits, in the
 * activation blocks ggml pairs with each weight type (its `vec_dot_type`), which is what integer
 * SIMD (VNNI, vpmaddubsw) accelerates.
 *
 *   matvec: w (rows, cols) block dtype @ x (cols)        -> out (rows)
 *   matmul: x (n, cols) @ w^T, w (rows, cols) block dtype -> out (n, rows)
 *
 * Exactly (another backend must get every integer below bit for bit; only its f32 rounding may differ):
 * 1. Each row t of x is quantized into the activation blocks of ACTIVATIONS[w.dtype]: codes q_j
 *    (|q_j| <= 127) and per block b a step dx_b, and for Q8_1 a block sum s_b:
 *      Q8_0 (activations-q8-0.ts) for Q4_0, Q5_0, Q8_0, IQ4_NL:  32 elements, dx_b = f16(amax / 127)
 *      Q8_1 (activations-q8-1.ts) for Q4_1, Q5_1:                Q8_0 plus s_b = f16(d sum q)
 *      Q8_K (activations-q8-k.ts) for Q2_K .. Q6_K, IQ4_XS:      256 elements, dx_b = 1 / f32(-127 / max)
 * 2. Each weight block is read as integers (ggml-block.ts BlockCodes): codes c_j and, per sub-block s
 *    (16 elements for Q2_K, Q3_K, Q6_K; 32 for Q4_K, Q5_K, IQ4_XS; the whole block for the 32-element
 *    types), an f32 scale dl_s and minimum m_s, the weight being dl_s * c_j + m_s. With u the stored
 *    unsigned code, d and dmin the block's f16 scales, sc and mn its sub-block scale and minimum:
 *      Q4_0  c = u - 8,  Q5_0  c = u - 16, Q8_0 c = the int8: dl = d
 *      Q4_1, Q5_1        c = u, dl = d, m = the f16 min
 *      Q2_K, Q4_K, Q5_K  c = u, dl = f32(d * sc), m = -f32(dmin * mn)
 *      Q3_K  c = u - 4,  dl = f32(d * (sc - 32));   Q6_K  c = u - 32, dl = f32(d * sc), sc an int8
 *      IQ4_NL c = the int8 level, dl = d;            IQ4_XS c = the level, dl = f32(d * (ls - 32))
 *    and m_s = -0 (no minimum) for the others. A sub-block lies inside one activation block b(s).
 * 3. Per sub-block, exact integers (|isum_s| <= 32 * 127 * 127 < 2^19, so exact in f32 too):
 *      isum_s = sum_j c_j q_j,   qsum_s = sum_j q_j
 *    and the sub-block's activation sum xs_s: s_b(s) for Q8_1 (32-element sub-blocks: the block's
 *    own sum), else f32(dx_b(s) * qsum_s). Then, in f32, from acc = 0, the sub-blocks in row order
 *    s = 0, 1, ..., each adding its scale term and then its minimum term:
 *      acc = f32(acc + f32(f32(dl_s * dx_b(s)) * isum_s))
 *      acc = f32(acc + f32(m_s * xs_s))                          (a zero when m_s = -0)
 *    out[t, r] = acc. Up to that rounding, out[t, r] = sum_j (dl_s c_j + m_s) dx_b q_j (with Q8_1's
 *    s_b for dx_b sum q): the product of the weights with activations moved by the block's rounding.
 * ggml scales and adds in another order (it multiplies d * dx once per super-block and sums
 * sc_s * isum_s in integers), which changes only f32 roundings; test/conformance/block-int8.spec.ts
 * bounds what that may change. docs/int8-products.md compares the whole path with llama.cpp's.
 */
import type { BlockDType, Tensor } from '@sparq/core';
import type { ActivationBlocks } from './activations-q8-0.ts';
import { quantizeQ8_0 } from './activations-q8-0.ts';
import { quantizeQ8_1 } from './activations-q8-1.ts';
import { quantizeQ8_K } from './activations-q8-k.ts';
import { blockCodesRun, subBlockOf } from './quantize.ts';

const f32 = Math.fround;

/** The activation quantizer ggml pairs with each weight type (its vec_dot_type). */
export const ACTIVATIONS: Readonly<
  Record<BlockDType, (x: Tensor<'f32'>, n: number, cols: number) => ActivationBlocks>
> = {
  q4_0: quantizeQ8_0,
  q5_0: quantizeQ8_0,
  q8_0: quantizeQ8_0,
  iq4_nl: quantizeQ8_0,
  q4_1: quantizeQ8_1,
  q5_1: quantizeQ8_1,
  q2_k: quantizeQ8_K,
  q3_k: quantizeQ8_K,
  q4_k: quantizeQ8_K,
  q5_k: quantizeQ8_K,
  q6_k: quantizeQ8_K,
  iq4_xs: quantizeQ8_K,
};

/** out (n, rows) = x (n, cols) @ w^T by the 'int8' path above, w (rows, cols) any block dtype. */
export function productBlockInt8(out: Tensor<'f32'>, w: Tensor<BlockDType>, x: Tensor<'f32'>, n: number): void {
  const [rows, cols] = w.shape;
  const sub = subBlockOf(w.dtype);
  const acts = ACTIVATIONS[w.dtype](x, n, cols);
  const steps = cols / acts.block; // activation blocks per row
  // One weight row as integers, reused for every r and every row of x.
  const codes = new Int32Array(cols); // (cols) c_j
  const scales = new Float32Array(cols / sub); // (cols / sub) dl_s
  const mins = new Float32Array(cols / sub); // (cols / sub) m_s
  for (let r = 0; r < rows; r++) {
    blockCodesRun(codes, scales, mins, w, r * cols, cols);
    for (let t = 0; t < n; t++) {
      let acc = 0;
      for (let s = 0; s < cols / sub; s++) {
        const b = t * steps + Math.floor((s * sub) / acts.block); // the sub-block's activation block
        let isum = 0;
        let qsum = 0;
        for (let j = s * sub; j < (s + 1) * sub; j++) {
          isum += codes[j] * acts.q[t * cols + j];
          qsum += acts.q[t * cols + j];
        }
        const xs = acts.s.length > 0 ? acts.s[b] : f32(acts.dx[b] * qsum);
        acc = f32(acc + f32(f32(scales[s] * acts.dx[b]) * isum));
        acc = f32(acc + f32(mins[s] * xs));
      }
      out.data[out.offset + t * rows + r] = acc;
    }
  }
}
