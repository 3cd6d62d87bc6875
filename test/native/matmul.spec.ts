/**
 * Native weight products against the reference where the dispatch changes kernels: the blocked
 * prefill product (n >= 8 activation rows: weight panels decoded once, MR x NR register tiles) and
 * the thread split (products above 512 KB run on the native pool, in row ranges of 32), on every
 * kernel path this CPU has. Shapes are drawn so that neither rows (panel height 16 / 32, thread
 * ranges) nor n (tile height 6 / 12) nor cols (panel width 256) divide evenly.
 *
 * Tolerance: the same as test/native/basic.spec.ts (TOL_NMSE, and per element TOL_DOT = twice the
 * f32 dot-product bound, since both sides are within the bound of the exact product); the scalar
 * path stays bit-identical with the reference. Where matmul takes the integer prefill product
 * (n >= 8 on AVX-512 VNNI, the types gemm_q8.h lists), INT8_PREFILL_BOUND below, derived there.
 */
import { BLOCK_DTYPES, BLOCK_LAYOUT, Int4Matrix, Tensor, bf16ToF32, f16ToF32, type BlockDType, type Engine, type Int4GroupSize, type MatrixDType } from '@sparq/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import { attentionAddon } from '../../packages/native/lib/attention-ops.ts';
import { TOL_NATIVE_NMSE, U, dotBound, nativeVsReferenceBound, nmse, seeded, uniform } from '../conformance/numeric.ts';
import { basicAddon } from '../../packages/native/lib/basic-ops.ts';
import { engines, referenceEngine } from '../support/backends.ts';

const native = engines.find((e) => e.name === 'native');
const raw = native ? loadAddon() : null;
const paths = raw ? raw.kernelPaths().supported : [];
const DTYPES: readonly MatrixDType[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES];

/** Columns per block (32 for the plain dtypes, which take any). */
const blockElements = (dtype: MatrixDType): number => (dtype === 'f32' || dtype === 'f16' || dtype === 'bf16' ? 32 : BLOCK_LAYOUT[dtype].elements);
const GROUPS: readonly Int4GroupSize[] = [32, 64, 128, 'row'];

/** A (rows, cols) weight of `dtype` from uniform values (halves from their bits, blocks quantized by the reference). */
function weight(dtype: MatrixDType, values: Float32Array, rows: number, cols: number): { w: Tensor; decoded: Float32Array } {
  if (dtype === 'f32') return { w: Tensor.f32([rows, cols], values), decoded: values };
  const w = Tensor.zeros(dtype, [rows, cols]);
  const out = Tensor.zeros('f32', [rows, cols]);
  const decoded = out.data;
  if (dtype === 'f16' || dtype === 'bf16') {
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    // bf16: the top half of the f32 bits; f16: a finite half with the value's sign and a small exponent.
    for (let i = 0; i < values.length; i++) w.data[i] = dtype === 'bf16' ? bits[i] >>> 16 : (bits[i] >>> 16) & 0xbbff;
    decoded.set(Array.from(w.data, dtype === 'bf16' ? bf16ToF32 : f16ToF32));
  } else {
    referenceEngine.quantize(w as Tensor<BlockDType>, Tensor.f32([rows, cols], values));
    referenceEngine.dequantize(out, w as Tensor<BlockDType>);
  }
  return { w, decoded };
}

/** sum_c |w[r, c] x[t, c]| for every output (t, r): what the tolerance scales with. */
function absSums(w: Float32Array, x: Float32Array, rows: number, cols: number, n: number): Float64Array {
  const s = new Float64Array(n * rows);
  for (let t = 0; t < n; t++) for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) s[t * rows + r] += Math.abs(w[r * cols + c] * x[t * cols + c]);
  return s;
}

function expectProduct(path: string, ref: Float32Array, got: Float32Array, abs: Float64Array, cols: number): void {
  if (path === 'scalar') {
    expect(got).toEqual(ref);
    return;
  }
  expect(nmse(ref, got)).toBeLessThanOrEqual(TOL_NATIVE_NMSE);
  for (let i = 0; i < ref.length; i++) expect(Math.abs(ref[i] - got[i]), `element ${i}`).toBeLessThanOrEqual(nativeVsReferenceBound(cols, abs[i]));
}

/** The types matmul's integer prefill product handles (gemm_q8.h), and those with a per-sub-block minimum. */
const INT8_PREFILL_TYPES: readonly MatrixDType[] = ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q8_0', 'iq4_nl', 'q4_k', 'q5_k', 'iq4_xs'];
const WITH_MIN: readonly MatrixDType[] = ['q4_1', 'q5_1', 'q4_k', 'q5_k'];

/** |mw| of every 32-element sub-block (rows, cols / 32): q4_1 / q5_1's m, q4_k / q5_k's dmin * min; 0 for the others. */
function subBlockMinimums(dtype: MatrixDType, w: Tensor, rows: number, cols: number): Float64Array {
  const out = new Float64Array((rows * cols) / 32);
  if (!WITH_MIN.includes(dtype)) return out;
  const bytes = w.data as Uint8Array;
  const { elements, bytes: size } = BLOCK_LAYOUT[dtype as BlockDType];
  for (let blk = 0; blk < (rows * cols) / elements; blk++) {
    const at = blk * size;
    const f16 = (o: number) => Math.abs(f16ToF32(bytes[at + o] | (bytes[at + o + 1] << 8)));
    if (elements === 32) out[blk] = f16(2);
    else {
      for (let j = 0; j < 8; j++) {
        const mn = j < 4 ? bytes[at + 8 + j] & 63 : (bytes[at + 8 + j] >> 4) | ((bytes[at + 4 + j] >> 6) << 4);
        out[blk * 8 + j] = f16(2) * mn;
      }
    }
  }
  return out;
}

/**
 * INT8_PREFILL_BOUND, native (integer prefill product) vs the f32 reference, per output (t, r):
 *   |native - ref| <= |native - P| + |ref - P|,  P = sum_j w_j x_j exactly (w decoded as the reference).
 * - |ref - P| <= dotBound(cols, sum_j |w_j x_j|).
 * - native = sum_b f32 terms of dw dx isum_b + mw dx S_b, where the integer sums are exact and the
 *   codes q_j = round(x_j / dx) (dx = the block's step, x_j / dx rounded to f32 first) are off by at
 *   most 1/2 + 2^-16 of a step: replacing x_j by dx q_j moves the product by at most
 *   sum_j |w_j| dx_b (1/2 + 2^-16).
 * - f32 rounding: per sub-block dw * dx, the FMA with f32(isum), dx * S and its FMA (4 roundings),
 *   then cols / 32 accumulations: (cols / 32 + 4) U times the sum of the terms' magnitudes, which
 *   are at most sum_j (|w_j| + 2 |mw_b|) (|x_j| + dx_b) since |dw (u_j - off)| <= |w_j| + |mw_b| (1 + U).
 */
function int8PrefillBound(w: Float32Array, mins: Float64Array, x: Float32Array, rows: number, cols: number, n: number): Float64Array {
  const bound = new Float64Array(n * rows);
  for (let t = 0; t < n; t++) {
    const step = new Float64Array(cols / 32);
    for (let b = 0; b < cols / 32; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[t * cols + 32 * b + j]));
      step[b] = Math.max(Math.fround(amax / 127), 2 ** -126);
    }
    for (let r = 0; r < rows; r++) {
      let rounding = 0;
      let magnitude = 0;
      let absSum = 0;
      for (let c = 0; c < cols; c++) {
        const wv = Math.abs(w[r * cols + c]);
        const xv = Math.abs(x[t * cols + c]);
        const b = c >> 5;
        rounding += wv * step[b] * (0.5 + 2 ** -16);
        magnitude += (wv + 2 * mins[(r * cols) / 32 + b]) * (xv + step[b]);
        absSum += wv * xv;
      }
      bound[t * rows + r] = rounding + (cols / 32 + 4) * U * magnitude + dotBound(cols, absSum);
    }
  }
  return bound;
}

/** Small products: n from 1 (per-row kernels) to 30 (blocked kernel), rows and cols around the panel and tile sizes. */
const gemmShapes = fc.record({
  rows: fc.integer({ min: 1, max: 70 }),
  blocks: fc.integer({ min: 1, max: 11 }), // 32-element blocks: up to 352 columns, past one 256-column panel
  n: fc.integer({ min: 1, max: 30 }),
  seed: fc.integer(),
});

/** Products large enough for the thread split (> 512 KB of weights x n), rows not a multiple of 32. */
const threadShapes = fc.record({
  rows: fc.integer({ min: 600, max: 1100 }),
  blocks: fc.constantFrom(16, 24), // 512 or 768 columns: whole 256-element super-blocks too
  n: fc.constantFrom(1, 3, 9),
  seed: fc.integer(),
});

if (!native || !raw) {
  describe.skip('native matmul skipped: native backend unavailable', () => {
    it('needs the addon', () => {});
  });
}

for (const path of paths) {
  describe(`native blocked and threaded products [${path}]`, () => {
    const nat = native as Engine;
    const ref = referenceEngine;
    const threads = attentionAddon(raw!);
    const before = threads.attnThreads();
    beforeAll(() => {
      expect(raw!.forceKernelPath(path)).toBe(path);
    });
    afterAll(() => {
      raw!.forceKernelPath(null);
      threads.attnSetThreads(before);
    });

    const int8Prefill = raw ? basicAddon(raw).setInt8Prefill(null) && path === 'avx512' : false;
    /** Checks native against the reference: the integer prefill bound where it runs, else expectProduct. */
    const check = (dtype: MatrixDType, w: Tensor, decoded: Float32Array, x: Float32Array, n: number, rows: number, cols: number) => {
      const want = product(ref, w, x, n, rows, cols);
      const got = product(nat, w, x, n, rows, cols);
      if (!(int8Prefill && n >= 8 && INT8_PREFILL_TYPES.includes(dtype))) return expectProduct(path, want, got, absSums(decoded, x, rows, cols, n), cols);
      const bound = int8PrefillBound(decoded, subBlockMinimums(dtype, w, rows, cols), x, rows, cols, n);
      for (let i = 0; i < want.length; i++) expect(Math.abs(want[i] - got[i]), `element ${i}`).toBeLessThanOrEqual(bound[i]);
    };
    const product = (engine: Engine, w: Tensor, x: Float32Array, n: number, rows: number, cols: number) => {
      const out = Tensor.zeros('f32', [n, rows]);
      engine.matmul(out, w, Tensor.f32([n, cols], x));
      return out.data;
    };

    for (const dtype of DTYPES) {
      it(`matmul ${dtype}: n 1..30 (per-row and blocked kernels)`, () => {
        fc.assert(
          fc.property(gemmShapes, ({ rows, blocks, n, seed }) => {
            const cols = blockElements(dtype) * Math.ceil((32 * blocks) / blockElements(dtype));
            const random = seeded(seed);
            const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
            const x = uniform(random, n * cols);
            check(dtype, w, decoded, x, n, rows, cols);
          }),
          { numRuns: 12 },
        );
      });
    }

    it('matmul on 1, 2 and 3 threads: every dtype, rows not a multiple of the split', () => {
      fc.assert(
        fc.property(threadShapes, fc.constantFrom(...DTYPES), fc.constantFrom(1, 2, 3), ({ rows, blocks, n, seed }, dtype, count) => {
          threads.attnSetThreads(count);
          const cols = 32 * blocks;
          const random = seeded(seed);
          const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
          const x = uniform(random, n * cols);
          check(dtype, w, decoded, x, n, rows, cols);
        }),
        { numRuns: 8 },
      );
    });

    it.runIf(int8Prefill)('with the integer prefill product switched off, n >= 8 stays within the f32 bound (every int8-capable type)', () => {
      const addon = basicAddon(raw!);
      addon.setInt8Prefill(false);
      try {
        for (const dtype of INT8_PREFILL_TYPES) {
          const [rows, cols, n] = [37, 512, 13];
          const random = seeded(31);
          const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
          const x = uniform(random, n * cols);
          expectProduct(path, product(ref, w, x, n, rows, cols), product(nat, w, x, n, rows, cols), absSums(decoded, x, rows, cols, n), cols);
        }
      } finally {
        addon.setInt8Prefill(null);
      }
    });

    it("matmulInt4 'dequant' and 'int8': blocked (n >= 8) and threaded, every group size", () => {
      const shapes = fc.oneof(gemmShapes.map((s) => ({ ...s, blocks: 2 * s.blocks, n: Math.max(8, s.n) })), threadShapes);
      fc.assert(
        fc.property(shapes, fc.constantFrom(...GROUPS), fc.boolean(), fc.constantFrom(1, 2, 3), ({ rows, blocks, n, seed }, groupSize, symmetric, count) => {
          const cols = 32 * blocks;
          fc.pre(groupSize === 'row' || cols % groupSize === 0);
          threads.attnSetThreads(count);
          const random = seeded(seed);
          const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
          ref.quantizeInt4(w, Tensor.f32([rows, cols], uniform(random, rows * cols)));
          const decoded = Tensor.zeros('f32', [rows, cols]);
          ref.dequantizeInt4(decoded, w);
          const x = uniform(random, n * cols);
          const abs = absSums(decoded.data, x, rows, cols, n);
          for (const p of ['dequant', 'int8'] as const) {
            const o1 = Tensor.zeros('f32', [n, rows]);
            const o2 = Tensor.zeros('f32', [n, rows]);
            ref.matmulInt4(o1, w, Tensor.f32([n, cols], x), p);
            nat.matmulInt4(o2, w, Tensor.f32([n, cols], x), p);
            // int8: the sums of |(q - zero) q_x| terms exceed those of |w x| by at most 1 + 1/254 (basic.spec.ts): twice covers it.
            expectProduct(path, o1.data, o2.data, p === 'int8' ? abs.map((v) => 2 * v) : abs, cols);
          }
        }),
        { numRuns: 10 },
      );
    });
  });
}
