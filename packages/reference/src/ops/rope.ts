/**
 * The `rope` op: rotary position embedding in place (RoFormer; llama2.c's adjacent-pair layout).
 *
 *   x (n, nHeads, headDim) f32, headDim even; positions (n) i32, position of token t
 *   for each token t, head h and pair i = 0 .. headDim/2 - 1 (elements 2i, 2i+1 of the head):
 *     angle = pos_t * theta^(-2i / headDim)
 *     (x0, x1) <- (x0 cos(angle) - x1 sin(angle), x0 sin(angle) + x1 cos(angle))
 *
 * Computed as run.c does in f32, step by step, because the end-to-end test must reproduce llama2.c's
 * text byte for byte:
 *   freq = 1 / powf(theta, (2i) / (float)headDim);  val = pos * freq;  fcr = cosf(val), fci = sinf(val)
 *   x0' = x0 * fcr - x1 * fci;  x1' = x0 * fci + x1 * fcr   (each product and sum rounded to f32)
 * Math.fround after each step gives f32 arithmetic. powf, cosf and sinf are approximated by the f64
 * Math.pow / cos / sin rounded to f32: equal to a correctly rounded f32 result except in rare
 * near-tie cases, which is as close as JS can get to the C library.
 * At position 0 the angle is 0, cos = 1 and sin = 0, so x is unchanged.
 */
import type { Tensor } from '@sparq/core';

const f32 = Math.fround;

/** x (n, nHeads, headDim) rotated in place by each token's position. */
export function rope(x: Tensor<'f32'>, positions: Tensor<'i32'>, theta: number): void {
  const [n, nHeads, headDim] = x.shape;
  const thetaF = f32(theta); // run.c's 10000.0f
  for (let t = 0; t < n; t++) {
    const pos = positions.data[positions.offset + t];
    // One pair index i at a time: its angle is the same for every head.
    for (let i = 0; i < headDim / 2; i++) {
      const freq = f32(1 / f32(Math.pow(thetaF, f32((2 * i) / headDim))));
      const val = f32(pos * freq);
      const fcr = f32(Math.cos(val));
      const fci = f32(Math.sin(val));
      // The same rotation for pair (2i, 2i + 1) of every head of token t.
      for (let h = 0; h < nHeads; h++) {
        const at = x.offset + (t * nHeads + h) * headDim + 2 * i; // element (t, h, 2i)
        const x0 = x.data[at];
        const x1 = x.data[at + 1];
        x.data[at] = f32(f32(x0 * fcr) - f32(x1 * fci));
        x.data[at + 1] = f32(f32(x0 * fci) + f32(x1 * fcr));
      }
    }
  }
}
