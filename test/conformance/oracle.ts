/**
 * Helpers for the attention conformance suites: random caches built through a
 * backend's kvAppend, and a plain f64 oracle for attention over a position set
 * written independently of the reference backend (no shared code). Data come
 * from the demo's seeded PRNG, so fast-check shrinks a seed, not thousands of floats.
 */
import { Engine, KVCache, Tensor, roundToF16, type KVDType, type KVLayout } from '@sparq/core';
import fc from 'fast-check';
import { prng } from '../../packages/cli/src/commands/demo.ts';

/**
 * Tolerance for an attention output computed in f32 against the f64 oracle:
 * logits are rounded to f32 (relative 2^-24 on |s| <= ~20 gives ~1e-6 absolute in
 * the exponent), probabilities likewise, and the output is rounded once; so errors
 * stay below ~1e-6 * (1 + max|V|). 1e-5 leaves room for the reordered sums of a
 * native backend and matches SPEC 7's pass rule.
 */
export const TOL_ATTENTION = 1e-5;

export interface Shape {
  batch: number;
  nKv: number;
  g: number;
  d: number;
  dtype: KVDType;
  layout: KVLayout;
  /** Per sequence: positions written (S, current token included) and leading masked ones. */
  lens: number[];
  pads: number[];
  seed: number;
}

/** Random shapes: S from 1, odd d, GQA g in {1, 2, 4}, padding, batch 1 or 2 with different lengths, f16/f32, both layouts. */
export const shapeArb: fc.Arbitrary<Shape> = fc
  .record({
    batch: fc.integer({ min: 1, max: 2 }),
    nKv: fc.integer({ min: 1, max: 2 }),
    g: fc.constantFrom(1, 2, 4),
    d: fc.integer({ min: 1, max: 9 }),
    dtype: fc.constantFrom<KVDType>('f32', 'f16'),
    layout: fc.constantFrom<KVLayout>('k-twice', 'single-k'),
    valid: fc.array(fc.integer({ min: 1, max: 24 }), { minLength: 2, maxLength: 2 }),
    pads: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 2 }),
    seed: fc.integer({ min: 0, max: 2 ** 31 }),
  })
  .map(({ valid, pads, ...rest }) => ({ ...rest, lens: valid.slice(0, rest.batch).map((v, b) => v + pads[b]), pads: pads.slice(0, rest.batch) }));

export interface Built {
  cache: KVCache;
  /** What the cache stores, as f64: K, V (batch, nKv, capacity, d) after rounding to the cache dtype. */
  K: Float64Array;
  V: Float64Array;
  q: Tensor<'f32'>;
}

const rounder = (dtype: KVDType) => (dtype === 'f16' ? roundToF16 : Math.fround);

/** A cache of the given shape filled through engine.kvAppend (in 1-3 chunks per sequence) and a query (batch, H, d). */
export function buildCache(engine: Engine, s: Shape, qScale = 1): Built {
  const capacity = Math.max(...s.lens);
  const cache = new KVCache({ batch: s.batch, nKvHeads: s.nKv, headDim: s.d, capacity, dtype: s.dtype, layout: s.layout });
  const rand = prng(s.seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const K = new Float64Array(s.batch * s.nKv * capacity * s.d);
  const V = new Float64Array(K.length);
  const round = rounder(s.dtype);
  // Each sequence: reset with its padding, then append its tokens in chunks.
  for (let b = 0; b < s.batch; b++) {
    cache.reset(b, s.pads[b]);
    let pos = 0;
    while (pos < s.lens[b]) {
      const n = Math.min(s.lens[b] - pos, 1 + Math.floor(rand() * 8));
      const k = Tensor.zeros('f32', [n, s.nKv, s.d]);
      const v = Tensor.zeros('f32', [n, s.nKv, s.d]);
      for (let t = 0; t < n; t++) {
        for (let h = 0; h < s.nKv; h++) {
          for (let i = 0; i < s.d; i++) {
            const at = ((b * s.nKv + h) * capacity + pos + t) * s.d + i;
            k.data[(t * s.nKv + h) * s.d + i] = gauss();
            v.data[(t * s.nKv + h) * s.d + i] = gauss();
            K[at] = round(k.data[(t * s.nKv + h) * s.d + i]);
            V[at] = round(v.data[(t * s.nKv + h) * s.d + i]);
          }
        }
      }
      engine.kvAppend(cache, b, k, v);
      pos += n;
    }
  }
  const H = s.nKv * s.g;
  const q = Tensor.f32([s.batch, H, s.d], Array.from({ length: s.batch * H * s.d }, () => qScale * gauss()));
  return { cache, K, V, q };
}

/** Row offset of (b, h, pos) in Built.K / Built.V. */
export const at = (c: KVCache, b: number, h: number, pos: number) => ((b * c.nKvHeads + h) * c.capacity + pos) * c.headDim;

/** f64 softmax(q · K[pos]^T / sqrt(d)) · V[pos] over `positions` for query head `head` of sequence b. */
export function oracleAttend(built: Built, b: number, head: number, positions: number[]): Float64Array {
  const { cache, K, V, q } = built;
  const d = cache.headDim;
  const H = q.shape[1];
  const h = Math.floor(head / (H / cache.nKvHeads));
  const qRow = Array.from(q.data.subarray((b * H + head) * d, (b * H + head + 1) * d));
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
export const rowOf = (t: Tensor<'f32'>, b: number, head: number) => t.data.subarray((b * t.shape[1] + head) * t.shape[2], (b * t.shape[1] + head + 1) * t.shape[2]);
