/**
 * Numeric helpers shared by the conformance suites: the f32 unit roundoff the named tolerances are
 * built from, NMSE (spec.md §5), a seeded generator for fixed random data, and exact f64 references.
 */

/** f32 unit roundoff: one rounding to f32 changes a value by at most this much, relatively. */
export const U = 2 ** -24;

/**
 * Bound on |f32 dot - exact dot| for n terms: n - 1 additions and one product rounding per term,
 * each at most U relative to what it rounds, so about n * U * sum |a_i b_i| (first order); the
 * extra U covers the second-order terms.
 */
export function dotBound(n: number, absSum: number): number {
  return (n + 1) * U * absSum;
}

/** spec.md §5: native vs reference on the same quantized data, f32 results, NMSE at most this. */
export const TOL_NATIVE_NMSE = 1e-7;

/**
 * Native vs reference, element by element: each side is within dotBound of the exact product
 * and they sum in different orders, so they differ by at most twice that.
 */
export function nativeVsReferenceBound(n: number, absSum: number): number {
  return 2 * dotBound(n, absSum);
}

/**
 * Whether spec.md §5's NMSE <= TOL_NATIVE_NMSE follows from the per-element bounds
 * nativeVsReferenceBound(cols, abs_i) on the products ref (abs_i = sum |w x| of element i): any
 * result within them has an NMSE of at most sum bound_i^2 / sum ref_i^2. Where outputs are near zero
 * by cancellation (a few short dot products of mixed signs: 1 x 32 f16 weights gave NMSE 3.7e-7 in
 * a correct kernel), that quotient exceeds the tolerance and only the per-element bounds apply.
 */
export function nativeNmseGuaranteed(ref: ArrayLike<number>, cols: number, abs: ArrayLike<number>): boolean {
  let bound = 0;
  let energy = 0;
  for (let i = 0; i < ref.length; i++) {
    bound += nativeVsReferenceBound(cols, abs[i]) ** 2;
    energy += ref[i] ** 2;
  }
  return bound <= TOL_NATIVE_NMSE * energy;
}

/** Normalised mean squared error sum (a - b)^2 / sum a^2, `a` the reference (spec.md §5). */
export function nmse(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += a[i] ** 2;
  }
  return den === 0 ? num : num / den;
}

/** A seeded uniform generator in [0, 1) (mulberry32), so fixed random data is the same every run. */
export { mulberry32 as seeded } from '@sparq/llm';

/** `count` uniform values in [-1, 1) as an f32 array, from `random`. */
export function uniform(random: () => number, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = 2 * random() - 1;
  return out;
}

/** Exact-ish (f64) products: out[t, r] = sum_c w[r, c] * x[t, c], and the sums of |terms| for the bounds. */
export function f64Product(
  w: ArrayLike<number>,
  x: ArrayLike<number>,
  rows: number,
  cols: number,
  n: number,
): { value: Float64Array; absSum: Float64Array } {
  const value = new Float64Array(n * rows);
  const absSum = new Float64Array(n * rows);
  for (let t = 0; t < n; t++) {
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        value[t * rows + r] += w[r * cols + c] * x[t * cols + c];
        absSum[t * rows + r] += Math.abs(w[r * cols + c] * x[t * cols + c]);
      }
    }
  }
  return { value, absSum };
}
