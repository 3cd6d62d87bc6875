/**
 * The `swiglu` op: the gated product of a SwiGLU feed-forward block (llama2.c's `run.c`),
 *
 *   out[i] = silu(gate[i]) * up[i],   silu(v) = v * sigmoid(v) = v * (1 / (1 + exp(-v)))
 *
 * gate, up, out: f32 of one shape (the FFN's hidden rows); out may be gate or up.
 *
 * Computed as run.c does in f32: exp, 1 + e, the reciprocal, v times it, times up, each rounded
 * to f32 (Math.fround) so the text of the byte-exact test comes out the same. Math.exp works in
 * f64; rounding its result gives the correctly rounded expf, which glibc's expf also returns.
 * For very negative v, exp(-v) overflows to Infinity and silu(v) is v * 0 = -0: the right limit.
 */
import type { Tensor } from '@sparq/core';

const f32 = Math.fround;

export function swiglu(out: Tensor<'f32'>, gate: Tensor<'f32'>, up: Tensor<'f32'>): void {
  for (let i = 0; i < gate.size; i++) {
    const v = gate.data[gate.offset + i];
    // Each out[i] reads only gate[i] and up[i], read before it is written: out may alias either.
    out.data[out.offset + i] = f32(f32(v * f32(1 / f32(1 + f32(Math.exp(-v))))) * up.data[up.offset + i]);
  }
}
