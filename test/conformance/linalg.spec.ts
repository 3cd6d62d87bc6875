/**
 * Conformance: matvec / matmul for every weight dtype, and matvecInt4 / matmulInt4 by both paths
 * (spec.md §5), on every backend.
 * - Exactness: each product against an f64 sum over the backend's own decoded weights, within the
 *   f32 dot-product bound (numeric.ts `dotBound`).
 * - Quantization quality: quantized vs f32 matvec NMSE <= 1e-2 at group 32 (spec.md §5).
 * - The int8 path's int32 group sums, bit-exact against BigInt sums computed here.
 * - Agreement with the reference backend on the same quantized data: NMSE <= 1e-7 (spec.md §5).
 */
import {
  BLOCK_DTYPES,
  BLOCK_LAYOUT,
  Int4Matrix,
  Tensor,
  bf16ToF32,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  isBlockDType,
  type Engine,
  type Int4GroupSize,
  type ProductPath,
  type MatrixDType,
} from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt, referenceEngine } from '../support/backends.ts';
import { nmseBound } from '../support/ggml-layout.ts';
import { fcRuns } from '../support/runs.ts';
import { U, dotBound, f64Product, nativeVsReferenceBound, nmse, seeded, uniform } from './numeric.ts';

const f32 = Math.fround;

/** spec.md §5: quantized matvec vs f32 matvec at group 32. */
const NMSE_QUANTIZED = 1e-2;
/** spec.md §5: a backend vs the reference on the same quantized data. */
const NMSE_VS_REFERENCE = 1e-7;

const MATRIX_DTYPES: readonly MatrixDType[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES];

/** Elements per block of a weight dtype's rows (1 for plain dtypes): cols must be a multiple. */
const rowUnit = (dtype: MatrixDType) => (isBlockDType(dtype) ? BLOCK_LAYOUT[dtype].elements : 1);
const PATHS: readonly ProductPath[] = ['dequant', 'int8'];

/** w (rows, cols) f32 values stored as `dtype` (f16/bf16 rounded, blocks quantized by `engine`, or by the reference where `engine` only reads the dtype). */
function weights(engine: Engine, dtype: MatrixDType, values: Float32Array, rows: number, cols: number): Tensor {
  if (dtype === 'f32') return Tensor.f32([rows, cols], values);
  if (dtype === 'f16' || dtype === 'bf16') {
    const t = Tensor.zeros(dtype, [rows, cols]);
    for (let i = 0; i < values.length; i++) t.data[i] = dtype === 'f16' ? f32ToF16(values[i]) : f32ToBf16(values[i]);
    return t;
  }
  const t = Tensor.zeros(dtype, [rows, cols]);
  (engine.has('quantize', dtype) ? engine : referenceEngine).quantize(t, Tensor.f32([rows, cols], values));
  return t;
}

/** The f32 values a weight tensor holds (block types through `engine.dequantize`). */
function decoded(engine: Engine, w: Tensor): Float32Array {
  if (w.dtype === 'f32') return w.data as Float32Array;
  if (w.dtype === 'f16') return Float32Array.from(w.data as Uint16Array, f16ToF32);
  if (w.dtype === 'bf16') return Float32Array.from(w.data as Uint16Array, bf16ToF32);
  const out = Tensor.zeros('f32', w.shape);
  engine.dequantize(out, w as Tensor<'q4_0'>); // any block dtype
  return out.data;
}

function matmulOf(engine: Engine, w: Tensor, x: Float32Array, n: number): Float32Array {
  const rows = w.shape[0];
  const out = Tensor.zeros('f32', [n, rows]);
  engine.matmul(out, w, Tensor.f32([n, w.shape[1]], x));
  return out.data;
}

function int4Product(engine: Engine, w: Int4Matrix, x: Float32Array, n: number, path: ProductPath): Float32Array {
  const out = Tensor.zeros('f32', [n, w.rows]);
  engine.matmulInt4(out, w, Tensor.f32([n, w.cols], x), path);
  return out.data;
}

/** Expects |got - exact| <= dotBound for every output. */
function expectWithinDotBound(
  got: ArrayLike<number>,
  exact: { value: Float64Array; absSum: Float64Array },
  cols: number,
): void {
  let worst = 0; // largest error / bound seen
  for (let i = 0; i < got.length; i++) {
    const bound = dotBound(cols, exact.absSum[i]);
    const error = Math.abs(got[i] - exact.value[i]);
    worst = Math.max(worst, bound === 0 ? (error === 0 ? 0 : Infinity) : error / bound);
  }
  expect(worst).toBeLessThanOrEqual(1);
}

/** Random shapes including odd sizes: cols 1..5 units of 32 (1..2 blocks of 256 for K-quants and IQ4_XS), rows 1..7, n 1..3. */
const shapes = (unit: number) =>
  fc.record({
    rows: fc.integer({ min: 1, max: 7 }),
    blocks: fc.integer({ min: 1, max: unit > 32 ? 2 : 5 }),
    n: fc.integer({ min: 1, max: 3 }),
    seed: fc.integer(),
  });

forEachBackend('matvec / matmul', (engine) => {
  opIt(engine, 'matvec', 'hand-worked f32 matvec', () => {
    // [[1, 2, 3, 4], [-1, 0.5, 0, 2]] @ [1, -1, 2, 0.25] = [1 - 2 + 6 + 1, -1 - 0.5 + 0 + 0.5] = [6, -1]
    const out = Tensor.zeros('f32', [2]);
    engine.matvec(out, Tensor.f32([2, 4], [1, 2, 3, 4, -1, 0.5, 0, 2]), Tensor.f32([4], [1, -1, 2, 0.25]));
    expect(Array.from(out.data)).toEqual([6, -1]);
  });

  opIt(engine, 'matmul', 'matmul (n, rows) = x (n, cols) @ w^T, by hand', () => {
    // w = [[1, 2], [3, 4], [5, 6]]; x = [[1, 0], [0, 1], [1, 1]] -> rows of w^T picked and summed.
    const out = Tensor.zeros('f32', [3, 3]);
    engine.matmul(out, Tensor.f32([3, 2], [1, 2, 3, 4, 5, 6]), Tensor.f32([3, 2], [1, 0, 0, 1, 1, 1]));
    expect(Array.from(out.data)).toEqual([1, 3, 5, 2, 4, 6, 3, 7, 11]);
  });

  for (const dtype of MATRIX_DTYPES) {
    opIt(
      engine,
      'matmul',
      `${dtype} weights: within the f32 dot bound of the exact product (random shapes)`,
      () => {
        fc.assert(
          fc.property(shapes(rowUnit(dtype)), ({ rows, blocks, n, seed }) => {
            const cols = Math.max(32, rowUnit(dtype)) * blocks;
            const random = seeded(seed);
            const w = weights(engine, dtype, uniform(random, rows * cols), rows, cols);
            const x = uniform(random, n * cols);
            const exact = f64Product(decoded(engine, w), x, rows, cols, n);
            expectWithinDotBound(matmulOf(engine, w, x, n), exact, cols);
            // matvec on each row of x gives the same bound.
            const out = Tensor.zeros('f32', [rows]);
            engine.matvec(out, w, Tensor.f32([cols], x.subarray(0, cols)));
            expectWithinDotBound(
              out.data,
              { value: exact.value.subarray(0, rows), absSum: exact.absSum.subarray(0, rows) },
              cols,
            );
          }),
          { numRuns: fcRuns(40) },
        );
      },
      dtype,
    );
  }

  for (const dtype of BLOCK_DTYPES) {
    opIt(
      engine,
      'matvec',
      `${dtype} block matvec vs dequantize then f32 matvec: within twice the f32 dot bound`,
      () => {
        // Both products dot the same decoded weights with x; they may only sum in different orders.
        const random = seeded(17);
        const [rows, cols] = [5, 2 * Math.max(32, rowUnit(dtype))];
        const w = weights(engine, dtype, uniform(random, rows * cols), rows, cols);
        const x = uniform(random, cols);
        const onBlocks = Tensor.zeros('f32', [rows]);
        engine.matvec(onBlocks, w, Tensor.f32([cols], x));
        const dense = Tensor.zeros('f32', [rows]);
        engine.matvec(dense, Tensor.f32([rows, cols], decoded(engine, w)), Tensor.f32([cols], x));
        const { absSum } = f64Product(decoded(engine, w), x, rows, cols, 1);
        for (let r = 0; r < rows; r++)
          expect(Math.abs(onBlocks.data[r] - dense.data[r])).toBeLessThanOrEqual(
            nativeVsReferenceBound(cols, absSum[r]),
          );
      },
      dtype,
    );

    opIt(
      engine,
      'matvec',
      `${dtype} vs f32 matvec: NMSE <= ${nmseBound(dtype).toPrecision(3)} (its round-trip bound; uniform data)`,
      () => {
        // Uniform weights and x: the output error sum_c e_c x_c has variance cols * var(e) * E[x^2]
        // against cols * var(w) * E[x^2], so the output NMSE is the weights' round-trip NMSE.
        const random = seeded(11);
        const [rows, cols] = [64, 512];
        const values = uniform(random, rows * cols);
        const x = uniform(random, cols);
        const exact = matmulOf(engine, weights(engine, 'f32', values, rows, cols), x, 1);
        expect(nmse(exact, matmulOf(engine, weights(engine, dtype, values, rows, cols), x, 1))).toBeLessThanOrEqual(
          nmseBound(dtype),
        );
      },
      dtype,
    );
  }

  opIt(engine, 'matvec', 'honours tensor offsets (views into larger buffers)', () => {
    const random = seeded(7);
    const big = Tensor.f32([4, 64], uniform(random, 256));
    const xs = Tensor.f32([3, 64], uniform(random, 192));
    for (const dtype of ['f32', 'q8_0'] as const) {
      const w = weights(engine, dtype, big.data, 4, 64);
      const out = Tensor.zeros('f32', [2, 3]);
      engine.matvec(out.slice(0, 1, 2).reshape(3), w.slice(0, 1, 4), xs.slice(0, 2, 3).reshape(64));
      const alone = Tensor.zeros('f32', [3]);
      engine.matvec(alone, w.slice(0, 1, 4).contiguous(), xs.slice(0, 2, 3).contiguous().reshape(64));
      expect(Array.from(out.data)).toEqual([0, 0, 0, ...alone.data]);
    }
  });

  opIt(engine, 'matvec', `q4_0 / q4_1 / q8_0 vs f32 matvec: NMSE <= ${NMSE_QUANTIZED} (uniform data)`, () => {
    // Uniform weights in [-1, 1): a 4-bit step of about amax/8 gives an error variance of about
    // step^2 / 12, an NMSE near 0.004 against the weights' variance 1/3; 8 bits far less.
    const random = seeded(11);
    const [rows, cols] = [64, 256];
    const values = uniform(random, rows * cols);
    const x = uniform(random, cols);
    const exact = matmulOf(engine, weights(engine, 'f32', values, rows, cols), x, 1);
    for (const dtype of ['q4_0', 'q4_1', 'q8_0'] as const) {
      expect(nmse(exact, matmulOf(engine, weights(engine, dtype, values, rows, cols), x, 1))).toBeLessThanOrEqual(
        NMSE_QUANTIZED,
      );
    }
  });

  for (const dtype of MATRIX_DTYPES) {
    opIt(
      engine,
      'matmul',
      `${dtype}: agrees with the reference backend on the same quantized weights: NMSE <= ${NMSE_VS_REFERENCE}`,
      () => {
        const random = seeded(13);
        const [rows, cols, n] = [7, 3 * Math.max(32, rowUnit(dtype)), 3];
        const values = uniform(random, rows * cols);
        const x = uniform(random, n * cols);
        const w = weights(referenceEngine, dtype, values, rows, cols);
        expect(nmse(matmulOf(referenceEngine, w, x, n), matmulOf(engine, w, x, n))).toBeLessThanOrEqual(
          NMSE_VS_REFERENCE,
        );
      },
      dtype,
    );
  }
});

// ---------------------------------------------------------------------------------------------
// Group-wise INT4.

function int4(
  engine: Engine,
  values: Float32Array,
  rows: number,
  cols: number,
  groupSize: Int4GroupSize,
  symmetric: boolean,
): Int4Matrix {
  const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
  engine.quantizeInt4(w, Tensor.f32([rows, cols], values));
  return w;
}

/** The signed 4-bit value of element e, read here independently of any backend. */
function nibble(w: Int4Matrix, e: number): number {
  const byte = w.packed[Math.floor(e / 2)];
  const code = e % 2 === 0 ? byte % 16 : Math.floor(byte / 16);
  return code < 8 ? code : code - 16;
}

/** Integers in [lo, hi] as f32, each group of `group` holding lo and hi at least once (so the scales are exact). */
function integerRows(
  random: () => number,
  rows: number,
  cols: number,
  group: number,
  lo: number,
  hi: number,
): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < out.length; i++) out[i] = lo + Math.floor(random() * (hi - lo + 1));
  for (let g = 0; g < out.length; g += group) {
    out[g] = lo;
    out[g + 1] = hi;
  }
  return out;
}

const groupSizes: readonly Int4GroupSize[] = [32, 64, 128, 'row'];

/** Per output (t, r): sum_c |w[r, c]| * s_x * (1/2 + 2^-16), s_x the int8 step of c's group in row t of x. */
function activationError(
  w: Float32Array,
  x: Float32Array,
  rows: number,
  cols: number,
  n: number,
  group: number,
): Float64Array {
  const out = new Float64Array(n * rows);
  for (let t = 0; t < n; t++) {
    for (let g = 0; g < cols; g += group) {
      let amax = 0;
      for (let c = g; c < g + group; c++) amax = Math.max(amax, Math.abs(x[t * cols + c]));
      const step = Math.max(f32(amax / 127), 2 ** -126) * (0.5 + 2 ** -16);
      for (let r = 0; r < rows; r++) {
        for (let c = g; c < g + group; c++) out[t * rows + r] += Math.abs(w[r * cols + c]) * step;
      }
    }
  }
  return out;
}

forEachBackend('matvecInt4 / matmulInt4', (engine) => {
  for (const path of PATHS) {
    opIt(
      engine,
      'matmulInt4',
      `${path} path: within the f32 dot bound of the exact product of the decoded weights`,
      () => {
        fc.assert(
          fc.property(
            shapes(32),
            fc.constantFrom(...groupSizes),
            fc.boolean(),
            ({ rows, blocks, n, seed }, groupSize, symmetric) => {
              const cols = 128 * blocks;
              const random = seeded(seed);
              const w = int4(engine, uniform(random, rows * cols), rows, cols, groupSize, symmetric);
              const x = uniform(random, n * cols);
              const back = Tensor.zeros('f32', [rows, cols]);
              engine.dequantizeInt4(back, w);
              const exact = f64Product(back.data, x, rows, cols, n);
              const got = int4Product(engine, w, x, n, path);
              if (path === 'int8') {
                // The int8 path also rounds each activation to its group's step s_x = amax_x / 127 (plus
                // f32 rounding of x / s_x: 127 U steps), moving each product by at most |w| * s_x * (1/2 + 2^-16).
                const moved = activationError(back.data, x, rows, cols, n, w.groupSize);
                for (let i = 0; i < exact.value.length; i++) {
                  exact.absSum[i] += moved[i];
                  expect(Math.abs(got[i] - exact.value[i])).toBeLessThanOrEqual(
                    moved[i] + dotBound(cols, exact.absSum[i]),
                  );
                }
              } else {
                expectWithinDotBound(got, exact, cols);
              }
            },
          ),
          { numRuns: fcRuns(30) },
        );
      },
    );

    for (const symmetric of [true, false]) {
      opIt(
        engine,
        'matvecInt4',
        `${path} path, ${symmetric ? 'sym' : 'asym'} group 32 vs f32 matvec: NMSE <= ${NMSE_QUANTIZED} (uniform data)`,
        () => {
          // Uniform weights in [-1, 1): step amax/7 (sym) gives error variance (1/7)^2 / 12 ~ 0.0017
          // against the weights' variance 1/3, an NMSE near 0.005; asym (step ~2/15) about 0.004.
          const random = seeded(17);
          const [rows, cols] = [64, 256];
          const values = uniform(random, rows * cols);
          const x = uniform(random, cols);
          const exact = matmulOf(engine, Tensor.f32([rows, cols], values), x, 1);
          const out = Tensor.zeros('f32', [rows]);
          engine.matvecInt4(out, int4(engine, values, rows, cols, 32, symmetric), Tensor.f32([cols], x), path);
          expect(nmse(exact, out.data)).toBeLessThanOrEqual(NMSE_QUANTIZED);
        },
      );
    }

    opIt(
      engine,
      'matmulInt4',
      `${path} path agrees with the reference backend on the same INT4 weights: NMSE <= ${NMSE_VS_REFERENCE}`,
      () => {
        const random = seeded(19);
        const [rows, cols, n] = [7, 384, 3];
        const values = uniform(random, rows * cols);
        const x = uniform(random, n * cols);
        for (const groupSize of groupSizes) {
          const w = int4(referenceEngine, values, rows, cols, groupSize, false);
          expect(
            nmse(int4Product(referenceEngine, w, x, n, path), int4Product(engine, w, x, n, path)),
          ).toBeLessThanOrEqual(NMSE_VS_REFERENCE);
        }
      },
    );
  }

  opIt(
    engine,
    'matmulInt4',
    'int8 path: the int32 group sums are bit-exact (BigInt check, power-of-two scales)',
    () => {
      // Integer weights whose every group holds its extremes get exact power-of-two scales, and integer
      // activations with a +-127 in every group get scale_x = 2^f, so the codes are the integers
      // themselves and each output is 2^(e+f) * sum_g isum_g exactly (all sums < 2^24).
      fc.assert(
        fc.property(
          shapes(32),
          fc.constantFrom(...groupSizes),
          fc.boolean(),
          fc.integer({ min: -20, max: 20 }),
          fc.integer({ min: -20, max: 20 }),
          ({ rows, blocks, n, seed }, groupSize, symmetric, e, f) => {
            const cols = 32 * blocks * (groupSize === 'row' || groupSize === 32 ? 1 : groupSize / 32);
            const group = groupSize === 'row' ? cols : groupSize;
            const random = seeded(seed);
            // sym: [-7, 7] (scale = 7/7); asym: [-4, 11] (hi - lo = 15, scale 1, zero = -8 - (-4) = -4).
            const wInt = symmetric
              ? integerRows(random, rows, cols, group, -7, 7)
              : integerRows(random, rows, cols, group, -4, 11);
            const xInt = integerRows(random, n, cols, group, -127, 127);
            const w = int4(
              engine,
              wInt.map((v) => v * 2 ** e),
              rows,
              cols,
              groupSize,
              symmetric,
            );
            const got = int4Product(
              engine,
              w,
              xInt.map((v) => v * 2 ** f),
              n,
              'int8',
            );
            for (let t = 0; t < n; t++) {
              for (let r = 0; r < rows; r++) {
                let total = 0n;
                for (let g = 0; g < cols / group; g++) {
                  // isum = sum (q_w - zero) * q_x, with q_w read from the packed nibbles.
                  const zero = BigInt(w.zeros[r * (cols / group) + g]);
                  let isum = 0n;
                  for (let i = g * group; i < (g + 1) * group; i++)
                    isum += (BigInt(nibble(w, r * cols + i)) - zero) * BigInt(xInt[t * cols + i]);
                  total += isum;
                }
                expect(got[t * rows + r]).toBe(Number(total) * 2 ** (e + f));
              }
            }
          },
        ),
        { numRuns: fcRuns(60) },
      );
    },
  );

  opIt(
    engine,
    'matvecInt4',
    'int8 path on random data: matches sum_c (q_w - zero) * q_x * scale_w * scale_x computed here',
    () => {
      // Activations quantized here independently (scale = max(amax/127 in f32, 2^-126), codes rounded
      // half away from zero); the integer products are exact. A backend may split a group's integer sum
      // into partial sums (SIMD lanes) before scaling, so the bound is order-free, like dotBound: at most
      // cols partial terms, each scaled with two roundings, summed with at most cols - 1 more, so
      // (cols + 2) * U * sum_c |(q_w - zero) * q_x * scale_w * scale_x|.
      fc.assert(
        fc.property(
          shapes(32),
          fc.constantFrom(...groupSizes),
          fc.boolean(),
          ({ rows, blocks, seed }, groupSize, symmetric) => {
            const cols = 128 * blocks;
            const random = seeded(seed);
            const w = int4(engine, uniform(random, rows * cols), rows, cols, groupSize, symmetric);
            const x = uniform(random, cols);
            const out = Tensor.zeros('f32', [rows]);
            engine.matvecInt4(out, w, Tensor.f32([cols], x), 'int8');
            const G = w.groupsPerRow;
            for (let r = 0; r < rows; r++) {
              let value = 0;
              let absSum = 0;
              for (let g = 0; g < G; g++) {
                const first = g * w.groupSize;
                let amax = 0;
                for (let i = 0; i < w.groupSize; i++) amax = Math.max(amax, Math.abs(x[first + i]));
                const sx = Math.max(f32(amax / 127), 2 ** -126);
                const scale = w.scales[r * G + g] * sx;
                for (let i = 0; i < w.groupSize; i++) {
                  const v = f32(x[first + i] / sx);
                  const qx = Math.sign(v) * Math.floor(Math.abs(v) + 0.5);
                  const product = (nibble(w, r * cols + first + i) - w.zeros[r * G + g]) * qx;
                  value += product * scale;
                  absSum += Math.abs(product * scale);
                }
              }
              expect(Math.abs(out.data[r] - value)).toBeLessThanOrEqual((cols + 2) * U * absSum);
            }
          },
        ),
        { numRuns: fcRuns(40) },
      );
    },
  );
});
