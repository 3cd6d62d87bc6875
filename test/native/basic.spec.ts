/**
 * The native basic ops against the reference, on every kernel path this CPU has
 * (scalar, avx2, avx512: forced per describe block through the test-only
 * `forceKernelPath` binding; vitest runs each file in its own process, so the
 * force never leaks into other suites).
 *
 * Named tolerances (spec.md §5 and the arithmetic):
 * - quantized bytes, scales, zeros, int32 group sums: identical (EXACT).
 * - f32 products: per element |native - reference| <= TOL_DOT(n, sum|w x|) = 2 (n + 1) 2^-24
 *   sum|w_i x_i|: each of the two f32 dot products is within (n + 1) 2^-24 sum|w_i x_i| of the exact
 *   one, whatever its order; and NMSE <= TOL_NMSE vs the reference on the same quantized data
 *   wherever those bounds imply it (nativeNmseGuaranteed: not for outputs near zero by cancellation).
 * - scalar path: bit-identical with the reference everywhere (it mirrors its f32 operations).
 * - rmsnorm, rope, softmax, top-k: bit-identical on every path (they are scalar by design).
 */
import { Int4Matrix, Tensor, bf16ToF32, f16ToF32, type BlockDType, type Engine, type Int4GroupSize } from '@sparq/core';
import { basicAddon, int4Args, type BasicAddon } from '../../packages/native/lib/basic-ops.ts';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOL_NATIVE_NMSE, nativeNmseGuaranteed, nativeVsReferenceBound, nmse } from '../conformance/numeric.ts';
import { engines, referenceEngine } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const TOL_NMSE = TOL_NATIVE_NMSE;
const TOL_DOT = nativeVsReferenceBound;
const RUNS = fcRuns(25);

const native = engines.find((e) => e.name === 'native');
const raw = native ? loadAddon() : null;
const addon = raw ? basicAddon(raw) : null;
const paths = raw ? raw.kernelPaths().supported : [];

/** Values with zeros, -0, negatives, exact halves (rounding ties) and a wide magnitude range. */
const valueArb = fc.oneof(
  fc.constant(0),
  fc.constant(-0),
  fc.integer({ min: -16, max: 16 }).map((v) => v * 0.5),
  fc.float({ min: -100, max: 100, noNaN: true }),
  fc.float({ min: Math.fround(-1e-3), max: Math.fround(1e-3), noNaN: true }),
);
const rowsArb = fc.constantFrom(1, 3, 17);
const blockColsArb = fc.constantFrom(32, 96, 160);

function values(count: number): fc.Arbitrary<number[]> {
  return fc.array(valueArb, { minLength: count, maxLength: count });
}

/** A (rows, cols) f32 tensor, shapes from the arbitraries above. */
const matrixArb = (colsArb: fc.Arbitrary<number>) =>
  fc.tuple(rowsArb, colsArb).chain(([rows, cols]) => values(rows * cols).map((v) => Tensor.f32([rows, cols], v)));

/** Expects identical bits (NaN payloads and -0 included). */
function expectSameBits(a: Float32Array | Uint8Array | Int8Array | Int32Array, b: typeof a, what: string): void {
  const ua = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const ub = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  const at = ua.findIndex((v, i) => v !== ub[i]);
  expect(at, `${what}: first differing byte ${at}`).toBe(-1);
}

/** out[t, r] of x (n, cols) @ w^T for w given as f32 rows: the sums of |w x| the tolerance is built from. */
function absSums(w: Float32Array, x: Float32Array, rows: number, cols: number, n: number): Float64Array {
  const s = new Float64Array(n * rows);
  for (let t = 0; t < n; t++)
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) s[t * rows + r] += Math.abs(w[r * cols + c] * x[t * cols + c]);
  return s;
}

/** The product check: bit-identical on the scalar path, else NMSE and the per-element dot bound. */
function expectProduct(path: string, ref: Float32Array, got: Float32Array, abs: Float64Array, cols: number): void {
  if (path === 'scalar') return expectSameBits(ref, got, 'scalar product');
  if (nativeNmseGuaranteed(ref, cols, abs)) expect(nmse(ref, got)).toBeLessThanOrEqual(TOL_NMSE);
  for (let i = 0; i < ref.length; i++)
    expect(Math.abs(ref[i] - got[i]), `element ${i}`).toBeLessThanOrEqual(TOL_DOT(cols, abs[i]));
}

const BLOCK_TYPES: readonly BlockDType[] = ['q4_0', 'q4_1', 'q8_0'];
const GROUPS: readonly Int4GroupSize[] = [32, 64, 128, 'row'];

if (!native || !addon) {
  describe.skip(`native basic ops skipped: native backend unavailable`, () => {
    it('needs the addon', () => {});
  });
}

for (const path of paths) {
  describe(`native basic ops [${path}]`, () => {
    const nat = native as Engine;
    const ref = referenceEngine;
    beforeAll(() => {
      expect(raw!.forceKernelPath(path)).toBe(path);
    });
    afterAll(() => {
      raw!.forceKernelPath(null);
    });

    it('quantize: q4_0 / q4_1 / q8_0 bytes identical with the reference (ggml byte-exact)', () => {
      fc.assert(
        fc.property(matrixArb(blockColsArb), fc.constantFrom(...BLOCK_TYPES), (x, dtype) => {
          const a = Tensor.zeros(dtype, x.shape);
          // The native output is a view one row into a larger tensor: element offsets become byte offsets natively.
          const b = Tensor.zeros(dtype, [x.shape[0] + 1, x.shape[1]]).slice(0, 1);
          ref.quantize(a, x);
          nat.quantize(b, x);
          expectSameBits(a.data, b.data.subarray(b.data.length - a.data.length), dtype);
        }),
        { numRuns: RUNS * 2 },
      );
    });

    it('quantize: tie and sign-of-zero blocks (first max wins, -0 min, all zero)', () => {
      const blocks = [
        new Array(32).fill(0),
        new Array(32).fill(-0),
        [-0, 0, ...new Array(30).fill(0)],
        [3, -3, ...new Array(30).fill(1)],
        [-3, 3, ...new Array(30).fill(-1)],
        new Array(32).fill(0).map((_, i) => (i % 2 ? 2.5 : -2.5)),
      ];
      for (const dtype of BLOCK_TYPES) {
        const x = Tensor.f32([blocks.length, 32], blocks.flat());
        const a = Tensor.zeros(dtype, x.shape);
        const b = Tensor.zeros(dtype, x.shape);
        ref.quantize(a, x);
        nat.quantize(b, x);
        expectSameBits(a.data, b.data, dtype);
      }
    });

    it('dequantize: identical f32 from arbitrary block bytes', () => {
      fc.assert(
        fc.property(
          fc.constantFrom(...BLOCK_TYPES),
          fc.integer({ min: 1, max: 6 }),
          fc.integer(),
          (dtype, blocks, seed) => {
            const x = Tensor.zeros(dtype, [blocks * 32]);
            for (let i = 0; i < x.data.length; i++) x.data[i] = (Math.imul(seed ^ i, 2654435761) >>> 13) & 0xff;
            // Keep the f16 scales finite (exponent < 31) so both sides see numbers.
            const bytes = x.data.length / blocks;
            for (let b = 0; b < blocks; b++) {
              x.data[b * bytes + 1] &= 0xbb;
              if (dtype === 'q4_1') x.data[b * bytes + 3] &= 0xbb;
            }
            const a = Tensor.zeros('f32', x.shape);
            const c = Tensor.zeros('f32', x.shape);
            ref.dequantize(a, x);
            nat.dequantize(c, x);
            expectSameBits(a.data, c.data, dtype);
          },
        ),
        { numRuns: RUNS },
      );
    });

    it('quantizeInt4 / dequantizeInt4: packed, scales, zeros and f32 identical (sym and asym, every group size)', () => {
      const colsArb = fc.constantFrom(100, 128, 256, 384);
      fc.assert(
        fc.property(matrixArb(colsArb), fc.constantFrom(...GROUPS), fc.boolean(), (x, groupSize, symmetric) => {
          const [rows, cols] = x.shape;
          if (groupSize !== 'row' && cols % groupSize !== 0) return;
          const a = new Int4Matrix(rows, cols, { groupSize, symmetric });
          const b = new Int4Matrix(rows, cols, { groupSize, symmetric, shared: true });
          ref.quantizeInt4(a, x);
          nat.quantizeInt4(b, x);
          expectSameBits(a.packed, b.packed, 'packed');
          expectSameBits(a.scales, b.scales, 'scales');
          expectSameBits(a.zeros, b.zeros, 'zeros');
          const da = Tensor.zeros('f32', x.shape);
          const db = Tensor.zeros('f32', x.shape);
          ref.dequantizeInt4(da, a);
          nat.dequantizeInt4(db, a);
          expectSameBits(da.data, db.data, 'dequantized');
        }),
        { numRuns: RUNS },
      );
    });

    it('matvec / matmul: every weight dtype, within TOL_NMSE and TOL_DOT of the reference (scalar: identical)', () => {
      const dtypes = ['f32', 'f16', 'bf16', ...BLOCK_TYPES] as const;
      fc.assert(
        fc.property(
          matrixArb(blockColsArb),
          fc.constantFrom(...dtypes),
          fc.integer({ min: 1, max: 6 }),
          fc.integer(),
          (wf, dtype, n, seed) => {
            const [rows, cols] = wf.shape;
            let w: Tensor = wf;
            if (dtype === 'f16' || dtype === 'bf16') {
              w = Tensor.zeros(dtype, wf.shape);
              for (let i = 0; i < wf.size; i++) w.data[i] = (Math.imul(seed ^ i, 2246822519) >>> 16) & 0x3bff; // finite halves
            } else if (dtype !== 'f32') {
              w = Tensor.zeros(dtype, wf.shape);
              ref.quantize(w as Tensor<BlockDType>, wf);
            }
            const x = Tensor.f32(
              [n, cols],
              Array.from({ length: n * cols }, (_, i) => Math.sin(seed + i * 1.7)),
            );
            // The weights as f32 exactly as both sides decode them, for the tolerance's sum |w x|.
            const decoded = Tensor.zeros('f32', [rows, cols]);
            if (dtype === 'f32') decoded.data.set(wf.data);
            else if (dtype === 'f16') decoded.data.set(Array.from(w.data, f16ToF32));
            else if (dtype === 'bf16') decoded.data.set(Array.from(w.data, bf16ToF32));
            else ref.dequantize(decoded, w as Tensor<BlockDType>);
            const abs = absSums(decoded.data, x.data, rows, cols, n);
            const o1 = Tensor.zeros('f32', [n, rows]);
            const o2 = Tensor.zeros('f32', [n, rows]);
            ref.matmul(o1, w, x);
            nat.matmul(o2, w, x);
            expectProduct(path, o1.data, o2.data, abs, cols);
            // matvec on the last x row and into the second row of a (2, rows) tensor: non-zero offsets.
            const xLast = x.slice(0, n - 1, n).reshape(cols);
            const v1 = Tensor.zeros('f32', [rows]);
            const v2 = Tensor.zeros('f32', [2, rows]).slice(0, 1, 2).reshape(rows);
            ref.matvec(v1, w, xLast);
            nat.matvec(v2, w, xLast);
            expectProduct(path, v1.data, v2.data.subarray(rows), abs.subarray((n - 1) * rows), cols);
          },
        ),
        { numRuns: RUNS },
      );
    });

    it("matvecInt4 / matmulInt4: 'dequant' and 'int8' within TOL_NMSE and TOL_DOT of the reference (scalar: identical)", () => {
      // 100 and 200 with whole-row groups leave tails that no SIMD width divides.
      const colsArb = fc.constantFrom(64, 100, 160, 200, 256, 384);
      fc.assert(
        fc.property(
          matrixArb(colsArb),
          fc.constantFrom(...GROUPS),
          fc.boolean(),
          fc.integer({ min: 1, max: 6 }),
          fc.integer(),
          (wf, groupSize, symmetric, n, seed) => {
            const [rows, cols] = wf.shape;
            if (groupSize !== 'row' && cols % groupSize !== 0) return;
            const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
            ref.quantizeInt4(w, wf);
            const wd = Tensor.zeros('f32', [rows, cols]);
            ref.dequantizeInt4(wd, w);
            const x = Tensor.f32(
              [n, cols],
              Array.from({ length: n * cols }, (_, i) => (i % 11 === 0 ? 0 : Math.cos(seed + i * 0.9) * 3)),
            );
            const abs = absSums(wd.data, x.data, rows, cols, n);
            for (const p of ['dequant', 'int8'] as const) {
              const o1 = Tensor.zeros('f32', [n, rows]);
              const o2 = Tensor.zeros('f32', [n, rows]);
              ref.matmulInt4(o1, w, x, p);
              nat.matmulInt4(o2, w, x, p);
              // The int8 path's error against the f32 weights is the activation quantization's, so its
              // f32 bound uses sum |(q - zero) q_x| terms, which the dot bound on |w x| over-covers by
              // at most a factor 1 + 1/254: take it twice.
              expectProduct(path, o1.data, o2.data, p === 'int8' ? abs.map((v) => 2 * v) : abs, cols);
              const xLast = x.slice(0, n - 1, n).reshape(cols);
              const v1 = Tensor.zeros('f32', [rows]);
              const v2 = Tensor.zeros('f32', [2, rows]).slice(0, 1, 2).reshape(rows);
              ref.matvecInt4(v1, w, xLast, p);
              nat.matvecInt4(v2, w, xLast, p);
              expectProduct(
                path,
                v1.data,
                v2.data.subarray(rows),
                abs.subarray((n - 1) * rows).map((v) => 2 * v),
                cols,
              );
            }
          },
        ),
        { numRuns: RUNS },
      );
    });

    it("matmulInt4 'int8': power-of-two scales make every f32 step exact, so the result equals the reference bit for bit", () => {
      // Each weight group holds +-7 * 2^-e and each activation group +-127 * 2^-f, so the scales
      // are exactly 2^-e and 2^-f and out = 2^-(e+f) * sum of the int32 group sums: exact in f32.
      fc.assert(
        fc.property(
          rowsArb,
          fc.constantFrom(128, 160, 200, 384),
          fc.constantFrom(...GROUPS),
          fc.boolean(),
          fc.integer({ min: 1, max: 5 }),
          fc.integer(),
          (rows, cols, groupSize, symmetric, n, seed) => {
            const group = groupSize === 'row' ? cols : groupSize;
            if (cols % group !== 0) return;
            const rnd = (i: number) => ((Math.imul(seed ^ i, 2654435761) >>> 8) / 2 ** 24) * 2 - 1;
            const wv = Array.from(
              { length: rows * cols },
              (_, i) => (i % group === 0 ? 7 : Math.round(rnd(i) * 7)) / 4,
            );
            const xv = Array.from(
              { length: n * cols },
              (_, i) => (i % group === 3 ? -127 : Math.round(rnd(i + 99991) * 127)) / 8,
            );
            const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
            ref.quantizeInt4(w, Tensor.f32([rows, cols], wv));
            const x = Tensor.f32([n, cols], xv);
            const o1 = Tensor.zeros('f32', [n, rows]);
            const o2 = Tensor.zeros('f32', [n, rows]);
            ref.matmulInt4(o1, w, x, 'int8');
            nat.matmulInt4(o2, w, x, 'int8');
            if (symmetric) expectSameBits(o1.data, o2.data, 'int8 product');
            else expect(nmse(o1.data, o2.data)).toBeLessThanOrEqual(TOL_NMSE); // asym scales are not powers of two
          },
        ),
        { numRuns: RUNS },
      );
    });

    it('int32 group sums (binding int4GroupSums) identical with the scalar twin', () => {
      fc.assert(
        fc.property(
          matrixArb(fc.constantFrom(100, 128, 160, 200, 256, 384)),
          fc.constantFrom(...GROUPS),
          fc.boolean(),
          fc.integer({ min: 1, max: 3 }),
          fc.integer(),
          (wf, groupSize, symmetric, n, seed) => {
            const [rows, cols] = wf.shape;
            if (groupSize !== 'row' && cols % groupSize !== 0) return;
            const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
            ref.quantizeInt4(w, wf);
            const x = Tensor.f32(
              [n, cols],
              Array.from({ length: n * cols }, (_, i) => Math.sin(seed * 0.37 + i) * 5),
            );
            const sums = (p: string) => {
              raw!.forceKernelPath(p);
              const out = new Int32Array(n * rows * w.groupsPerRow);
              addon!.int4GroupSums(out, ...int4Args(w), x.data, x.offset, n);
              return out;
            };
            const expected = sums('scalar');
            const got = sums(path);
            expectSameBits(expected, got, 'group sums');
          },
        ),
        { numRuns: RUNS },
      );
    });

    it('rmsnorm, rope, softmax: bit-identical with the reference (llama2.c f32 arithmetic)', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 4 }),
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 1, max: 40 }).map((h) => 2 * h),
          fc.integer(),
          (n, heads, headDim, seed) => {
            const size = n * heads * headDim;
            const xv = Array.from({ length: size }, (_, i) => (i % 9 === 0 ? 0 : Math.sin(seed + i * 2.3) * 4));
            const weight = Tensor.f32(
              [heads * headDim],
              Array.from({ length: heads * headDim }, (_, i) => 1 + Math.cos(i)),
            );
            const a = Tensor.f32([n, heads * headDim], xv);
            const b = Tensor.f32([n, heads * headDim], xv);
            ref.rmsnorm(a, a, weight, 1e-5);
            nat.rmsnorm(b, b, weight, 1e-5);
            expectSameBits(a.data, b.data, 'rmsnorm');
            const positions = new Tensor(
              'i32',
              Int32Array.from({ length: n }, (_, t) => ((seed >>> 3) % 5000) + t * 37),
              [n],
            );
            const ra = Tensor.f32([n, heads, headDim], xv);
            const rb = Tensor.f32([n, heads, headDim], xv);
            ref.rope(ra, positions, 10000);
            nat.rope(rb, positions, 10000);
            expectSameBits(ra.data, rb.data, 'rope');
            // Given frequencies, a scale and the 'halves' layout.
            const options = {
              freqs: Tensor.f32(
                [headDim / 2],
                Array.from({ length: headDim / 2 }, (_, i) => 0.9 ** i / (1 + (seed & 3))),
              ),
              scale: 1.0625,
              pairs: 'halves' as const,
            };
            const sa2 = Tensor.f32([n, heads, headDim], xv);
            const sb2 = Tensor.f32([n, heads, headDim], xv);
            ref.rope(sa2, positions, 10000, options);
            nat.rope(sb2, positions, 10000, options);
            expectSameBits(sa2.data, sb2.data, 'rope with options');
            const sa = Tensor.f32(
              [n, heads * headDim],
              xv.map((v) => v * 10),
            );
            const sb = Tensor.f32(
              [n, heads * headDim],
              xv.map((v) => v * 10),
            );
            ref.softmax(sa);
            nat.softmax(sb);
            expectSameBits(sa.data, sb.data, 'softmax');
          },
        ),
        { numRuns: RUNS },
      );
    });

    it('rmsnorm and rope over hundreds of rows (split over the thread pool): bit-identical with the reference', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 257, max: 600 }),
          fc.integer({ min: 4, max: 8 }),
          fc.constantFrom(64, 128),
          fc.integer(),
          (n, heads, headDim, seed) => {
            const width = heads * headDim;
            const xv = Array.from({ length: n * width }, (_, i) => Math.sin(seed + i * 1.7) * 3);
            const weight = Tensor.f32(
              [width],
              Array.from({ length: width }, (_, i) => 1 + Math.cos(i)),
            );
            const a = Tensor.f32([n, width], xv);
            const b = Tensor.f32([n, width], xv);
            ref.rmsnorm(a, a, weight, 1e-5);
            nat.rmsnorm(b, b, weight, 1e-5);
            expectSameBits(a.data, b.data, 'rmsnorm');
            const positions = new Tensor(
              'i32',
              Int32Array.from({ length: n }, (_, t) => ((seed >>> 5) % 3000) + 3 * t),
              [n],
            );
            const ra = Tensor.f32([n, heads, headDim], xv);
            const rb = Tensor.f32([n, heads, headDim], xv);
            ref.rope(ra, positions, 500000, { pairs: 'halves' });
            nat.rope(rb, positions, 500000, { pairs: 'halves' });
            expectSameBits(ra.data, rb.data, 'rope');
          },
        ),
        { numRuns: fcRuns(6) },
      );
    });

    it('topk: identical indices, ties to the lowest index, NaN first, 0 == -0', () => {
      const scoreArb = fc.oneof(
        fc.constantFrom(0, -0, 1, -1, 2, NaN, Infinity, -Infinity),
        fc.float({ noNaN: true, min: -10, max: 10 }),
      );
      const caseArb = fc
        .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 70 }), fc.integer({ min: 1, max: 70 }))
        .chain(([n, len, k]) =>
          fc
            .array(scoreArb, { minLength: n * len, maxLength: n * len })
            .map((xv) => ({ n, len, k: Math.min(k, len), xv })),
        );
      fc.assert(
        fc.property(caseArb, ({ n, len, k, xv }) => {
          const x = Tensor.f32([n, len], xv);
          const a = Tensor.zeros('i32', [n, k]);
          const b = Tensor.zeros('i32', [n, k]);
          ref.topk(a, x);
          nat.topk(b, x);
          expect(Array.from(b.data)).toEqual(Array.from(a.data));
        }),
        { numRuns: RUNS * 2 },
      );
    });
  });
}

describe.runIf(addon !== null)('native basic bindings reject bad buffers with JS errors', () => {
  // Untyped on purpose: these calls pass what BasicAddon's types forbid (wrong array kinds, missing
  // or non-number arguments), as untyped JavaScript could.
  const a = addon as unknown as Record<keyof BasicAddon, (...args: unknown[]) => unknown>;
  const f = (n: number) => new Float32Array(n);
  const u8 = (n: number) => new Uint8Array(n);
  const w = { packed: u8(64), scales: f(4), zeros: new Int8Array(4) };
  const cases: [string, () => unknown][] = [
    ['quantize out too short', () => a.quantize(3, u8(17), 0, f(32), 0, 32)],
    ['quantize x too short', () => a.quantize(5, u8(34), 0, f(31), 0, 32)],
    ['quantize offset past the end', () => a.quantize(3, u8(18), 32, f(32), 0, 32)],
    ['quantize partial block', () => a.quantize(3, u8(36), 0, f(48), 0, 48)],
    ['quantize bad dtype code', () => a.quantize(9, u8(18), 0, f(32), 0, 32)],
    ['dequantize wrong array kind', () => a.dequantize(3, u8(128), 0, u8(18), 0, 32)],
    ['dequantize negative offset', () => a.dequantize(3, f(32), -1, u8(18), 0, 32)],
    ['matmul w too short', () => a.matmul(0, f(4), 0, f(15), 0, f(8), 0, 1, 4, 4)],
    ['matmul f16 w as Float32Array', () => a.matmul(1, f(4), 0, f(16), 0, f(4), 0, 1, 4, 4)],
    ['matmul out too short', () => a.matmul(0, f(3), 0, f(16), 0, f(4), 0, 1, 4, 4)],
    ['matmul q4_0 cols not a block multiple', () => a.matmul(3, f(1), 0, u8(18), 0, f(16), 0, 1, 1, 16)],
    ['matmul absurd sizes', () => a.matmul(0, f(4), 0, f(16), 0, f(4), 0, 2 ** 40, 2 ** 40, 2 ** 40)],
    ['matmul int8 q4_0 w too short', () => a.matmul(3, f(2), 0, u8(35), 0, f(32), 0, 1, 2, 32, true)],
    ['matmul int8 q2_k cols not a block multiple', () => a.matmul(8, f(1), 0, u8(84), 0, f(128), 0, 1, 1, 128, true)],
    ['q8BlockSums sums too short', () => a.q8BlockSums(3, new Int32Array(1), u8(36), 0, f(32), 0, 1, 2, 32)],
    ['q8BlockSums plain dtype', () => a.q8BlockSums(0, new Int32Array(2), f(64), 0, f(32), 0, 1, 2, 32)],
    ['q8BlockSums x too short', () => a.q8BlockSums(8, new Int32Array(16), u8(84), 0, f(255), 0, 1, 1, 256)],
    [
      'matmulInt4 packed too short',
      () => a.matmulInt4(f(2), 0, u8(63), w.scales, w.zeros, 2, 64, 32, true, f(64), 0, 1, true),
    ],
    [
      'matmulInt4 zero group',
      () => a.matmulInt4(f(2), 0, w.packed, w.scales, w.zeros, 2, 64, 0, true, f(64), 0, 1, false),
    ],
    [
      'matmulInt4 group not dividing cols',
      () => a.matmulInt4(f(2), 0, w.packed, w.scales, w.zeros, 2, 64, 48, true, f(64), 0, 1, true),
    ],
    [
      'matmulInt4 x too short',
      () => a.matmulInt4(f(2), 0, w.packed, w.scales, w.zeros, 2, 64, 32, true, f(63), 0, 1, true),
    ],
    [
      'quantizeInt4 zeros too short',
      () => a.quantizeInt4(w.packed, w.scales, new Int8Array(3), 2, 64, 32, true, f(128), 0),
    ],
    ['dequantizeInt4 out too short', () => a.dequantizeInt4(f(127), 0, w.packed, w.scales, w.zeros, 2, 64, 32, true)],
    [
      'int4GroupSums sums too short',
      () => a.int4GroupSums(new Int32Array(3), w.packed, w.scales, w.zeros, 2, 64, 32, true, f(64), 0, 1),
    ],
    ['rmsnorm weight too short', () => a.rmsnorm(f(8), 0, f(8), 0, f(3), 0, 2, 4, 1e-5)],
    ['rope odd headDim', () => a.rope(f(6), 0, new Int32Array(1), 0, 1, 2, 3, 10000, null, 0, 1, false)],
    ['rope positions too short', () => a.rope(f(8), 0, new Int32Array(1), 0, 2, 1, 4, 10000, null, 0, 1, false)],
    ['rope freqs too short', () => a.rope(f(8), 0, new Int32Array(2), 0, 2, 1, 4, 10000, f(1), 0, 1, false)],
    ['rope halves not a boolean', () => a.rope(f(8), 0, new Int32Array(2), 0, 2, 1, 4, 10000, null, 0, 1, 1)],
    ['softmax empty rows', () => a.softmax(f(4), 0, 2, 0)],
    ['softmax x too short', () => a.softmax(f(7), 0, 2, 4)],
    ['topk k > len', () => a.topk(new Int32Array(10), 0, f(8), 0, 2, 4, 5)],
    ['topk out as Float32Array', () => a.topk(f(4), 0, f(8), 0, 2, 4, 2)],
    ['non-number size', () => a.softmax(f(8), 0, '2', 4)],
    ['non-integer offset', () => a.softmax(f(8), 0.5, 1, 4)],
    ['forceKernelPath unknown', () => raw!.forceKernelPath('avx1024')],
  ];
  for (const [name, call] of cases) {
    it(`${name}: throws RangeError or TypeError`, () => {
      let caught: unknown;
      try {
        call();
      } catch (error) {
        caught = error;
      }
      expect(caught instanceof RangeError || caught instanceof TypeError, String(caught)).toBe(true);
    });
  }
});
