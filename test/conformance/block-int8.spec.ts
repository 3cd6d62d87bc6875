/**
 * Conformance: the 'int8' product for ggml block weights (issue 11), matvec / matmul with path
 * 'int8', on every backend. Its exact definition is packages/reference/src/ops/block-int8-matvec.ts:
 * activations quantized into ggml's activation blocks for the weight type (Q8_0, Q8_1 or Q8_K: step
 * dx, codes q, Q8_1's f16 sums s), integer sums isum = sum c q and qsum = sum q per sub-block against
 * the weights' integer codes c, scaled by f32(dl dx), and the minimum m times dx qsum (Q8_1: m s).
 *
 * - The exact value. The tests read each element's integer view (c, dl, m) from the block bytes
 *   themselves (test/support/ggml-layout.ts, written from ggml-common.h, no backend code) and
 *   quantize the activations by test/support/ggml-activations.ts, so E = sum (dl dx isum + m xs)
 *   (xs = dx qsum, or Q8_1's s) is computed independently
 *   of every backend; each backend's 'int8' output must be within f32 rounding of E (ROUNDINGS).
 * - Against 'dequant': within the activation rounding (at most half a step dx per element) plus
 *   both paths' f32 rounding, and not equal to it (the integer path really runs).
 * - Exact cases: integer weights and activations whose scales are powers of two make every step
 *   exact, so the legacy types must give sum w x exactly.
 * - Float weights: 'int8' is the f32 product of the activations rounded to the weights' type (f16,
 *   bf16; f32 unchanged), bit for bit the 'dequant' one of those activations.
 * Shapes: every block dtype, n 1 (matvec and matmul), 3, 8 and 13 (8 and more take native's
 * batched kernels), odd row counts, 1..3 super-blocks of 256 or 1..9 blocks of 32 per row.
 */
import {
  BLOCK_DTYPES,
  BLOCK_LAYOUT,
  Tensor,
  bf16ToF32,
  f32ToBf16,
  f32ToF16,
  roundToF16,
  type BlockDType,
  type Engine,
  type ProductPath,
} from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt, referenceEngine } from '../support/backends.ts';
import { activationError, activationKind, ggmlActivations, q8_1SumError } from '../support/ggml-activations.ts';
import { elementGrid } from '../support/ggml-layout.ts';
import { fcRuns } from '../support/runs.ts';
import { U, dotBound, seeded, uniform } from './numeric.ts';

const f32 = Math.fround;

/** Columns per activation block of 32 (Q8_0, Q8_1; Q8_K's 256 are 8 of them): activations() scales each its own way. */
const ACTIVATION_BLOCK = 32;
/**
 * The finest run of elements a backend sums in integers before scaling: native's SIMD kernels keep
 * one int32 lane per 4 consecutive elements (vpmaddwd / vpdpbusd) and scale the lanes in f32, so
 * lanes of opposite signs cancel only after rounding. Every sub-block (16 or 32) is whole pieces.
 */
const PIECE = 4;
/**
 * The types whose stored codes u carry an offset, c = u - OFFSET: a backend may multiply u and
 * subtract OFFSET * dl * (the sum of q) as a minimum term instead (native does for Q3_K and Q6_K).
 */
const OFFSET: Partial<Record<BlockDType, number>> = { q4_0: 8, q5_0: 16, q3_k: 4, q6_k: 32 };

/**
 * ROUNDINGS(cols): how many f32 roundings each term of a backend's 'int8' output may pass through.
 * A backend forms out[t, r] as an f32 sum of terms, each an exact integer sum over one or more
 * whole 4-element pieces (PIECE) times f32 factors: at most 3 rounded products make a term (f32(dl dx)
 * times isum: 2; ggml's f32(d dx) times f32(sum_s sc_s isum_s), an integer that may exceed 2^24: 3),
 * then each term passes through at most one addition per other term (a sequential chain is the
 * worst order; SIMD lanes with a horizontal sum take fewer). There are at most cols / 4 scale terms
 * (one per piece) and cols / 8 minimum and offset terms (one each per 16 elements), so at most
 * 3 cols / 8 + 3 roundings of relative size U each:
 *   |got - E| <= (3 cols / 8 + 3) U M / (1 - (3 cols / 8 + 3) U),
 *   M = sum over pieces p of |dl_p dx| (|isum_p| + 2 OFFSET |qsum_p|) + |m_p dx qsum_p|
 * (the 2 OFFSET |qsum_p| covers a backend that multiplies u = c + OFFSET and subtracts the offset
 * as a minimum term: |sum u q| <= |isum| + OFFSET |qsum|, and the subtracted term is as large).
 * We allow 3 cols / 8 + 8: the 5 extra cover the 1 / (1 - kU) factor (below 1 + 2^-12 for these
 * sizes) and the f64 evaluation of E here (relative 2^-53 per operation, 2^-29 of one U).
 *
 * What it catches: an integer error of k in one isum_p moves the output by |k| |dl_p dx|, a misread
 * code c_j by |q_j| |dl_p dx| (|q_j| up to 127), a wrong step or scale by a fraction of the output.
 * The bound is ROUNDINGS U M, M growing with cols and |c q|: in the widest rows here (288 columns,
 * or 768 for the 256-element types) one unit in one integer sum can hide, a misread code (|q_j|
 * units, mostly tens), offset, sign, scale or step cannot. Checked by hand: adding 1 to the isum
 * of every sub-block made this test fail for every dtype (with these 4-element pieces); reading one
 * Q6_K code off by one, or taking the step of the wrong activation block, did too (with the
 * earlier 16-element pieces, a tighter bound). The pieces are 4 elements since native's per-row kernels were measured to exceed the
 * 16-element bound (a Q5_0 row of 32 columns whose lanes cancelled: off by 1.9e-8, bound 1.6e-9).
 */
const ROUNDINGS = (cols: number) => (3 * cols) / 8 + 8;

/** Per output (t, r) of the 'int8' product, in f64. */
interface Int8Exact {
  value: Float64Array; // E = sum_p dl_p dx isum_p + m_p dx qsum_p
  magnitude: Float64Array; // M (ROUNDINGS above)
  toDequant: Float64Array; // the bound on |int8 - dequant| (int8Exact)
}

/**
 * E, M and the bound against 'dequant' for w (rows, cols) block dtype and x (n, cols), from the
 * integer view read off w's bytes. The bound against 'dequant' (P = sum_j w_j x_j, w_j the decoded f32
 * weights, w~_j = dl c_j + m exactly, a_j = |dl c_j| + |m| >= |w~_j|):
 *   |int8 - dequant| <= |int8 - E| + |E - P| + |P - dequant|
 *   E - P = sum_j w~_j (dx q_j - x_j) + (w~_j - w_j) x_j, where |dx q_j - x_j| <= activationError
 *   (test/support/ggml-activations.ts: half a step, the f32 roundings, f16's rounding of the step),
 *   plus for Q8_1 |m| q8_1SumError per block (m s instead of m sum x), and
 *   |w~_j - w_j| <= 2 U a_j (1 + U) <= 3 U a_j (two roundings: dl c_j and + m);
 *   |int8 - E| <= ROUNDINGS U M, |P - dequant| <= dotBound(cols, sum_j |w_j x_j|).
 */
function int8Exact(w: Tensor<BlockDType>, x: Float32Array, rows: number, cols: number, n: number): Int8Exact {
  const { elements, bytes } = BLOCK_LAYOUT[w.dtype];
  const c = new Int32Array(rows * cols); // (rows, cols) codes
  const dl = new Float64Array(rows * cols); // (rows, cols) each element's sub-block scale and minimum
  const m = new Float64Array(rows * cols);
  const decoded = new Float64Array(rows * cols); // (rows, cols) the f32 weights
  let inconsistent = 0;
  for (let i = 0; i < rows * cols; i++) {
    const grid = elementGrid(w.dtype, w.data, Math.floor(i / elements) * bytes, i % elements);
    ({ c: c[i], dl: dl[i], m: m[i] } = grid.int8);
    decoded[i] = grid.value(grid.code);
    // The layout reader's own consistency: its integer view decodes to its value, as ggml rounds.
    if (f32(f32(dl[i] * c[i]) + m[i]) !== decoded[i]) inconsistent++;
  }
  expect(inconsistent).toBe(0);
  const acts = ggmlActivations(w.dtype, x);
  const { dx, q } = acts;
  const q8_1 = activationKind(w.dtype) === 'q8_1';
  const out: Int8Exact = {
    value: new Float64Array(n * rows),
    magnitude: new Float64Array(n * rows),
    toDequant: new Float64Array(n * rows),
  };
  for (let t = 0; t < n; t++) {
    for (let r = 0; r < rows; r++) {
      let activation = 0; // sum_j a_j dx (1/2 + 2^-16) + 3 U a_j |x_j|
      let absSum = 0; // sum_j |w_j x_j|
      for (let p = 0; p < cols / PIECE; p++) {
        const first = r * cols + p * PIECE; // the piece's first weight
        const at = t * cols + p * PIECE; // its first activation
        const step = dx[at];
        let isum = 0;
        let qsum = 0;
        for (let j = 0; j < PIECE; j++) {
          const a = Math.abs(dl[first] * c[first + j]) + Math.abs(m[first]);
          isum += c[first + j] * q[at + j];
          qsum += q[at + j];
          activation += a * activationError(acts, x, at + j) + 3 * U * a * Math.abs(x[at + j]);
          absSum += Math.abs(decoded[first + j] * x[at + j]);
        }
        // The minimum's term: m dx qsum per piece, or Q8_1's m s once per 32-element block.
        const blockStart = at % ACTIVATION_BLOCK === 0;
        const minimum = q8_1 ? (blockStart ? m[first] * acts.s[at / ACTIVATION_BLOCK] : 0) : m[first] * step * qsum;
        if (q8_1 && blockStart) activation += Math.abs(m[first]) * q8_1SumError(acts, at / ACTIVATION_BLOCK);
        const o = t * rows + r;
        out.value[o] += dl[first] * step * isum + minimum;
        out.magnitude[o] +=
          Math.abs(dl[first] * step) * (Math.abs(isum) + 2 * (OFFSET[w.dtype] ?? 0) * Math.abs(qsum)) +
          Math.abs(minimum);
      }
      const o = t * rows + r;
      out.toDequant[o] = activation + ROUNDINGS(cols) * U * out.magnitude[o] + dotBound(cols, absSum);
    }
  }
  return out;
}

/** out (n, rows) by `path`: matvec when `vector` (n = 1), else matmul. */
function product(
  engine: Engine,
  w: Tensor,
  x: Float32Array,
  n: number,
  path: ProductPath,
  vector = false,
): Float32Array {
  const [rows, cols] = w.shape;
  const out = Tensor.zeros('f32', vector ? [rows] : [n, rows]);
  if (vector) engine.matvec(out, w, Tensor.f32([cols], x), path);
  else engine.matmul(out, w, Tensor.f32([n, cols], x), path);
  return out.data;
}

/** w (rows, cols) of `dtype` quantized from `values` (by the reference where `engine` does not quantize the dtype). */
function blockWeights(
  engine: Engine,
  dtype: BlockDType,
  values: Float32Array,
  rows: number,
  cols: number,
): Tensor<BlockDType> {
  const w = Tensor.zeros(dtype, [rows, cols]);
  (engine.has('quantize', dtype) ? engine : referenceEngine).quantize(w, Tensor.f32([rows, cols], values));
  return w;
}

/**
 * x (n, cols): uniform values, each 32-element block scaled by 2^k (k in -6..3) or, one block in 16,
 * all zero (step 0): the steps differ from block to block, so a product that used another
 * block's step, or split a 16-element sub-block's pair wrongly, fails (Q8_K's 256-element steps
 * then see codes of very different sizes within one block).
 */
function activations(random: () => number, n: number, cols: number): Float32Array {
  const x = uniform(random, n * cols);
  for (let b = 0; b < x.length; b += ACTIVATION_BLOCK) {
    const scale = random() < 1 / 16 ? 0 : 2 ** (Math.floor(random() * 10) - 6);
    for (let j = b; j < b + ACTIVATION_BLOCK; j++) x[j] *= scale;
  }
  return x;
}

/** Random shapes: rows 1..9, whole blocks per row (1..3 super-blocks of 256, 1..9 blocks of 32), n 1, 3, 8 or 13. */
const shapes = (dtype: BlockDType) =>
  fc.record({
    rows: fc.integer({ min: 1, max: 9 }),
    blocks: fc.integer({ min: 1, max: BLOCK_LAYOUT[dtype].elements > 32 ? 3 : 9 }),
    n: fc.constantFrom(1, 3, 8, 13),
    seed: fc.integer(),
  });

/** One drawn case: weights of `dtype` on `engine`, activations, and the exact integer product. */
function drawCase(
  engine: Engine,
  dtype: BlockDType,
  { rows, blocks, n, seed }: { rows: number; blocks: number; n: number; seed: number },
) {
  const cols = BLOCK_LAYOUT[dtype].elements * blocks;
  const random = seeded(seed);
  const w = blockWeights(engine, dtype, uniform(random, rows * cols), rows, cols);
  const x = activations(random, n, cols);
  return { cols, w, x, exact: int8Exact(w, x, rows, cols, n) };
}

forEachBackend('block weights, int8 product', (engine) => {
  for (const dtype of BLOCK_DTYPES) {
    opIt(
      engine,
      'matmul',
      `${dtype}: int8 within ROUNDINGS of the exact integer product computed here (random shapes)`,
      () => {
        fc.assert(
          fc.property(shapes(dtype), (shape) => {
            const { rows, n } = shape;
            const { cols, w, x, exact } = drawCase(engine, dtype, shape);
            const runs =
              n === 1
                ? [product(engine, w, x, 1, 'int8'), product(engine, w, x, 1, 'int8', true)]
                : [product(engine, w, x, n, 'int8')];
            for (const got of runs) {
              for (let o = 0; o < n * rows; o++) {
                expect(
                  Math.abs(got[o] - exact.value[o]),
                  `output ${o}: got ${got[o]}, exact ${exact.value[o]}`,
                ).toBeLessThanOrEqual(ROUNDINGS(cols) * U * exact.magnitude[o]);
              }
            }
          }),
          { numRuns: fcRuns(25) },
        );
      },
      dtype,
    );

    opIt(
      engine,
      'matmul',
      `${dtype}: int8 within the activation rounding of dequant, and not equal to it`,
      () => {
        let differs = 0;
        fc.assert(
          fc.property(shapes(dtype), (shape) => {
            const { rows, n } = shape;
            const {
              w,
              x,
              exact: { toDequant },
            } = drawCase(engine, dtype, shape);
            const int8 = product(engine, w, x, n, 'int8');
            const dequant = product(engine, w, x, n, 'dequant');
            for (let o = 0; o < n * rows; o++) {
              expect(Math.abs(int8[o] - dequant[o])).toBeLessThanOrEqual(toDequant[o]);
              if (int8[o] !== dequant[o]) differs++;
            }
          }),
          { numRuns: fcRuns(25) },
        );
        // Random f32 activations are almost never multiples of their step: the paths must differ.
        expect(differs).toBeGreaterThan(0);
      },
      dtype,
    );
  }

  /** Legacy types with integer weights: the range of codes c, and how to place a block's extremes so its f16 d is exactly 1. */
  const EXACT: ReadonlyArray<{ dtype: BlockDType; lo: number; hi: number }> = [
    { dtype: 'q4_0', lo: -8, hi: 7 }, // d = max / -8 with max = -8 (the value of largest magnitude)
    { dtype: 'q5_0', lo: -16, hi: 15 }, // d = -16 / -16
    { dtype: 'q8_0', lo: -127, hi: 127 }, // d = 127 / 127
    { dtype: 'q4_1', lo: -5, hi: 10 }, // d = (10 - -5) / 15, m = -5
    { dtype: 'q5_1', lo: -20, hi: 11 }, // d = (11 - -20) / 31, m = -20
  ];
  for (const { dtype, lo, hi } of EXACT) {
    opIt(
      engine,
      'matmul',
      `${dtype}: int8 on integer weights and activations, scaled by 2^e and 2^f, is sum w x * 2^(e + f) exactly`,
      () => {
        // Every block of w holds lo and hi, so d = 2^e exactly and the codes are the integers; every
        // activation block holds 127 or -127, so 127 / amax = 2^-f, q = x / 2^f and the f16 step is
        // 2^f (f16 holds 2^-24 .. 2^15). Q8_1's f16 sum 2^f sum q is exact too: |sum q| <= 31 * 60 + 127
        // < 2^11 and 2^4 * 2^11 < 65504. Then each dl dx is a power of two, |isum| < 2^19 and the
        // row sums stay below 2^24: every f32 operation is exact.
        fc.assert(
          fc.property(
            shapes(dtype),
            fc.integer({ min: -8, max: 8 }),
            fc.integer({ min: -20, max: 4 }),
            ({ rows, blocks, n, seed }, e, f) => {
              const cols = 32 * blocks;
              const random = seeded(seed);
              const wInt = Float32Array.from({ length: rows * cols }, (_, i) =>
                i % 32 === 0 ? lo : i % 32 === 1 ? hi : lo + Math.floor(random() * (hi - lo + 1)),
              );
              const xInt = Float32Array.from({ length: n * cols }, (_, i) =>
                i % 32 === 5 ? (random() < 0.5 ? 127 : -127) : Math.floor(random() * 121) - 60,
              );
              const w = blockWeights(
                engine,
                dtype,
                wInt.map((v) => v * 2 ** e),
                rows,
                cols,
              );
              const got = product(
                engine,
                w,
                xInt.map((v) => v * 2 ** f),
                n,
                'int8',
              );
              for (let t = 0; t < n; t++) {
                for (let r = 0; r < rows; r++) {
                  let sum = 0;
                  for (let j = 0; j < cols; j++) sum += wInt[r * cols + j] * xInt[t * cols + j];
                  expect(got[t * rows + r]).toBe(sum * 2 ** (e + f));
                }
              }
            },
          ),
          { numRuns: fcRuns(20) },
        );
      },
      dtype,
    );

    opIt(
      engine,
      'matmul',
      `${dtype}: activations at exact halves of a step round to even, as ggml's vroundps`,
      () => {
        // Each activation block holds 127 (so 127 / amax = 1 and the step is 1) and otherwise values
        // k + 1/2: v = x exactly, so every code is a tie. Rounding halves away from zero (C's roundf)
        // would move each by one; with integer weights d = 1 every f32 operation is exact.
        const [rows, cols, n] = [3, 64, 2];
        const random = seeded(31);
        const wInt = Float32Array.from({ length: rows * cols }, (_, i) =>
          i % 32 === 0 ? lo : i % 32 === 1 ? hi : lo + Math.floor(random() * (hi - lo + 1)),
        );
        const x = Float32Array.from({ length: n * cols }, (_, i) =>
          i % 32 === 7 ? 127 : Math.floor(random() * 200) - 100 + 0.5,
        );
        const got = product(engine, blockWeights(engine, dtype, wInt, rows, cols), x, n, 'int8');
        const even = (v: number) => (Math.floor(v) % 2 === 0 ? Math.floor(v) : Math.ceil(v)); // v an integer or a half
        for (let t = 0; t < n; t++) {
          for (let r = 0; r < rows; r++) {
            let sum = 0;
            for (let j = 0; j < cols; j++) sum += wInt[r * cols + j] * even(x[t * cols + j]);
            expect(got[t * rows + r]).toBe(sum);
          }
        }
      },
      dtype,
    );
  }

  opIt(
    engine,
    'matmul',
    'f32, f16, bf16 weights: int8 is the f32 product of the activations rounded to the weight type, bit for bit',
    () => {
      const random = seeded(23);
      const [rows, cols, n] = [5, 96, 3];
      const values = uniform(random, rows * cols);
      const x = uniform(random, n * cols);
      for (const dtype of ['f32', 'f16', 'bf16'] as const) {
        const w = Tensor.zeros(dtype, [rows, cols]);
        for (let i = 0; i < values.length; i++)
          w.data[i] = dtype === 'f32' ? values[i] : dtype === 'f16' ? f32ToF16(values[i]) : f32ToBf16(values[i]);
        // ggml's activations for f16 and bf16 weights: each element rounded to nearest, ties to even.
        const rounded = x.map((v) => (dtype === 'f32' ? v : dtype === 'f16' ? roundToF16(v) : bf16ToF32(f32ToBf16(v))));
        if (dtype !== 'f32') expect(rounded).not.toEqual(x);
        expect(product(engine, w, x, n, 'int8')).toEqual(product(engine, w, rounded, n, 'dequant'));
        expect(product(engine, w, x.subarray(0, cols), 1, 'int8', true)).toEqual(
          product(engine, w, rounded.subarray(0, cols), 1, 'dequant', true),
        );
      }
    },
  );
});
