/**
 * IEEE half (f16) and bfloat16 conversions, bit-exact with the hardware
 * instructions ggml uses (F16C's VCVTPS2PH with round-to-nearest-even, and
 * AVX-512 BF16's VCVTNEPS2BF16), so quantized files match byte for byte.
 */

// One scratch word seen as float and as bits: the portable way to read a float's bits in JS.
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** f32 -> f16 bits, round to nearest even; overflow gives infinity, NaN stays NaN (quiet). */
export function f32ToF16(value: number): number {
  scratchF32[0] = value;
  const bits = scratchU32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0); // Inf or NaN
  // Re-bias the exponent from 127 to 15.
  const halfExp = exp - 127 + 15;
  if (halfExp >= 0x1f) return sign | 0x7c00; // too large: infinity
  if (halfExp <= 0) {
    // Subnormal half (or zero): shift the mantissa with its implicit 1 into place.
    if (halfExp < -10) return sign; // below half the smallest subnormal: signed zero
    const full = mant | 0x800000;
    const shift = 14 - halfExp;
    const half = full >>> shift;
    const rest = full & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    // Round to nearest, ties to even.
    const roundUp = rest > halfway || (rest === halfway && (half & 1) === 1);
    return sign | (half + (roundUp ? 1 : 0));
  }
  const half = (halfExp << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // Round to nearest even; a carry out of the mantissa correctly bumps the exponent.
  const roundUp = rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1);
  return sign | (half + (roundUp ? 1 : 0));
}

/** f16 bits -> f32 value (exact: every half is a float). */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24; // subnormal or zero
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN). */
export function f32ToBf16(value: number): number {
  scratchF32[0] = value;
  const bits = scratchU32[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff;
  // Adding 0x7fff plus the lowest kept bit rounds ties to even.
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bf16 bits -> f32 value (exact: bf16 is the top half of an f32). */
export function bf16ToF32(h: number): number {
  scratchU32[0] = (h & 0xffff) << 16;
  return scratchF32[0];
}

/** Rounds through f16 and back: the value an f16 store would keep. */
export function roundToF16(value: number): number {
  return f16ToF32(f32ToF16(value));
}
