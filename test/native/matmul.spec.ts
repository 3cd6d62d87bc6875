/**
 * Native weight products against the reference where the dispatch changes kernels: the blocked
 * prefill product (n >= 8 activation rows: weight panels decoded once, MR x NR register tiles) and
 * the thread split (products above 512 KB run on the native pool, in row ranges of 32), on every
 * kernel path this CPU has, by both product paths (ProductPath in core/backend.ts). Shapes are drawn
 * so that neither rows (panel height 16 / 32, thread ranges) nor n (tile height 6 / 12) nor cols
 * (panel width 256) divide evenly.
 *
 * 'dequant': the same tolerance as test/native/basic.spec.ts (TOL_NMSE, and per element TOL_DOT =
 * twice the f32 dot-product bound, since both sides are within the bound of the exact product); the
 * scalar path stays bit-identical with the reference.
 * 'int8' (block weights: the activation rows quantized into ggml's activation blocks, integer sums
 * against the weights' integer codes, src/matvec_q8.h; from a per-type n on (gemm_q8_min_n's measured
 * crossovers; forced down to GEMM_MIN_N here, so small products reach it) the blocked kernel,
 * AVX-512 VNNI's or AVX2's, else a per-row one):
 * - against the f32 reference within INT8_PRODUCT_BOUND below (the activation rounding, derived there);
 * - against the native scalar twin (matmul_q8_ref): the int32 sub-block sums bit for bit (q8BlockSums),
 *   and the outputs within TWIN_BOUND below (f32 rounding only);
 * - the AVX2 blocked kernel against the VNNI one: the same bits (below).
 * f32, f16 and bf16 weights have no integer codes: 'int8' gives the f32 product of the activations
 * rounded to the weights' type (f16, bf16) as ggml does, bit for bit the 'dequant' product of those.
 */
import {
  BLOCK_DTYPES,
  BLOCK_LAYOUT,
  Int4Matrix,
  Tensor,
  bf16ToF32,
  f16ToF32,
  f32ToBf16,
  roundToF16,
  type BlockDType,
  type Engine,
  type Int4GroupSize,
  type MatrixDType,
  type ProductPath,
} from '@sparq/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import { attentionAddon } from '../../packages/native/lib/attention-ops.ts';
import { activationError, activationKind, ggmlActivations, q8_1SumError } from '../support/ggml-activations.ts';
import { F16_FIELDS } from '../support/ggml-layout.ts';
import {
  TOL_NATIVE_NMSE,
  U,
  dotBound,
  nativeNmseGuaranteed,
  nativeVsReferenceBound,
  nmse,
  seeded,
  uniform,
} from '../conformance/numeric.ts';
import { DTYPE_CODE, basicAddon } from '../../packages/native/lib/basic-ops.ts';
import { engines, referenceEngine } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const native = engines.find((e) => e.name === 'native');
const raw = native ? loadAddon() : null;
const paths = raw ? raw.kernelPaths().supported : [];
/** The blocked products' smallest n (src/matvec.h); the 'int8' ones are forced to start there (forceQ8GemmMinN). */
const GEMM_MIN_N = 8;
const DTYPES: readonly MatrixDType[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES];

/** Columns per block (32 for the plain dtypes, which take any). */
const blockElements = (dtype: MatrixDType): number =>
  dtype === 'f32' || dtype === 'f16' || dtype === 'bf16' ? 32 : BLOCK_LAYOUT[dtype].elements;
const GROUPS: readonly Int4GroupSize[] = [32, 64, 128, 'row'];

/** A (rows, cols) weight of `dtype` from uniform values (halves from their bits, blocks quantized by the reference). */
function weight(
  dtype: MatrixDType,
  values: Float32Array,
  rows: number,
  cols: number,
): { w: Tensor; decoded: Float32Array } {
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
  // Never written again, as a model's weights: the native products may read it repacked.
  native?.markConstant(w);
  return { w, decoded };
}

/** sum_c |w[r, c] x[t, c]| for every output (t, r): what the tolerance scales with. */
function absSums(w: Float32Array, x: Float32Array, rows: number, cols: number, n: number): Float64Array {
  const s = new Float64Array(n * rows);
  for (let t = 0; t < n; t++)
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) s[t * rows + r] += Math.abs(w[r * cols + c] * x[t * cols + c]);
  return s;
}

function expectProduct(path: string, ref: Float32Array, got: Float32Array, abs: Float64Array, cols: number): void {
  if (path === 'scalar') {
    expect(got).toEqual(ref);
    return;
  }
  if (nativeNmseGuaranteed(ref, cols, abs)) expect(nmse(ref, got)).toBeLessThanOrEqual(TOL_NATIVE_NMSE);
  for (let i = 0; i < ref.length; i++)
    expect(Math.abs(ref[i] - got[i]), `element ${i}`).toBeLessThanOrEqual(nativeVsReferenceBound(cols, abs[i]));
}

/** The types the blocked 'int8' products (VNNI and AVX2) handle (gemm_q8.h): every block type. */
const GEMM_TYPES: readonly MatrixDType[] = BLOCK_DTYPES;

/**
 * |mw_h| of every 16-element half-block (rows, cols / 16), the f32 term the integer products add per
 * half-block besides dl_h dx (sum c q): q4_1 / q5_1's m, q2_k / q4_k / q5_k's dmin * min, and the
 * constant offsets the per-row products subtract that way (src/block_codes.h): 4 |dl_h| for q3_k,
 * 32 |dl_h| for q6_k. 0 for the other types (signed codes, or an offset subtracted in the integer sums). Read from
 * the blocks as ggml lays them out (core/dtype.ts BLOCK_LAYOUT).
 */
function halfBlockMinimums(dtype: MatrixDType, w: Tensor, rows: number, cols: number): Float64Array {
  const out = new Float64Array((rows * cols) / 16);
  if (dtype === 'f32' || dtype === 'f16' || dtype === 'bf16') return out;
  const bytes = w.data as Uint8Array;
  const { elements, bytes: size } = BLOCK_LAYOUT[dtype];
  for (let blk = 0; blk < (rows * cols) / elements; blk++) {
    const at = blk * size;
    const f16 = (o: number) => Math.abs(f16ToF32(bytes[at + o] | (bytes[at + o + 1] << 8)));
    const half = (h: number, v: number) => (out[(blk * elements) / 16 + h] = v);
    if (dtype === 'q4_1' || dtype === 'q5_1') [0, 1].forEach((h) => half(h, f16(2)));
    else if (dtype === 'q4_k' || dtype === 'q5_k') {
      for (let j = 0; j < 8; j++) {
        const mn = j < 4 ? bytes[at + 8 + j] & 63 : (bytes[at + 8 + j] >> 4) | ((bytes[at + 4 + j] >> 6) << 4);
        half(2 * j, f16(2) * mn);
        half(2 * j + 1, f16(2) * mn);
      }
    } else if (dtype === 'q2_k') for (let h = 0; h < 16; h++) half(h, f16(82) * (bytes[at + h] >> 4));
    else if (dtype === 'q3_k') {
      const sc = (s: number) => at + 96 + s;
      for (let h = 0; h < 16; h++) {
        const low = h < 8 ? bytes[sc(h)] & 15 : bytes[sc(h - 8)] >> 4;
        const high = (bytes[sc(8 + (h % 4))] >> (2 * (h >> 2))) & 3;
        half(h, 4 * f16(108) * Math.abs((low | (high << 4)) - 32));
      }
    } else if (dtype === 'q6_k')
      for (let h = 0; h < 16; h++) half(h, 32 * f16(208) * Math.abs((bytes[at + 192 + h] << 24) >> 24));
  }
  return out;
}

/**
 * f32 roundings a term of an 'int8' product passes through, at most: every kernel adds at most two
 * terms per 16-element half-block to one accumulator (dl dx (sum c q) and m dx (sum q), so a chain
 * has at most 2 cols / 16 additions), and each term also takes at most 8 other roundings (the
 * products dl dx or dx S, the multiply by the integer sum, the per-super-block multiply by d, the
 * joining of two chains and of the minimums' sum, a horizontal sum of up to 16 lanes in 4 steps).
 */
const int8Roundings = (cols: number): number => cols / 8 + 8;

/**
 * The two parts of the 'int8' product's distance from the exact product, per output (t, r):
 * - rounding: the activation's. The codes q_j of ggml's activation blocks for the type
 *   (test/support/ggml-activations.ts) move each element by at most activationError: replacing x_j
 *   by dx q_j moves the product by at most sum_j (|w_j| + 2 |m_h|) activationError_j (|dl c_j| <=
 *   |w_j| + |m_h| (1 + U), and a minimum's term m dx sum q moves by |m| sum_j activationError_j),
 *   and for Q8_1 (whose minimum multiplies an f16 sum) |m| q8_1SumError per block.
 * - magnitude: a bound on the sum of the terms' magnitudes, sum_s |dl_s dx (sum c q)| + |m_s dx (sum q)|
 *   <= sum_j (|w_j| + 2 |m_h|) (|x_j| + 2 activationError_j), since |dx q_j| <= |x_j| + activationError_j;
 *   the f32 roundings move the result by at most int8Roundings(cols) U times it.
 */
function int8Parts(
  dtype: BlockDType,
  w: Float32Array,
  mins: Float64Array,
  x: Float32Array,
  rows: number,
  cols: number,
  n: number,
): { rounding: Float64Array; magnitude: Float64Array; absSum: Float64Array } {
  const rounding = new Float64Array(n * rows);
  const magnitude = new Float64Array(n * rows);
  const absSum = new Float64Array(n * rows);
  const acts = ggmlActivations(dtype, x);
  const err = Float64Array.from(x, (_, j) => activationError(acts, x, j));
  const q8_1 = activationKind(dtype) === 'q8_1';
  for (let t = 0; t < n; t++) {
    for (let r = 0; r < rows; r++) {
      const i = t * rows + r;
      for (let c = 0; c < cols; c++) {
        const wv = Math.abs(w[r * cols + c]);
        const xv = Math.abs(x[t * cols + c]);
        const m = mins[(r * cols + c) >> 4];
        const e = err[t * cols + c];
        rounding[i] += (wv + 2 * m) * e;
        if (q8_1 && c % 32 === 0) rounding[i] += m * q8_1SumError(acts, (t * cols + c) / 32);
        magnitude[i] += (wv + 2 * m) * (xv + 2 * e);
        absSum[i] += wv * xv;
      }
    }
  }
  return { rounding, magnitude, absSum };
}

/**
 * INT8_PRODUCT_BOUND, native 'int8' vs the f32 reference, per output (t, r):
 *   |native - ref| <= |native - P| + |ref - P|,  P = sum_j w_j x_j exactly (w decoded as the reference):
 * |ref - P| <= dotBound(cols, sum_j |w_j x_j|), and |native - P| <= rounding + int8Roundings(cols) U magnitude
 * (int8Parts).
 */
function int8ProductBound(parts: ReturnType<typeof int8Parts>, cols: number): Float64Array {
  return parts.rounding.map(
    (r, i) => r + int8Roundings(cols) * U * parts.magnitude[i] + dotBound(cols, parts.absSum[i]),
  );
}

/**
 * TWIN_BOUND, a SIMD kernel's 'int8' product vs the scalar twin's, per output: both add the same
 * terms (their integer sums are equal bit for bit, checked apart), so they differ by f32 rounding
 * only, at most int8Roundings(cols) U magnitude each: TWIN_ROUNDINGS = 2 of those. It catches a wrong
 * scale, minimum or step in the f32 combination; it does not resolve one unit dl dx of a large integer
 * sum (q8_0's sums reach 32 * 127 * 128, and the bound grows with cols), which is why q8BlockSums
 * compares the sums themselves.
 */
const TWIN_ROUNDINGS = 2;
const twinBound = (parts: ReturnType<typeof int8Parts>, cols: number): Float64Array =>
  parts.magnitude.map((m) => TWIN_ROUNDINGS * int8Roundings(cols) * U * m);

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

/** Elements per sub-block of the 'int8' product's integer sums (src/block_codes.h). */
const subBlockElements = (dtype: BlockDType): number =>
  dtype === 'q2_k' || dtype === 'q3_k' || dtype === 'q6_k' ? 16 : 32;
const isBlock = (dtype: MatrixDType): dtype is BlockDType => dtype !== 'f32' && dtype !== 'f16' && dtype !== 'bf16';
const vnni = raw ? raw.info().features.avx512vnni : false;
/** The dtypes the x86 paths repack for the blocked 'int8' product (src/ops/gemm_q8.h, gemm_q8_packs). */
const REPACKED: readonly BlockDType[] = ['q4_k', 'q6_k'];

for (const path of paths) {
  describe(`native blocked and threaded products [${path}]`, () => {
    const nat = native as Engine;
    const ref = referenceEngine;
    const threads = attentionAddon(raw!);
    const before = threads.attnThreads();
    const addon = raw ? basicAddon(raw) : null;
    beforeAll(() => {
      expect(raw!.forceKernelPath(path)).toBe(path);
      addon!.forceQ8GemmMinN(GEMM_MIN_N);
    });
    afterAll(() => {
      raw!.forceKernelPath(null);
      addon!.forceQ8GemmMinN(null);
      threads.attnSetThreads(before);
    });

    /** matmul's 'int8' outputs on native of x (n, cols) by a weight w (rows, cols). */
    const int8Product = (x: Tensor<'f32'>, rows: number) => (w: Tensor) => {
      const out = Tensor.zeros('f32', [x.shape[0], rows]);
      nat.matmul(out, w, x, 'int8');
      return out.data;
    };
    /** Writes uniform random values of `random`, quantized by the reference, into the block weight w. */
    const requantize = (w: Tensor<BlockDType>, random: () => number) =>
      referenceEngine.quantize(w, Tensor.f32([w.shape[0], w.shape[1]], uniform(random, w.size)));
    /** A new tensor with w's bytes (not marked constant, whatever w is). */
    const copyOf = (w: Tensor) => {
      const copy = Tensor.zeros(w.dtype, [w.shape[0], w.shape[1]]);
      (copy.data as Uint8Array).set(w.data as Uint8Array);
      return copy;
    };

    /** The 'int8' kernel matmul runs here for dtype and n (basic_dispatch.cc), blocked from n on. */
    const int8Kernel = (dtype: BlockDType, n: number, blockedFrom = GEMM_MIN_N) => {
      if (path === 'scalar') return 'ref';
      if (path === 'neon') return raw!.info().features.dotprod ? 'neon-dotprod' : 'neon'; // arm64: per row only
      const avx2 = path === 'avx2' || !vnni;
      if (n >= blockedFrom && GEMM_TYPES.includes(dtype)) return avx2 ? 'avx2-gemm' : 'vnni';
      return avx2 ? 'avx2' : 'avx512';
    };

    it("'int8' takes the blocked kernel from each type's measured crossover on (at least GEMM_MIN_N rows)", () => {
      addon!.forceQ8GemmMinN(null);
      try {
        const [rows, cols] = [3, 256];
        for (const dtype of BLOCK_DTYPES) {
          const from = addon!.q8GemmMinN(DTYPE_CODE[dtype]);
          expect(from, dtype).toBeGreaterThanOrEqual(GEMM_MIN_N);
          const { w } = weight(dtype, uniform(seeded(3), rows * cols), rows, cols);
          for (const n of [from - 1, from]) {
            const sums = new Int32Array((n * rows * cols) / subBlockElements(dtype));
            const x = uniform(seeded(n), n * cols);
            expect(
              addon!.q8BlockSums(DTYPE_CODE[dtype], sums, w.data as Uint8Array, w.offset, x, 0, n, rows, cols),
              `${dtype} n ${n}`,
            ).toBe(int8Kernel(dtype, n, from));
          }
        }
      } finally {
        addon!.forceQ8GemmMinN(GEMM_MIN_N);
      }
    });
    const product = (
      engine: Engine,
      w: Tensor,
      x: Float32Array,
      n: number,
      rows: number,
      cols: number,
      p: ProductPath,
    ) => {
      const out = Tensor.zeros('f32', [n, rows]);
      out.data.fill(NaN); // an output element a kernel skips stays NaN and fails every comparison
      engine.matmul(out, w, Tensor.f32([n, cols], x), p);
      return out.data;
    };
    /** The int32 sub-block sums of the 'int8' product on kernel path `on`, (n, rows, cols / sub-block), and the kernel's name. */
    const blockSums = (
      on: string,
      dtype: BlockDType,
      w: Tensor,
      x: Float32Array,
      n: number,
      rows: number,
      cols: number,
    ) => {
      raw!.forceKernelPath(on);
      try {
        const sums = new Int32Array((n * rows * cols) / subBlockElements(dtype));
        const kernel = addon!.q8BlockSums(DTYPE_CODE[dtype], sums, w.data as Uint8Array, w.offset, x, 0, n, rows, cols);
        return { sums, kernel };
      } finally {
        raw!.forceKernelPath(path);
      }
    };
    /** Both product paths of native against the reference, and 'int8' against the scalar twin. */
    const check = (
      dtype: MatrixDType,
      w: Tensor,
      decoded: Float32Array,
      x: Float32Array,
      n: number,
      rows: number,
      cols: number,
      blockedFrom = GEMM_MIN_N,
    ) => {
      const want = product(ref, w, x, n, rows, cols, 'dequant');
      expectProduct(path, want, product(nat, w, x, n, rows, cols, 'dequant'), absSums(decoded, x, rows, cols, n), cols);
      const got = product(nat, w, x, n, rows, cols, 'int8');
      if (!isBlock(dtype)) {
        // ggml's activations for f16 and bf16 weights: each element rounded to the weights' type, ties to even.
        const rounded = x.map((v) =>
          dtype === 'f16' ? roundToF16(v) : dtype === 'bf16' ? bf16ToF32(f32ToBf16(v)) : v,
        );
        return expect(got).toEqual(product(nat, w, rounded, n, rows, cols, 'dequant'));
      }
      const parts = int8Parts(dtype, decoded, halfBlockMinimums(dtype, w, rows, cols), x, rows, cols, n);
      const bound = int8ProductBound(parts, cols);
      for (let i = 0; i < want.length; i++)
        expect(Math.abs(want[i] - got[i]), `${dtype} int8 vs reference, element ${i}`).toBeLessThanOrEqual(bound[i]);
      const mine = blockSums(path, dtype, w, x, n, rows, cols);
      expect(mine.kernel).toBe(int8Kernel(dtype, n, blockedFrom));
      if (path === 'scalar') return;
      expect(mine.sums, `${dtype} integer sums vs the scalar twin`).toEqual(
        blockSums('scalar', dtype, w, x, n, rows, cols).sums,
      );
      raw!.forceKernelPath('scalar');
      const twin = product(nat, w, x, n, rows, cols, 'int8');
      raw!.forceKernelPath(path);
      const tb = twinBound(parts, cols);
      for (let i = 0; i < got.length; i++)
        expect(Math.abs(twin[i] - got[i]), `${dtype} int8 vs the scalar twin, element ${i}`).toBeLessThanOrEqual(tb[i]);
    };

    for (const dtype of DTYPES) {
      it(`matmul ${dtype} 'dequant' and 'int8': n 1..30 (per-row and blocked kernels)`, () => {
        fc.assert(
          fc.property(gemmShapes, ({ rows, blocks, n, seed }) => {
            const cols = blockElements(dtype) * Math.ceil((32 * blocks) / blockElements(dtype));
            const random = seeded(seed);
            const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
            const x = uniform(random, n * cols);
            check(dtype, w, decoded, x, n, rows, cols);
          }),
          { numRuns: fcRuns(12) },
        );
      });
    }

    it('a block weight not marked constant is read as it is at every product (written again after a blocked one)', () => {
      const [rows, cols, n] = [40, 512, 64];
      const random = seeded(11);
      const product = int8Product(Tensor.f32([n, cols], uniform(random, n * cols)), rows);
      for (const dtype of REPACKED) {
        const w = Tensor.zeros(dtype, [rows, cols]);
        requantize(w, random);
        product(w);
        requantize(w, random); // written again
        expect(product(w), dtype).toEqual(product(copyOf(w)));
      }
    });

    it.runIf(path === 'avx2' || path === 'avx512')(
      "'int8' of a weight marked constant switches to the blocked kernel at the repacked layout's crossover, of one not marked at the file layout's",
      () => {
        addon!.forceQ8GemmMinN(null);
        try {
          const [rows, cols] = [40, 512];
          const random = seeded(13);
          for (const dtype of REPACKED) {
            const code = DTYPE_CODE[dtype];
            const [fileFrom, packedFrom] = [addon!.q8GemmMinN(code, false), addon!.q8GemmMinN(code, true)];
            // The repacked layout costs no panel decode per call, so the table must start it earlier.
            expect(packedFrom, dtype).toBeLessThan(fileFrom);
            const marked = Tensor.zeros(dtype, [rows, cols]);
            requantize(marked, random);
            const unmarked = copyOf(marked);
            nat.markConstant(marked);
            // SPARQ_NATIVE_REPACK=0: the backend keeps no copies, so a marked weight is read as the file lays it out.
            const repacks = (nat.backend.repackedBytes?.(dtype, rows, cols) ?? 0) > 0;
            /** The route matmul took for w and n (q8Routes' counter that moved). */
            const route = (w: Tensor, n: number) => {
              const before = addon!.q8Routes();
              nat.matmul(Tensor.zeros('f32', [n, rows]), w, Tensor.f32([n, cols], uniform(random, n * cols)), 'int8');
              const after = addon!.q8Routes();
              const moved = (['rows', 'blocked', 'packed'] as const).filter((r) => after[r] !== before[r]);
              expect(moved, `${dtype} n ${n}: one product, one route`).toHaveLength(1);
              return moved[0];
            };
            for (const n of new Set([packedFrom - 1, packedFrom, fileFrom - 1, fileFrom].filter((n) => n >= 2))) {
              const markedRoute = repacks ? (n >= packedFrom ? 'packed' : 'rows') : n >= fileFrom ? 'blocked' : 'rows';
              expect(route(marked, n), `${dtype} marked, n ${n}`).toBe(markedRoute);
              expect(route(unmarked, n), `${dtype} not marked, n ${n}`).toBe(n >= fileFrom ? 'blocked' : 'rows');
            }
          }
        } finally {
          addon!.forceQ8GemmMinN(GEMM_MIN_N);
        }
      },
    );

    it.runIf(path === 'avx2' || path === 'avx512')(
      'repackNow makes a marked weight’s copy at once (what its products then read), and none for an unmarked or f32 one',
      () => {
        const [rows, cols, n] = [40, 512, 8];
        const random = seeded(17);
        const product = int8Product(Tensor.f32([n, cols], uniform(random, n * cols)), rows);
        for (const dtype of REPACKED) {
          const repacks = (nat.backend.repackedBytes?.(dtype, rows, cols) ?? 0) > 0;
          const w = Tensor.zeros(dtype, [rows, cols]);
          requantize(w, random);
          const before = copyOf(w);
          expect(nat.repackNow(w), `${dtype} not marked`).toBe(false);
          nat.markConstant(w);
          expect(nat.repackNow(w), `${dtype} marked`).toBe(repacks);
          // Written after the copy was made (breaking the promise on purpose): a product that reads the
          // copy gives the weight as it was at repackNow (before's, marked too, so the same kernel),
          // so the copy was made then, not at the product.
          requantize(w, random);
          nat.markConstant(before);
          expect(product(w), dtype).toEqual(repacks ? product(before) : product(copyOf(w)));
        }
        const f32 = Tensor.f32([rows, cols], uniform(random, rows * cols));
        nat.markConstant(f32);
        expect(nat.repackNow(f32)).toBe(false);
      },
    );

    it.runIf(path === 'avx2' || path === 'avx512')(
      "'int8' over repacked weights with 1 to 8 activation rows: the scalar twin's integer sums bit for bit",
      () => {
        // The repacked layout's crossovers start the blocked kernel below GEMM_MIN_N rows.
        addon!.forceQ8GemmMinN(1);
        try {
          fc.assert(
            fc.property(
              fc.constantFrom(...REPACKED),
              fc.record({
                rows: fc.integer({ min: 1, max: 70 }),
                supers: fc.integer({ min: 1, max: 3 }),
                n: fc.integer({ min: 1, max: 8 }),
                seed: fc.integer(),
              }),
              (dtype, { rows, supers, n, seed }) => {
                const cols = 256 * supers;
                const random = seeded(seed);
                const { w } = weight(dtype, uniform(random, rows * cols), rows, cols);
                const x = uniform(random, n * cols);
                const sums = (packed: boolean) => {
                  const out = new Int32Array((n * rows * cols) / subBlockElements(dtype));
                  const kernel = addon!.q8BlockSums(
                    DTYPE_CODE[dtype],
                    out,
                    w.data as Uint8Array,
                    w.offset,
                    x,
                    0,
                    n,
                    rows,
                    cols,
                    packed,
                  );
                  return { out, kernel };
                };
                const mine = sums(true);
                expect(mine.kernel).toBe(path === 'avx2' || !vnni ? 'avx2-packed' : 'vnni-packed');
                raw!.forceKernelPath('scalar');
                try {
                  expect(mine.out, `${dtype} n ${n} rows ${rows}`).toEqual(sums(false).out);
                } finally {
                  raw!.forceKernelPath(path);
                }
              },
            ),
            { numRuns: fcRuns(24) },
          );
        } finally {
          addon!.forceQ8GemmMinN(GEMM_MIN_N);
        }
      },
    );

    it("'int8' by the per-row kernels with 8 to 12 activation rows (whole tiles of 8 rows and the rest; blocked kernel held off; column chunks)", () => {
      const PER_ROW_BELOW = 64;
      addon!.forceQ8GemmMinN(PER_ROW_BELOW);
      try {
        fc.assert(
          fc.property(
            fc.constantFrom(...BLOCK_DTYPES),
            fc.record({
              rows: fc.integer({ min: 1, max: 40 }),
              // Up to three 256-element super-blocks, or 17 to 24: from 8 rows, the AVX-512 per-row
              // kernel of the K-quants takes the columns in chunks once the rows' codes pass 32 KiB
              // (matvec_q8_simd.h, Q8_CHUNK_BYTES; 8 rows of 17 super-blocks are 34 KiB).
              blocks: fc.oneof(fc.integer({ min: 1, max: 24 }), fc.integer({ min: 8 * 17, max: 8 * 24 })),
              n: fc.integer({ min: 8, max: 12 }),
              seed: fc.integer(),
            }),
            (dtype, { rows, blocks, n, seed }) => {
              const cols = blockElements(dtype) * Math.ceil((32 * blocks) / blockElements(dtype));
              const random = seeded(seed);
              const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
              check(dtype, w, decoded, uniform(random, n * cols), n, rows, cols, PER_ROW_BELOW);
            },
          ),
          { numRuns: fcRuns(48) },
        );
      } finally {
        addon!.forceQ8GemmMinN(GEMM_MIN_N);
      }
    });

    it("matmul 'dequant' and 'int8' on 1, 2 and 3 threads: every dtype, rows not a multiple of the split", () => {
      fc.assert(
        fc.property(
          threadShapes,
          fc.constantFrom(...DTYPES),
          fc.constantFrom(1, 2, 3),
          ({ rows, blocks, n, seed }, dtype, count) => {
            threads.attnSetThreads(count);
            const cols = 32 * blocks;
            const random = seeded(seed);
            const { w, decoded } = weight(dtype, uniform(random, rows * cols), rows, cols);
            const x = uniform(random, n * cols);
            check(dtype, w, decoded, x, n, rows, cols);
          },
        ),
        { numRuns: fcRuns(8) },
      );
    });

    it("'dequant' with one-hot activation rows gives every block type's decoded weights exactly (per-row and blocked kernels)", () => {
      // Random block bytes (finite f16 fields, F16_FIELDS): every code and scale bit pattern. Row t of
      // x is the unit vector at column c0 + t, so out[t, r] = w[r, c0 + t]: its product with 1 is exact
      // and every other term adds a zero, so any decoding difference shows, with no tolerance.
      const [rows, cols] = [3, 512];
      const random = seeded(29);
      for (const dtype of BLOCK_DTYPES) {
        const w = Tensor.zeros(dtype, [rows, cols]);
        const bytes = w.data as Uint8Array; // (rows * cols / elements) blocks
        for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(256 * random());
        const { bytes: size } = BLOCK_LAYOUT[dtype];
        for (let b = 0; b < bytes.length; b += size)
          for (const at of F16_FIELDS[dtype]) {
            const half = Math.floor(0x7c00 * random()) | (random() < 0.5 ? 0x8000 : 0); // below 0x7c00: finite
            bytes[b + at] = half & 0xff;
            bytes[b + at + 1] = half >> 8;
          }
        const decoded = Tensor.zeros('f32', [rows, cols]);
        ref.dequantize(decoded, w as Tensor<BlockDType>);
        for (const n of [4, 16]) {
          const wrong: string[] = [];
          for (let c0 = 0; c0 < cols; c0 += n) {
            const x = new Float32Array(n * cols); // (n, cols)
            for (let t = 0; t < n; t++) x[t * cols + c0 + t] = 1;
            const out = product(nat, w, x, n, rows, cols, 'dequant'); // (n, rows)
            for (let t = 0; t < n; t++)
              for (let r = 0; r < rows; r++)
                if (out[t * rows + r] !== decoded.data[r * cols + c0 + t])
                  wrong.push(`w[${r}, ${c0 + t}]: ${out[t * rows + r]} vs ${decoded.data[r * cols + c0 + t]}`);
          }
          expect(wrong, `${dtype} n ${n}`).toEqual([]);
        }
      }
    });
    it("'int8' is an integer product for every block type and n (it differs from 'dequant')", () => {
      for (const dtype of BLOCK_DTYPES) {
        for (const n of [1, 13]) {
          const [rows, cols] = [5, 512];
          const random = seeded(7);
          const { w } = weight(dtype, uniform(random, rows * cols), rows, cols);
          const x = uniform(random, n * cols);
          expect(product(nat, w, x, n, rows, cols, 'int8'), `${dtype} n ${n}`).not.toEqual(
            product(nat, w, x, n, rows, cols, 'dequant'),
          );
        }
      }
    });
    it("matmulInt4 'dequant' and 'int8': blocked (n >= 8) and threaded, every group size", () => {
      const shapes = fc.oneof(
        gemmShapes.map((s) => ({ ...s, blocks: 2 * s.blocks, n: Math.max(8, s.n) })),
        threadShapes,
      );
      fc.assert(
        fc.property(
          shapes,
          fc.constantFrom(...GROUPS),
          fc.boolean(),
          fc.constantFrom(1, 2, 3),
          ({ rows, blocks, n, seed }, groupSize, symmetric, count) => {
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
          },
        ),
        { numRuns: fcRuns(10) },
      );
    });
  });
}

/**
 * Block bytes of extreme codes for the AVX2 blocked product's int16 sums (src/kernels/x86/gemm_q8_avx2.cc): per
 * weight row, every code byte 0x00, 0x7f, 0x80, 0xff (all-max nibbles and fifth bits, q8_0's -128
 * and 127, iq4's first and last level, q6_k's codes 63 and its scales -1, 127 and -128) or random,
 * and the f16 scales (F16_FIELDS: d, m / dmin) 0.01 so the values stay finite.
 */
function extremeWeight(dtype: BlockDType, rows: number, cols: number, random: () => number): Tensor<BlockDType> {
  const w = Tensor.zeros(dtype, [rows, cols]) as Tensor<BlockDType>;
  const bytes = w.data as Uint8Array;
  const { elements, bytes: size } = BLOCK_LAYOUT[dtype];
  const perRow = (cols / elements) * size;
  const F16_HUNDREDTH = 0x211f; // 0.0100021
  for (let r = 0; r < rows; r++) {
    const fill = [0x00, 0x7f, 0x80, 0xff, -1][r % 5];
    for (let i = r * perRow; i < (r + 1) * perRow; i++) bytes[i] = fill >= 0 ? fill : Math.floor(256 * random());
  }
  for (let at = 0; at < bytes.length; at += size)
    for (const o of F16_FIELDS[dtype]) [bytes[at + o], bytes[at + o + 1]] = [F16_HUNDREDTH & 0xff, F16_HUNDREDTH >> 8];
  return w;
}

describe.runIf(paths.includes('avx2') && paths.includes('avx512') && vnni)(
  "'int8': the AVX2 blocked product against the VNNI one",
  () => {
    const threads = attentionAddon(raw!);
    const before = threads.attnThreads();
    const addon = basicAddon(raw!);
    beforeAll(() => addon.forceQ8GemmMinN(GEMM_MIN_N));
    afterAll(() => {
      raw!.forceKernelPath(null);
      addon.forceQ8GemmMinN(null);
      threads.attnSetThreads(before);
    });
    const onPath = <T>(path: 'avx2' | 'avx512' | 'scalar', fn: () => T): T => {
      expect(raw!.forceKernelPath(path)).toBe(path);
      return fn();
    };
    const product = (path: 'avx2' | 'avx512', w: Tensor, x: Float32Array, n: number, rows: number, cols: number) =>
      onPath(path, () => {
        const out = Tensor.zeros('f32', [n, rows]);
        out.data.fill(NaN); // an output element a kernel skips stays NaN and fails every comparison
        native!.matmul(out, w, Tensor.f32([n, cols], x), 'int8');
        return out.data;
      });
    const blockSums = (
      path: 'avx2' | 'avx512' | 'scalar',
      dtype: BlockDType,
      w: Tensor,
      x: Float32Array,
      n: number,
      rows: number,
      cols: number,
      packed = false,
    ) =>
      onPath(path, () => {
        const sums = new Int32Array((n * rows * cols) / subBlockElements(dtype));
        return {
          sums,
          kernel: addon.q8BlockSums(
            DTYPE_CODE[dtype],
            sums,
            w.data as Uint8Array,
            w.offset,
            x,
            0,
            n,
            rows,
            cols,
            packed,
          ),
        };
      });
    /** The blocked product over w as the file stores it, even for a dtype the engine repacks (matmul without `packed`). */
    const unpackedProduct = (
      path: 'avx2' | 'avx512',
      w: Tensor,
      x: Float32Array,
      n: number,
      rows: number,
      cols: number,
    ) =>
      onPath(path, () => {
        const out = new Float32Array(n * rows).fill(NaN);
        raw!.matmul(DTYPE_CODE[w.dtype], out, 0, w.data, w.offset, x, 0, n, rows, cols, true);
        return out;
      });
    /**
     * AVX2 vs the f32 reference within INT8_PRODUCT_BOUND; its int32 sub-block sums vs VNNI's and the
     * scalar twin's, and its outputs vs VNNI's, bit for bit: both blocked kernels take the same int32
     * sums (exact, in any order) and the same f32 operations in the same order per output (per
     * sub-block f += f32(isum) * (dw * dx), then f += mw * (dx sum q)), so a difference would be a
     * wrong int32 sum (an int16 saturation in vpmaddubsw, a lost correction) or a changed f32 step.
     */
    const check = (dtype: BlockDType, w: Tensor, x: Float32Array, n: number, rows: number, cols: number) => {
      const decoded = Tensor.zeros('f32', [rows, cols]);
      referenceEngine.dequantize(decoded, w as Tensor<BlockDType>);
      const want = Tensor.zeros('f32', [n, rows]);
      referenceEngine.matmul(want, w, Tensor.f32([n, cols], x));
      const avx2 = product('avx2', w, x, n, rows, cols);
      const bound = int8ProductBound(
        int8Parts(dtype, decoded.data, halfBlockMinimums(dtype, w, rows, cols), x, rows, cols, n),
        cols,
      );
      for (let i = 0; i < want.data.length; i++)
        expect(Math.abs(want.data[i] - avx2[i]), `${dtype} element ${i}`).toBeLessThanOrEqual(bound[i]);
      const mine = blockSums('avx2', dtype, w, x, n, rows, cols);
      expect(mine.kernel).toBe('avx2-gemm');
      const theirs = blockSums('avx512', dtype, w, x, n, rows, cols);
      expect(theirs.kernel).toBe('vnni');
      expect(mine.sums, `${dtype} sums vs VNNI`).toEqual(theirs.sums);
      expect(mine.sums, `${dtype} sums vs the scalar twin`).toEqual(
        blockSums('scalar', dtype, w, x, n, rows, cols).sums,
      );
      expect(avx2, `${dtype} outputs vs VNNI`).toEqual(product('avx512', w, x, n, rows, cols));
      if (!REPACKED.includes(dtype)) return;
      // A repacked dtype: product() above ran over the repacked weights (the engine repacks at the first
      // blocked product); their kernels' sums are the same integers, and the file layout's kernels
      // (without `packed`) stay within the bound and the same bit for bit.
      for (const isa of ['avx2', 'avx512'] as const) {
        const packed = blockSums(isa, dtype, w, x, n, rows, cols, true);
        expect(packed.kernel).toBe(isa === 'avx2' ? 'avx2-packed' : 'vnni-packed');
        expect(packed.sums, `${dtype} packed ${isa} sums`).toEqual(mine.sums);
      }
      const unpacked = unpackedProduct('avx2', w, x, n, rows, cols);
      for (let i = 0; i < want.data.length; i++)
        expect(Math.abs(want.data[i] - unpacked[i]), `${dtype} unpacked element ${i}`).toBeLessThanOrEqual(bound[i]);
      expect(unpacked, `${dtype} unpacked outputs vs VNNI`).toEqual(unpackedProduct('avx512', w, x, n, rows, cols));
      // q6_k's packed kernels take the panels' int32 sums and f32 steps: the same output bit for bit
      // (q4_k's sum a super-block in int32 before its f32 steps, so theirs differ within the bound).
      if (dtype === 'q6_k') expect(avx2, `${dtype} packed outputs vs the file layout's`).toEqual(unpacked);
    };
    const types = GEMM_TYPES as readonly BlockDType[];

    it('every type: n 8..37 (tiles of 4 or 6 rows and a tail), rows 1..70 (half panels of 16 and a tail), quantized weights', () => {
      fc.assert(
        fc.property(gemmShapes, fc.constantFrom(...types), ({ rows, blocks, n, seed }, dtype) => {
          threads.attnSetThreads(1);
          const cols = blockElements(dtype) * Math.ceil((32 * blocks) / blockElements(dtype));
          const random = seeded(seed);
          const { w } = weight(dtype, uniform(random, rows * cols), rows, cols);
          check(dtype, w, uniform(random, (7 + n) * cols), 7 + n, rows, cols);
        }),
        { numRuns: fcRuns(40) },
      );
    });

    it('every type: extreme codes against activations of 127 steps (the int16 pair sums at their largest)', () => {
      for (const dtype of types) {
        const [rows, cols, n] = [45, 512, 11];
        const random = seeded(5);
        const w = extremeWeight(dtype, rows, cols, random);
        // Row 0 all +1, row 1 all -1, the others random signs: every code q = +-127.
        const x = Float32Array.from({ length: n * cols }, (_, i) =>
          i < cols ? 1 : i < 2 * cols ? -1 : random() < 0.5 ? -1 : 1,
        );
        check(dtype, w, x, n, rows, cols);
      }
    });

    it('on 1, 2 and 3 threads: rows not a multiple of the split', () => {
      fc.assert(
        fc.property(
          threadShapes,
          fc.constantFrom(...types),
          fc.constantFrom(1, 2, 3),
          fc.constantFrom(8, 9, 13),
          ({ rows, blocks, seed }, dtype, count, n) => {
            threads.attnSetThreads(count);
            const cols = 32 * blocks;
            const random = seeded(seed);
            const { w } = weight(dtype, uniform(random, rows * cols), rows, cols);
            check(dtype, w, uniform(random, n * cols), n, rows, cols);
          },
        ),
        { numRuns: fcRuns(8) },
      );
    });
  },
);
