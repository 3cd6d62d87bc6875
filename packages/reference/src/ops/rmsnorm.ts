/**
 * The `rmsnorm` op: RMS normalisation of each row, scaled by a learned weight (llama2.c's `rmsnorm`).
 *
 *   x, out (n, dim) f32 (any leading dimensions: rows of `dim`), weight (dim) f32; out may be x
 *   ss = sum_j x[j]^2 / dim + eps
 *   out[j] = weight[j] * (x[j] / sqrt(ss))
 *
 * Computed exactly as run.c does in f32, because the end-to-end test must reproduce llama2.c's
 * text byte for byte: one f32 accumulator for the squares (left to right), then `ss / dim + eps`,
 * the reciprocal `1 / sqrtf(ss)`, and `weight * (inv * x)` (multiplying by the reciprocal rounds
 * differently from dividing). Math.fround after each step makes JS's f64 arithmetic f32; for one
 * +, *, / or sqrt of f32 inputs, rounding the f64 result to f32 equals the f32 operation.
 */
import type { Tensor } from '@sparq/core';

const f32 = Math.fround;

/** x (n, dim) -> out (n, dim): out[t, j] = weight[j] * x[t, j] / sqrt(mean_j x[t, j]^2 + eps). */
export function rmsnorm(out: Tensor<'f32'>, x: Tensor<'f32'>, weight: Tensor<'f32'>, eps: number): void {
  const dim = x.shape[x.rank - 1];
  const rows = x.size / dim;
  const epsF = f32(eps); // llama2.c's 1e-5f
  for (let t = 0; t < rows; t++) {
    const xAt = x.offset + t * dim; // row t of x
    const outAt = out.offset + t * dim; // row t of out
    // Sum of squares, in f32 from left to right.
    let ss = 0;
    for (let j = 0; j < dim; j++) ss = f32(ss + f32(x.data[xAt + j] * x.data[xAt + j]));
    ss = f32(f32(ss / dim) + epsF);
    const inv = f32(1 / f32(Math.sqrt(ss)));
    // Each out[j] reads only x[j], which it has already read, so out may alias x.
    for (let j = 0; j < dim; j++) {
      out.data[outAt + j] = f32(weight.data[weight.offset + j] * f32(inv * x.data[xAt + j]));
    }
  }
}
