/**
 * The `matvecInt4` and `matmulInt4` ops (spec.md §5): products with a group-wise INT4 weight matrix
 * (int4-groupwise.ts), by one of two paths.
 *
 *   matvecInt4: w Int4Matrix (rows, cols) @ x (cols)        -> out (rows)
 *   matmulInt4: x (n, cols) @ w^T, w Int4Matrix (rows, cols) -> out (n, rows)
 *   out[t, r] = sum_c w[r, c] * x[t, c],  w[r, c] = (q - zero) * scale of its group
 *
 * path 'dequant': decode the weight row to f32 (dequantizeInt4Row) and take the f32 dot product
 *   of dot.ts (one accumulator, left to right, like llama2.c).
 * path 'int8' (Neural Speed's compute path, what VNNI instructions accelerate): quantize each
 *   activation group to int8, do the products in integers, and scale once per group.
 *
 * The int8 path, exactly (a native kernel must reproduce every integer bit for bit):
 *   For each row t of x and each group g (its groupSize columns c; int8-activations.ts):
 *     amax_x  = max_c |x[t, c]|
 *     scale_x = max(f32(amax_x / 127), 2^-126)          (f32 division; the floor as in int4-groupwise.ts)
 *     q_x[c]  = roundf(f32(x[t, c] / scale_x))          (halves away from zero; always in [-127, 127])
 *   For each weight row r and group g, with q_w[c] in [-8, 7], zero and scale_w of the group:
 *     S_wx = sum_c q_w[c] * q_x[c]       int32, exact: |S_wx| <= 8 * 127 * groupSize
 *     S_x  = sum_c q_x[c]                int32, exact
 *     isum = S_wx - zero * S_x           int32, exact; equals sum_c (q_w[c] - zero) * q_x[c]
 *   (A VNNI kernel that multiplies unsigned bytes, e.g. q_x + 128, must undo its offset in
 *   integers so that isum comes out identical.) Then, in f32, groups in order g = 0, 1, ...:
 *     acc = f32(acc + f32(f32(isum) * f32(scale_w * scale_x)))
 *   f32(isum) is exact while |isum| <= 2^24; as |q_w - zero| <= 15, that holds for any group of up
 *   to 8806 elements (15 * 127 * 8806 < 2^24), and beyond it f32(isum) is C's (float) conversion.
 */
import type { Int4Matrix, ProductPath, Tensor } from '@sparq/core';
import { dotF32 } from './dot.ts';
import { dequantizeInt4Row, readInt4 } from './int4-groupwise.ts';
import { quantizeActivations } from './int8-activations.ts';

const f32 = Math.fround;

/** The int8 path for all n rows of x: out[t, r] from the int32 group sums above. */
function productInt8(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, n: number): void {
  const { rows, cols, groupSize, groupsPerRow } = w;
  const qx = new Int8Array(n * cols); // (n, cols) int8 activations
  const sx = new Float32Array(n * groupsPerRow); // (n, groupsPerRow) their scales
  quantizeActivations(qx, sx, x, n, cols, groupSize);
  for (let r = 0; r < rows; r++) {
    for (let t = 0; t < n; t++) {
      let acc = 0;
      // Group by group: an exact integer sum, then one f32 scaling.
      for (let g = 0; g < groupsPerRow; g++) {
        const wg = r * groupsPerRow + g; // the weight group's index in scales / zeros
        let sWx = 0;
        let sX = 0;
        for (let i = 0; i < groupSize; i++) {
          const c = g * groupSize + i;
          sWx += readInt4(w.packed, r * cols + c) * qx[t * cols + c];
          sX += qx[t * cols + c];
        }
        const isum = sWx - w.zeros[wg] * sX;
        acc = f32(acc + f32(f32(isum) * f32(w.scales[wg] * sx[t * groupsPerRow + g])));
      }
      out.data[out.offset + t * rows + r] = acc;
    }
  }
}

/** The dequant path for all n rows of x: decode each weight row once, dot it with every x row. */
function productDequant(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, n: number): void {
  const { rows, cols } = w;
  const row = new Float32Array(cols); // (cols) one decoded weight row, reused for every r
  for (let r = 0; r < rows; r++) {
    dequantizeInt4Row(row, 0, w, r);
    for (let t = 0; t < n; t++) {
      out.data[out.offset + t * rows + r] = dotF32(row, 0, x.data, x.offset + t * cols, cols);
    }
  }
}

/** w Int4Matrix (rows, cols) @ x (cols) -> out (rows). */
export function matvecInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath): void {
  if (path === 'int8') productInt8(out, w, x, 1);
  else productDequant(out, w, x, 1);
}

/** x (n, cols) @ w^T, w Int4Matrix (rows, cols) -> out (n, rows). */
export function matmulInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath): void {
  if (path === 'int8') productInt8(out, w, x, x.shape[0]);
  else productDequant(out, w, x, x.shape[0]);
}
