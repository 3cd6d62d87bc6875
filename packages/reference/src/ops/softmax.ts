/**
 * The `softmax` op: each row of x replaced by its softmax, in place (llama2.c's `softmax`).
 *
 *   x (n, len) f32 (any leading dimensions: rows of `len`), len >= 1
 *   x[j] <- exp(x[j] - max) / sum_k exp(x[k] - max)
 *
 * Subtracting the row's maximum first (for numerical stability): every exponent is then <= 0, so
 * exp cannot overflow, and the largest term is exactly 1, so the sum is >= 1 and never 0.
 * Computed as run.c does in f32 (the end-to-end test reproduces llama2.c's text byte for byte):
 * the exponentials are stored into x while one f32 accumulator sums them left to right, then each
 * is divided by the sum. expf is approximated by the f64 Math.exp rounded to f32.
 */
import type { Tensor } from '@sparq/core';

const f32 = Math.fround;

/** Each row of x (n, len) replaced by its softmax. */
export function softmax(x: Tensor<'f32'>): void {
  const len = x.shape[x.rank - 1];
  const rows = x.size / len;
  for (let t = 0; t < rows; t++) {
    const at = x.offset + t * len; // row t
    // The row's maximum (a NaN anywhere makes the row NaN below, which is what we want).
    let max = x.data[at];
    for (let j = 1; j < len; j++) if (x.data[at + j] > max) max = x.data[at + j];
    // Exponentials in place, summed in f32 from left to right.
    let sum = 0;
    for (let j = 0; j < len; j++) {
      x.data[at + j] = f32(Math.exp(f32(x.data[at + j] - max)));
      sum = f32(sum + x.data[at + j]);
    }
    // Normalise: division, as run.c does (`x[i] /= sum`).
    for (let j = 0; j < len; j++) x.data[at + j] = f32(x.data[at + j] / sum);
  }
}
