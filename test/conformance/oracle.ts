/**
 * Helpers for the attention conformance suites: random caches built through a
 * backend's kvAppend, and a plain f64 oracle for attention over a position set
 * written independently of the reference backend (no shared code). Data come
 * from the demo's seeded PRNG, so fast-check shrinks a seed, not thousands of floats.
 */
import {
  Engine,
  KT_DTYPES,
  KVCache,
  Tensor,
  f16ToF32,
  f32ToF16,
  roundToF16,
  type KTDType,
  type KVDType,
  type KVLayout,
} from '@sparq/core';
import fc from 'fast-check';
import { prng } from '../../packages/cli/src/commands/demo.ts';
import { referenceEngine } from '../support/backends.ts';

/**
 * Tolerance for an attention output computed in f32 against the f64 oracle:
 * logits are rounded to f32 (relative 2^-24 on |s| <= ~20 gives ~1e-6 absolute in
 * the exponent), probabilities likewise, and the output is rounded once; so errors
 * stay below ~1e-6 * (1 + max|V|). 1e-5 leaves room for the reordered sums of a
 * native backend and matches spec.md §7's pass rule.
 */
export const TOL_ATTENTION = 1e-5;

export interface Shape {
  batch: number;
  nKv: number;
  g: number;
  d: number;
  /** Type of the K rows. */
  dtype: KVDType;
  /** Type of the V rows: dtype, or another (llama.cpp's -ctk / -ctv apart). */
  vDType: KVDType;
  /** Type of K transposed ('k-twice' only). */
  kT: KTDType;
  layout: KVLayout;
  /** Per sequence: positions written (S, current token included) and leading masked ones. */
  lens: number[];
  pads: number[];
  seed: number;
}

/** The kT types allowed over `dtype` rows: f32 only over f32. */
export const kTFor = (dtype: KVDType): KTDType[] => KT_DTYPES.filter((kT) => kT !== 'f32' || dtype === 'f32');

const ROW_TYPES: readonly KVDType[] = ['f32', 'f16', 'q8_0', 'q4_0'];
const isBlock = (dtype: KVDType) => dtype === 'q8_0' || dtype === 'q4_0';

/**
 * Random shapes: S from 1 (odd and even), GQA g in {1, 2, 4, 8}, padding, batch 1 or 2 with
 * different lengths, every row dtype with every kT it allows, both layouts; half of them with K
 * and V rows of one type, half with any pair (f16 / q4_0, q8_0 / q4_0, q4_0 / q8_0, ...). Float
 * rows take any d from 1 (odd ones included); a cache with block rows takes d 32 or 64 (whole
 * ggml blocks).
 */
export const shapeArb: fc.Arbitrary<Shape> = fc
  .oneof(
    fc.constantFrom(...ROW_TYPES).map((t) => [t, t] as const),
    fc.tuple(fc.constantFrom(...ROW_TYPES), fc.constantFrom(...ROW_TYPES)),
  )
  .chain(([dtype, vDType]) =>
    fc.record({
      batch: fc.integer({ min: 1, max: 2 }),
      nKv: fc.integer({ min: 1, max: 2 }),
      g: fc.constantFrom(1, 2, 4, 8),
      d: isBlock(dtype) || isBlock(vDType) ? fc.constantFrom(32, 64) : fc.integer({ min: 1, max: 9 }),
      dtype: fc.constant(dtype),
      vDType: fc.constant(vDType),
      kT: fc.constantFrom(...kTFor(dtype)),
      layout: fc.constantFrom<KVLayout>('k-twice', 'single-k'),
      valid: fc.array(fc.integer({ min: 1, max: 24 }), { minLength: 2, maxLength: 2 }),
      pads: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 2 }),
      seed: fc.integer({ min: 0, max: 2 ** 31 }),
    }),
  )
  .map(({ valid, pads, ...rest }) => ({
    ...rest,
    lens: valid.slice(0, rest.batch).map((v, b) => v + pads[b]),
    pads: pads.slice(0, rest.batch),
  }));

/** Shapes whose K transposed holds exactly the rows' values (f32 / f16 K rows, kT of the same type), so both layouts agree. */
export const exactKTShapeArb: fc.Arbitrary<Shape> = shapeArb.map((s) =>
  s.dtype === 'f32' || s.dtype === 'f16'
    ? { ...s, kT: s.dtype }
    : { ...s, dtype: 'f16', vDType: isBlock(s.vDType) ? 'f16' : s.vDType, kT: 'f16', d: 1 + (s.seed % 9) },
);

export interface Built {
  cache: KVCache;
  /** What the cache's rows hold, as f64: K, V (batch, nKv, capacity, d) as attention reads them (each in its own type). */
  K: Float64Array;
  V: Float64Array;
  /** What SparQ step 1 reads of K transposed, laid out like K (equal to K for 'single-k'). */
  KT: Float64Array;
  /** The f32 rows given to kvAppend, laid out like K. */
  Kin: Float32Array;
  Vin: Float32Array;
  q: Tensor<'f32'>;
}

/**
 * One row as a cache of `dtype` stores it and attention reads it: f32, f16, or the reference
 * backend's quantize then dequantize ops (byte-exact with ggml, checked in ggml-oracle.spec.ts).
 */
export function storedRow(dtype: KVDType, row: Float32Array): Float64Array {
  if (dtype === 'f32' || dtype === 'f16') return Float64Array.from(row, dtype === 'f16' ? roundToF16 : Math.fround);
  const blocks = Tensor.zeros(dtype, [1, row.length]);
  referenceEngine.quantize(blocks, Tensor.f32([1, row.length], row));
  const back = Tensor.zeros('f32', [1, row.length]);
  referenceEngine.dequantize(back, blocks);
  return Float64Array.from(back.data);
}

/**
 * The integer kT of the design written out in f64, independently of the backends: for each
 * 64-position block of stored values x (one component), d = f16(amax / qmax) and codes
 * clamp(round half away(x / d), -qmax, qmax). Returns the scales (f16 bits) and codes.
 */
export function kTBlockCodes(bits: number, x: ArrayLike<number>): { scaleBits: number; codes: number[] } {
  const qmax = 2 ** (bits - 1) - 1;
  let amax = 0;
  for (let t = 0; t < x.length; t++) amax = Math.max(amax, Math.abs(x[t]));
  const scaleBits = f32ToF16(Math.fround(amax / qmax));
  const d = f16ToF32(scaleBits);
  const codes = Array.from(x, (v) => {
    if (d === 0) return 0;
    const u = v / d;
    const r = Math.sign(u) * Math.floor(Math.abs(u) + 0.5);
    return Math.max(-qmax, Math.min(qmax, r)) + 0; // + 0 turns -0 into 0: codes are integers
  });
  return { scaleBits, codes };
}

const KT_BITS: Partial<Record<KTDType, number>> = { i8: 8, i4: 4, i2: 2 };

/** Fills KT from K for `cache`'s kT type over positions [0, nPast) of sequence b. */
function fillKT(cache: KVCache, K: Float64Array, KT: Float64Array, b: number): void {
  const d = cache.headDim;
  const bits = cache.kTDType ? KT_BITS[cache.kTDType] : undefined;
  for (let h = 0; h < cache.nKvHeads; h++) {
    const rowAt = (j: number) => ((b * cache.nKvHeads + h) * cache.capacity + j) * d;
    for (let i = 0; i < d; i++) {
      for (let first = 0; first < cache.nPast[b]; first += 64) {
        const count = Math.min(64, cache.nPast[b] - first);
        const x = Array.from({ length: count }, (_, t) => K[rowAt(first + t) + i]);
        if (bits === undefined) {
          x.forEach((v, t) => (KT[rowAt(first + t) + i] = cache.kTDType === 'f16' ? roundToF16(v) : v));
        } else {
          const { scaleBits, codes } = kTBlockCodes(bits, x);
          codes.forEach((c, t) => (KT[rowAt(first + t) + i] = f16ToF32(scaleBits) * c));
        }
      }
    }
  }
}

/**
 * A cache of the given shape filled through engine.kvAppend (in chunks of 1-8 tokens, or
 * `chunk` when given) and a query (batch, H, d).
 */
export function buildCache(engine: Engine, s: Shape, qScale = 1, chunk?: number): Built {
  const capacity = Math.max(...s.lens);
  const cache = new KVCache({
    batch: s.batch,
    nKvHeads: s.nKv,
    headDim: s.d,
    capacity,
    dtype: { k: s.dtype, v: s.vDType },
    kTDType: s.kT,
    layout: s.layout,
  });
  const rand = prng(s.seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const Kin = new Float32Array(s.batch * s.nKv * capacity * s.d);
  const Vin = new Float32Array(Kin.length);
  for (let e = 0; e < Kin.length; e++) {
    Kin[e] = gauss();
    Vin[e] = gauss();
  }
  const chunkRand = prng(s.seed + 1); // its own stream: the data do not depend on the chunking
  // Each sequence: reset with its padding, then append its tokens in chunks.
  for (let b = 0; b < s.batch; b++) {
    cache.reset(b, s.pads[b]);
    for (let pos = 0; pos < s.lens[b];) {
      const n = Math.min(s.lens[b] - pos, chunk ?? 1 + Math.floor(chunkRand() * 8));
      const k = Tensor.zeros('f32', [n, s.nKv, s.d]);
      const v = Tensor.zeros('f32', [n, s.nKv, s.d]);
      // (N, nKv, d) from the (batch, nKv, capacity, d) inputs.
      for (let t = 0; t < n; t++) {
        for (let h = 0; h < s.nKv; h++) {
          const at = ((b * s.nKv + h) * capacity + pos + t) * s.d;
          k.data.set(Kin.subarray(at, at + s.d), (t * s.nKv + h) * s.d);
          v.data.set(Vin.subarray(at, at + s.d), (t * s.nKv + h) * s.d);
        }
      }
      engine.kvAppend(cache, b, k, v);
      pos += n;
    }
  }
  const K = new Float64Array(Kin.length);
  const V = new Float64Array(Kin.length);
  for (let at = 0; at < Kin.length; at += s.d) {
    K.set(storedRow(s.dtype, Kin.subarray(at, at + s.d)), at);
    V.set(storedRow(s.vDType, Vin.subarray(at, at + s.d)), at);
  }
  const KT = K.slice();
  if (cache.kT) for (let b = 0; b < s.batch; b++) fillKT(cache, K, KT, b);
  const H = s.nKv * s.g;
  const q = Tensor.f32(
    [s.batch, H, s.d],
    Array.from({ length: s.batch * H * s.d }, () => qScale * gauss()),
  );
  return { cache, K, V, KT, Kin, Vin, q };
}

/** Nearest integer, halves to even (x86's vroundps, which ggml's Q8_0 quantizer runs). */
function nearestEven(v: number): number {
  const r = Math.round(v); // halves up
  return Math.abs(v - Math.trunc(v)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * A query row as attention scores it against `dtype` K rows. Over q8_0 / q4_0 rows the scores are
 * integer products with the query in ggml's Q8_0 blocks (issue 24; as llama.cpp): per block of 32,
 * amax = max |x|, codes nearest-even(f32(x * f32(127 / amax))) (0 when amax = 0), step f16(f32(amax / 127)),
 * so the product equals the exact one of this dequantized query with the stored rows. Float rows see q as is.
 */
export function scoredQuery(dtype: KVDType, q: ArrayLike<number>): Float64Array {
  const out = Float64Array.from(q);
  if (dtype !== 'q8_0' && dtype !== 'q4_0') return out;
  for (let b = 0; b < q.length; b += 32) {
    let amax = 0;
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(q[i]));
    const id = amax === 0 ? 0 : Math.fround(127 / amax);
    const step = roundToF16(Math.fround(amax / 127));
    for (let i = b; i < b + 32; i++) out[i] = step * nearestEven(Math.fround(q[i] * id));
  }
  return out;
}

/** Row offset of (b, h, pos) in Built.K / Built.V. */
export const at = (c: KVCache, b: number, h: number, pos: number) =>
  ((b * c.nKvHeads + h) * c.capacity + pos) * c.headDim;

/** f64 softmax(q · K[pos]^T / sqrt(d)) · V[pos] over `positions` for query head `head` of sequence b (q as scoredQuery gives it). */
export function oracleAttend(built: Built, b: number, head: number, positions: number[]): Float64Array {
  const { cache, K, V, q } = built;
  const d = cache.headDim;
  const H = q.shape[1];
  const h = Math.floor(head / (H / cache.nKvHeads));
  const qRow = Array.from(scoredQuery(cache.kDType, q.data.subarray((b * H + head) * d, (b * H + head + 1) * d)));
  const logits = positions.map((j) => qRow.reduce((s, x, i) => s + x * K[at(cache, b, h, j) + i], 0) / Math.sqrt(d));
  const max = Math.max(...logits);
  const w = logits.map((x) => Math.exp(x - max));
  const total = w.reduce((s, x) => s + x, 0);
  const y = new Float64Array(d);
  positions.forEach((j, n) => {
    for (let i = 0; i < d; i++) y[i] += (w[n] / total) * V[at(cache, b, h, j) + i];
  });
  return y;
}

/** Valid positions [nPad, nPast) of sequence b. */
export const validOf = (c: KVCache, b: number) => Array.from({ length: c.nValid(b) }, (_, i) => c.nPad[b] + i);

/** max |a - b| over `a.length` elements, NaN counted as infinite. */
export function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>, bOffset = 0): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const e = Math.abs(a[i] - b[bOffset + i]);
    m = Number.isNaN(e) ? Infinity : Math.max(m, e);
  }
  return m;
}

/** Output rows of query head `head` of sequence b. */
export const rowOf = (t: Tensor<'f32'>, b: number, head: number) =>
  t.data.subarray((b * t.shape[1] + head) * t.shape[2], (b * t.shape[1] + head + 1) * t.shape[2]);
