/**
 * The 'int8' product for ggml block weights (issue 11; SPEC 5): what `matvec` / `matmul` compute
 * with path 'int8' when w is a block dtype. It is ggml's own compute path (its quantized matmuls
 * multiply activations quantized to 8 bits per 32 elements), and what integer SIMD (VNNI,
 * vpmaddubsw) accelerates.
 *
 *   matvec: w (rows, cols) block dtype @ x (cols)        -> out (rows)
 *   matmul: x (n, cols) @ w^T, w (rows, cols) block dtype -> out (n, rows)
 *
 * Exactly (another backend must get every integer below bit for bit; only its f32 rounding may differ):
 * 1. Each row t of x is quantized per 32-element block b by int8-activations.ts (the INT4 'int8'
 *    path's quantizer with group 32):
 *      dx_b = max(f32(amax_b / 127), 2^-126),  q_j = roundHalfAway(f32(x[t, j] / dx_b)),  |q_j| <= 127
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
 *    then, in f32, from acc = 0, the sub-blocks in row order s = 0, 1, ..., each adding its scale
 *    term and then its minimum term:
 *      acc = f32(acc + f32(f32(dl_s * dx_b(s)) * isum_s))
 *      acc = f32(acc + f32(f32(m_s * dx_b(s)) * qsum_s))        (a zero when m_s = -0)
 *    out[t, r] = acc. Up to that rounding, out[t, r] = sum_j (dl_s c_j + m_s) dx_b q_j: the exact
 *    product of the weights with activations moved by at most half a step dx_b each.
 * Other backends may scale and add in another order (ggml multiplies d * dx once per super-block
 * and sums sc_s * isum_s in integers); test/conformance/block-int8.spec.ts bounds what that may change.
 */
import type { BlockDType, Tensor } from '@sparq/core';
import { quantizeActivations } from './int8-activations.ts';
import { blockCodesRun, subBlockOf } from './quantize.ts';

const f32 = Math.fround;

/** Columns per activation block: each has its own int8 step dx (ggml's Q8_0 block). */
export const ACTIVATION_BLOCK = 32;

/** out (n, rows) = x (n, cols) @ w^T by the 'int8' path above, w (rows, cols) any block dtype. */
export function productBlockInt8(out: Tensor<'f32'>, w: Tensor<BlockDType>, x: Tensor<'f32'>, n: number): void {
  const [rows, cols] = w.shape;
  const sub = subBlockOf(w.dtype);
  const steps = cols / ACTIVATION_BLOCK; // activation blocks per row
  const qx = new Int8Array(n * cols); // (n, cols) activation codes q
  const sx = new Float32Array(n * steps); // (n, cols / 32) their steps dx
  quantizeActivations(qx, sx, x, n, cols, ACTIVATION_BLOCK);
  // One weight row as integers, reused for every r and every row of x.
  const codes = new Int32Array(cols); // (cols) c_j
  const scales = new Float32Array(cols / sub); // (cols / sub) dl_s
  const mins = new Float32Array(cols / sub); // (cols / sub) m_s
  for (let r = 0; r < rows; r++) {
    blockCodesRun(codes, scales, mins, w, r * cols, cols);
    for (let t = 0; t < n; t++) {
      let acc = 0;
      for (let s = 0; s < cols / sub; s++) {
        const dx = sx[t * steps + Math.floor((s * sub) / ACTIVATION_BLOCK)];
        let isum = 0;
        let qsum = 0;
        for (let j = s * sub; j < (s + 1) * sub; j++) {
          isum += codes[j] * qx[t * cols + j];
          qsum += qx[t * cols + j];
        }
        acc = f32(acc + f32(f32(scales[s] * dx) * isum));
        acc = f32(acc + f32(f32(mins[s] * dx) * qsum));
      }
      out.data[out.offset + t * rows + r] = acc;
    }
  }
}
