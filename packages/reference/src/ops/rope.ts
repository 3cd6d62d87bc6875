/**
 * The `rope` op: rotary position embedding in place (RoFormer).
 *
 *   x (n, nHeads, headDim) f32, headDim even; positions (n) i32, position of token t
 *   for each token t, head h and pair i = 0 .. headDim/2 - 1:
 *     angle = pos_t * freq_i        freq_i = theta^(-2i / headDim), or options.freqs[i]
 *     (x0, x1) <- (x0 c - x1 s, x0 s + x1 c)    c = scale cos(angle), s = scale sin(angle)
 *   where the pair (x0, x1) is elements (2i, 2i+1) of the head ('adjacent': llama2.c, ggml's NORM
 *   mode) or (i, i + headDim/2) ('halves': GPT-NeoX, ggml's NEOX mode, the Hugging Face layout).
 *
 * Context-extension schemes only change freq_i and scale (position interpolation divides every
 * frequency by the factor; YaRN blends interpolated and original frequencies per pair and scales
 * the magnitude; Llama 3 divides each frequency by a per-pair factor): the caller computes them.
 *
 * Computed as run.c does in f32, step by step, because the end-to-end test must reproduce llama2.c's
 * text byte for byte:
 *   freq = 1 / powf(theta, (2i) / (float)headDim);  val = pos * freq;  fcr = cosf(val), fci = sinf(val)
 *   x0' = x0 * fcr - x1 * fci;  x1' = x0 * fci + x1 * fcr   (each product and sum rounded to f32)
 * Math.fround after each step gives f32 arithmetic. powf, cosf and sinf are approximated by the f64
 * Math.pow / cos / sin rounded to f32: equal to a correctly rounded f32 result except in rare
 * near-tie cases, which is as close as JS can get to the C library. The scale multiplies the
 * rounded cos and sin (one more f32 rounding; exact when it is 1, so llama2.c's path is unchanged).
 * At position 0 the angle is 0, cos = 1 and sin = 0, so x is only scaled.
 */
import type { RopeOptions, Tensor } from '@sparq/core';

const f32 = Math.fround;

/** x (n, nHeads, headDim) rotated in place by each token's position. */
export function rope(x: Tensor<'f32'>, positions: Tensor<'i32'>, theta: number, options: RopeOptions = {}): void {
  const [n, nHeads, headDim] = x.shape;
  const half = headDim / 2;
  const thetaF = f32(theta); // run.c's 10000.0f
  const scale = f32(options.scale ?? 1);
  const freqs = options.freqs;
  // Offsets of x0 and x1 of pair i within a head.
  const halves = options.pairs === 'halves';
  const first = (i: number) => (halves ? i : 2 * i);
  const second = halves ? half : 1;
  for (let t = 0; t < n; t++) {
    const pos = positions.data[positions.offset + t];
    // One pair index i at a time: its angle is the same for every head.
    for (let i = 0; i < half; i++) {
      const freq = freqs ? freqs.data[freqs.offset + i] : f32(1 / f32(Math.pow(thetaF, f32((2 * i) / headDim))));
      const val = f32(pos * freq);
      const fcr = f32(f32(Math.cos(val)) * scale);
      const fci = f32(f32(Math.sin(val)) * scale);
      // The same rotation for pair i of every head of token t.
      for (let h = 0; h < nHeads; h++) {
        const at = x.offset + (t * nHeads + h) * headDim + first(i); // element (t, h, x0 of pair i)
        const x0 = x.data[at];
        const x1 = x.data[at + second];
        x.data[at] = f32(f32(x0 * fcr) - f32(x1 * fci));
        x.data[at + second] = f32(f32(x0 * fci) + f32(x1 * fcr));
      }
    }
  }
}
