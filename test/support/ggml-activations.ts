/**
 * The tests' own model of ggml's activation blocks (the definition is the reference's
 * activations-q8-*.ts; docs/int8-products.md): the codes, steps and Q8_1 sums the 'int8' product of
 * a block dtype must use, and a bound on how far each element's code moves it. Written from ggml's
 * facts (x86 quantize_row_q8_0 / q8_1, quantize_row_q8_K_ref), not from any backend's code.
 */
import { roundToF16, type BlockDType } from '@sparq/core';
import { U } from '../conformance/numeric.ts';

const f32 = Math.fround;

/** ggml's activation blocks per weight dtype: 32-element Q8_0 / Q8_1 or 256-element Q8_K. */
export function activationKind(dtype: BlockDType): 'q8_0' | 'q8_1' | 'q8_k' {
  if (dtype === 'q4_1' || dtype === 'q5_1') return 'q8_1';
  return dtype.endsWith('_k') || dtype === 'iq4_xs' ? 'q8_k' : 'q8_0';
}

/** Per element of x (n, cols): its code q, its block's step dx as the products use it, the unrounded step d; per 32 elements (Q8_1 only) the block's f16 sum s. */
export interface GgmlActivations {
  q: Int32Array;
  dx: Float64Array;
  d: Float64Array;
  s: Float64Array;
}

/** Nearest integer, halves to even (vroundps, ggml's nearest_int), for |v| <= 127.5. */
function nearestEven(v: number): number {
  const r = Math.round(v); // halves up
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** x (n, cols) quantized into dtype's activation blocks. */
export function ggmlActivations(dtype: BlockDType, x: Float32Array): GgmlActivations {
  const kind = activationKind(dtype);
  const size = kind === 'q8_k' ? 256 : 32;
  const out: GgmlActivations = {
    q: new Int32Array(x.length),
    dx: new Float64Array(x.length),
    d: new Float64Array(x.length),
    s: new Float64Array(x.length / 32),
  };
  for (let b = 0; b < x.length; b += size) {
    let max = 0; // the signed value of largest magnitude, the first of ties
    for (let j = b; j < b + size; j++) if (Math.abs(x[j]) > Math.abs(max)) max = x[j];
    // Q8_0: codes x * f32(127 / amax), step f16(f32(amax / 127)); Q8_K: codes x * f32(-127 / max), step f32(1 / that).
    const mul = max === 0 ? 0 : kind === 'q8_k' ? f32(-127 / max) : f32(127 / Math.abs(max));
    const d = max === 0 ? 0 : kind === 'q8_k' ? f32(1 / mul) : f32(Math.abs(max) / 127);
    let sum = 0;
    for (let j = b; j < b + size; j++) {
      const v = f32(x[j] * mul);
      out.q[j] = Number.isFinite(v) ? nearestEven(Math.max(-127, Math.min(127, v))) : 0;
      out.d[j] = d;
      out.dx[j] = kind === 'q8_k' ? d : roundToF16(d);
      sum += out.q[j];
    }
    if (kind === 'q8_1') out.s[b / 32] = roundToF16(f32(d * sum));
  }
  return out;
}

/**
 * A bound on |x_j - dx_j q_j| and on |x_j - d_j q_j| for element j: the code is within half a step
 * of v = x_j * mul (rounded to f32), and v times the step is x_j within 4 roundings (mul, the
 * product, the step's f32 division, and Q8_K's 1 / mul), so 6 U |x_j| covers them; with |v| <= 128
 * the f16 rounding of the step adds at most 128 |dx - d|.
 */
export function activationError(a: GgmlActivations, x: Float32Array, j: number): number {
  return Math.max(Math.abs(a.dx[j]), Math.abs(a.d[j])) / 2 + 6 * U * Math.abs(x[j]) + 128 * Math.abs(a.dx[j] - a.d[j]);
}

/**
 * Q8_1's extra error per 32-element block (index b): the weights' minimum m multiplies s_b =
 * f16(f32(d sum q)) instead of sum_j x_j. The f16 rounding moves y = f32(d sum q) by at most 2^-11 |y|
 * <= 2^-11 |s_b| / (1 - 2^-11), or 2^-25 absolutely below f16's normal range, and the f32 product
 * by U of it. (The codes' part, |sum_j x_j - d sum_j q_j|, is sum_j activationError.)
 */
export function q8_1SumError(a: GgmlActivations, b: number): number {
  return Math.abs(a.s[b]) * (2 ** -11 * (1 + 2 ** -10) + 2 * U) + 2 ** -25;
}
