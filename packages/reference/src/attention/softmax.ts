/**
 * Softmax over a row of gathered scores (spec.md §1): masked positions are simply
 * never gathered, so they get probability 0 without any -Infinity tricks.
 *
 *   x[at .. at + n) f32 logits -> probabilities, in place
 *
 * Precision: logits and probabilities are stored as f32; the exponentials and
 * their sum are computed in f64 (JS numbers), i.e. "f32 or wider" accumulation.
 */
export function softmaxRow(x: Float32Array, at: number, n: number): void {
  // Subtract the max first: exp never overflows and the largest term is exactly 1.
  let max = -Infinity;
  for (let j = 0; j < n; j++) max = Math.max(max, x[at + j]);
  // Exponentiate and sum.
  let sum = 0;
  for (let j = 0; j < n; j++) {
    x[at + j] = Math.exp(x[at + j] - max);
    sum += x[at + j];
  }
  // Normalise (a NaN logit propagates to every probability, as spec.md's style pins).
  for (let j = 0; j < n; j++) x[at + j] = x[at + j] / sum;
}

/** Softmax of each of the `rows` rows of x (rows, n). */
export function softmaxRows(x: Float32Array, rows: number, n: number): void {
  for (let t = 0; t < rows; t++) softmaxRow(x, t * n, n);
}
