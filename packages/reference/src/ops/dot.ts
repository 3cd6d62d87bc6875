/**
 * The f32 dot product every matvec / matmul in this backend ends in (spec.md §5's "dot in f32").
 *
 *   dot(a[aAt .. aAt+n), b[bAt .. bAt+n)) = sum_i a_i * b_i
 *
 * Accumulation, chosen to be llama2.c's (run.c `matmul`: `val += w[i * n + j] * x[j]`): one f32
 * accumulator, i from 0 up, each product and each sum rounded to f32 (Math.fround), no fused
 * multiply-add (run.c's Makefile builds with -O3 and no -march, so gcc emits none). Mimicking it
 * matters: the end-to-end test compares our greedy text with llama2.c's byte for byte.
 * Error against the exact sum: at most about n * 2^-24 * sum_i |a_i * b_i| (n roundings of at most
 * 2^-24 relative each), the bound the conformance tests name; a SIMD backend summing in another
 * order stays within it too.
 */

const f32 = Math.fround;

/** sum_i a[aAt + i] * b[bAt + i] for i in [0, n), in f32 from left to right. */
export function dotF32(a: Float32Array, aAt: number, b: Float32Array, bAt: number, n: number): number {
  let acc = 0;
  for (let i = 0; i < n; i++) acc = f32(acc + f32(a[aAt + i] * b[bAt + i]));
  return acc;
}
