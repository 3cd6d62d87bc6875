/**
 * Rounding to an integer the way C's `roundf` does: halves go away from zero.
 *
 * ggml's Q8_0 (`roundf(x * id)`) and our INT4 / int8 quantizers round this way, so a native
 * backend written in C++ gets the same integers from `std::round`. JavaScript's
 * `Math.round` is different on negative halves (it rounds -2.5 to -2, C gives -3), hence this helper.
 */

/** Nearest integer to v, halves away from zero: 2.5 -> 3, -2.5 -> -3, 0.49 -> 0. */
export function roundHalfAway(v: number): number {
  // Math.round is exact on the positive side (halves go up there), so mirror negatives onto it.
  return v < 0 ? -Math.round(-v) : Math.round(v);
}

/** v clamped to [lo, hi]. */
export function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

// One scratch word seen as float and as int, for nearestInt's bit trick.
const scratchF32 = new Float32Array(1);
const scratchI32 = new Int32Array(scratchF32.buffer);

/**
 * ggml's `nearest_int` (the K-quant and IQ4 quantizers round with it): adds 1.5 * 2^23 in f32,
 * which pushes the fraction out of the significand so the FPU rounds to nearest, halves to even
 * (2.5 -> 2, 3.5 -> 4, -2.5 -> -2), then reads the integer back out of the low mantissa bits.
 * Exact for |v| < 2^22, the range ggml asserts; we keep the trick itself (not Math.round) so that
 * even outside that range our codes are the bytes ggml writes.
 */
export function nearestInt(v: number): number {
  scratchF32[0] = Math.fround(v) + 12582912;
  return (scratchI32[0] & 0x007fffff) - 0x00400000;
}

/** An integer stored to a C int8_t: wraps modulo 256 into -128..127. */
export function toInt8(v: number): number {
  return (v << 24) >> 24;
}

/**
 * C's `(int8_t)` / `(uint8_t)` cast of a float the way x86 compilers emit it: cvttss2si truncates
 * toward zero to an int32, giving 0x80000000 for NaN, infinities and anything out of int32 range,
 * and the low byte is kept. Returns that byte (0..255). ggml's legacy quantizers reach the NaN /
 * infinity case when a block's values are all so tiny (below about 2^-125) that 1 / d overflows
 * f32: every code is then 0 (the block decodes to 0, or to m, whatever its codes). On ARM the same
 * C gives other bytes, so such blocks are platform-dependent in ggml; we follow x86, as native does.
 */
export function truncToByte(v: number): number {
  const i = Number.isFinite(v) && Math.abs(v) < 2 ** 31 ? Math.trunc(v) : -(2 ** 31);
  return i & 0xff;
}
