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
