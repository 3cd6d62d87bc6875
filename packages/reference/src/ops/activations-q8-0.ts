/**
 * ggml's Q8_0 activation blocks: how ggml quantizes the activations (x, the f32 input of a
 * product) before multiplying them with Q4_0, Q5_0, Q8_0 and IQ4_NL weights. Each row of
 * x (n, cols) is cut into blocks of 32 consecutive elements, and each block b becomes 32 int8
 * codes q sharing one step dx_b:
 *
 *   amax = max_j |x_j|
 *   d    = f32(amax / 127)                      the step the codes are computed for
 *   id   = f32(127 / amax), or 0 when amax = 0  (127 / amax, not 1 / d: ggml's AVX2 quantizer)
 *   q_j  = nearest(f32(x_j * id))               halves to even (vroundps), so |q_j| <= 127
 *   dx_b = f16(d)                               the step the products use (the block stores d as f16)
 *
 * These are the facts of ggml's x86 `quantize_row_q8_0` (the SIMD quantizer llama.cpp runs on
 * AVX2 and AVX-512 machines), not of its scalar `quantize_row_q8_0_ref`, which divides by d and
 * rounds halves away from zero; on the same x the two differ in an occasional code by one.
 * So x_j = dx_b q_j within half a step d/2, plus |q_j| |dx_b - d| (at most 127 d 2^-11 for a
 * normal f16 step: the f16 rounding of d, about 6% of a step at the block's largest element).
 *
 * One edge differs on purpose: when amax < 127 / FLT_MAX (about 3.7e-37), id overflows to
 * infinity and ggml's conversion writes the integer-indefinite code -128; we write 0. Then
 * f16(d) = 0, so every product with the block is 0 either way.
 */
import { roundToF16, type Tensor } from '@sparq/core';
import { nearestInt } from './round.ts';

const f32 = Math.fround;

/** Elements per Q8_0 (and Q8_1) activation block. */
export const Q8_0_BLOCK = 32;

/** Activation rows quantized per block, for the 'int8' product (block-int8-matvec.ts). */
export interface ActivationBlocks {
  /** Elements per block: 32 (Q8_0, Q8_1) or 256 (Q8_K). */
  readonly block: number;
  /** (n, cols) codes q. */
  readonly q: Int8Array;
  /** (n, cols / block) steps dx_b, as the products multiply them. */
  readonly dx: Float32Array;
  /** Q8_1 only, (n, cols / 32): each block's f16(d * sum_j q_j); empty otherwise. */
  readonly s: Float32Array;
}

/** ggml's f32 -> int8 code: nearest, halves to even, for a finite value; 0 for an infinity or NaN (see above). */
export function activationCode(v: number): number {
  if (!Number.isFinite(v)) return 0;
  // |v| <= 127 * (1 + 2^-23) here, so clamping first changes no code and keeps nearestInt in its range.
  return nearestInt(Math.min(127, Math.max(-127, v)));
}

/**
 * One Q8_0 block: x[xAt .. xAt + 32) -> q[qAt .. qAt + 32); returns the unrounded f32 step d
 * (Q8_1 needs it for its sum) and the integer sum of the codes.
 */
export function quantizeQ8_0Block(q: Int8Array, qAt: number, x: Float32Array, xAt: number): { d: number; sum: number } {
  let amax = 0;
  for (let j = 0; j < Q8_0_BLOCK; j++) amax = Math.max(amax, Math.abs(x[xAt + j]));
  const d = f32(amax / 127);
  const id = amax !== 0 ? f32(127 / amax) : 0;
  let sum = 0;
  for (let j = 0; j < Q8_0_BLOCK; j++) {
    q[qAt + j] = activationCode(f32(x[xAt + j] * id));
    sum += q[qAt + j];
  }
  return { d, sum };
}

/** x (n, cols) f32 -> Q8_0 activation blocks; 32 divides cols. */
export function quantizeQ8_0(x: Tensor<'f32'>, n: number, cols: number): ActivationBlocks {
  const q = new Int8Array(n * cols);
  const dx = new Float32Array((n * cols) / Q8_0_BLOCK);
  // Blocks run over the whole (n, cols) array: 32 divides cols, so none straddles two rows.
  for (let b = 0; b < dx.length; b++)
    dx[b] = roundToF16(quantizeQ8_0Block(q, b * Q8_0_BLOCK, x.data, x.offset + b * Q8_0_BLOCK).d);
  return { block: Q8_0_BLOCK, q, dx, s: new Float32Array(0) };
}
