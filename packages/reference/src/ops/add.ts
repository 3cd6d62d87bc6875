/**
 * The `add` op: the residual connection of a transformer block, x <- x + f(x), element by element,
 *
 *   out[i] = a[i] + b[i]
 *
 * a, b, out: f32 of one shape; out may be a or b. One f32 addition per element: JavaScript adds in
 * f64 and the Float32Array store rounds to f32; f64 carries more than twice f32's 24 bits, so
 * those two roundings give the f32 sum that one f32 addition gives. NaN and infinities follow
 * IEEE (inf + -inf is NaN).
 */
import type { Tensor } from '@sparq/core';

export function add(out: Tensor<'f32'>, a: Tensor<'f32'>, b: Tensor<'f32'>): void {
  // Element i is read before it is written: out may alias a or b.
  for (let i = 0; i < a.size; i++) out.data[out.offset + i] = a.data[a.offset + i] + b.data[b.offset + i];
}
