/**
 * SparQ test vectors (spec.md §7, format `sparq-oracle-vectors/v1`): parsing with
 * errors that name the case and field, and running one case through a backend
 * with the pass rule of spec.md §7. Used by `sparq vectors` and by the conformance
 * tests, so any file of this format runs through every backend without code changes.
 *
 * Case layout: q (H, d); K, V (n_kv, S, d); head h reads KV head floor(h / g);
 * positions j < n_pad are masked; S - 1 is the current token.
 */
import { Engine, FormatError, KVCache, SparqTrace, Tensor, type KVLayout } from '@sparq/core';

export const VECTORS_FORMAT = 'sparq-oracle-vectors/v1';

export interface Array2 {
  shape: number[];
  data: number[];
}

export interface VectorCase {
  index: number;
  name: string;
  S: number;
  d: number;
  nKv: number;
  g: number;
  r: number;
  k: number;
  l: number;
  reallocate: boolean;
  nPad: number;
  q: Array2;
  K: Array2;
  V: Array2;
  expected: { y: Array2; i1: number[][]; i2: number[][]; alpha: Array2; dense: Array2 };
}

/** Parses a vectors file's text; throws FormatError naming the case index and field. */
export function parseVectors(text: string, source = 'vectors'): VectorCase[] {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (error) {
    throw new FormatError(`${source}: not JSON (${(error as Error).message})`);
  }
  const top = root as Record<string, unknown>;
  if (top === null || typeof top !== 'object' || top.format !== VECTORS_FORMAT) {
    throw new FormatError(`${source}: field 'format' is ${JSON.stringify(top?.format)}, expected '${VECTORS_FORMAT}'`);
  }
  if (!Array.isArray(top.cases)) throw new FormatError(`${source}: field 'cases' is missing or not an array`);
  return top.cases.map((c, index) => parseCase(c, index, source));
}

function parseCase(raw: unknown, index: number, source: string): VectorCase {
  const c = (raw ?? {}) as Record<string, unknown>;
  const where = `${source}: case ${index}${typeof c.name === 'string' ? ` (${c.name})` : ''}`;
  const fail = (field: string, what: string): never => {
    throw new FormatError(`${where}: field '${field}' ${what}`);
  };
  const int = (field: string, min: number): number => {
    const v = c[field];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      fail(field, `is ${JSON.stringify(v)}, expected an integer >= ${min}`);
    return v as number;
  };
  const S = int('S', 1),
    d = int('d', 1),
    nKv = int('n_kv', 1),
    g = int('g', 1);
  const r = int('r', 1),
    k = int('k', 1),
    l = int('l', 0),
    nPad = int('n_pad', 0);
  if (r > d) fail('r', `is ${r}, expected at most d = ${d}`);
  if (nPad >= S) fail('n_pad', `is ${nPad}, expected less than S = ${S}`);
  if (typeof c.reallocate !== 'boolean')
    fail('reallocate', `is ${JSON.stringify(c.reallocate)}, expected true or false`);
  const H = nKv * g;
  const kPrime = Math.min(k, S - nPad);
  const array = (value: unknown, field: string, shape: number[] | null, size: number): Array2 => {
    const a = (value ?? {}) as Record<string, unknown>;
    if (!Array.isArray(a.shape) || !Array.isArray(a.data)) fail(field, 'is not a {shape, data} array');
    const got = a.shape as number[];
    if (shape && (got.length !== shape.length || got.some((n, i) => n !== shape[i])))
      fail(`${field}.shape`, `is [${got}], expected [${shape}]`);
    const data = a.data as unknown[];
    if (data.length !== size) fail(`${field}.data`, `has ${data.length} values, expected ${size}`);
    const bad = data.findIndex((x) => typeof x !== 'number');
    if (bad >= 0) fail(`${field}.data`, `element ${bad} is ${JSON.stringify(data[bad])}, expected a number`);
    return { shape: got, data: data as number[] };
  };
  const indexSets = (value: unknown, field: string, count: number, limit: number): number[][] => {
    if (!Array.isArray(value) || value.length !== nKv)
      fail(field, `is not an array of ${nKv} index lists (one per KV head)`);
    return (value as unknown[]).map((row, h) => {
      if (!Array.isArray(row) || row.length !== count) fail(`${field}[${h}]`, `is not a list of ${count} indices`);
      const bad = (row as unknown[]).findIndex(
        (x) => typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x >= limit,
      );
      if (bad >= 0)
        fail(
          `${field}[${h}][${bad}]`,
          `is ${JSON.stringify((row as unknown[])[bad])}, expected an integer in [0, ${limit - 1}]`,
        );
      return row as number[];
    });
  };
  const expected = (c.expected ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const a1 = expected.algorithm1;
  if (!a1 || typeof a1 !== 'object') fail('expected.algorithm1', 'is missing');
  if (!expected.dense || typeof expected.dense !== 'object') fail('expected.dense', 'is missing');
  return {
    index,
    name: typeof c.name === 'string' ? c.name : `case ${index}`,
    S,
    d,
    nKv,
    g,
    r,
    k,
    l,
    reallocate: c.reallocate as boolean,
    nPad,
    q: array(c.q, 'q', [H, d], H * d),
    K: array(c.K, 'K', [nKv, S, d], nKv * S * d),
    V: array(c.V, 'V', [nKv, S, d], nKv * S * d),
    expected: {
      y: array(a1!.y, 'expected.algorithm1.y', [H, d], H * d),
      i1: indexSets(a1!.i1, 'expected.algorithm1.i1', r, d),
      i2: indexSets(a1!.i2, 'expected.algorithm1.i2', kPrime, S),
      alpha: array(a1!.alpha, 'expected.algorithm1.alpha', null, H),
      dense: array(expected.dense!.y, 'expected.dense.y', [H, d], H * d),
    },
  };
}

export interface CaseResult {
  name: string;
  pass: boolean;
  /** max|y - expected| for SparQ and for dense, and the tolerance of spec.md §7 for each. */
  sparqError: number;
  sparqTolerance: number;
  denseError: number;
  denseTolerance: number;
  i1Match: boolean;
  i2Match: boolean;
  /** Raw outputs, for --out. */
  y: Float32Array;
  i1: number[][];
  i2: number[][];
  alpha: Float32Array;
}

/** spec.md §7's tolerance: 1e-5 relative to the largest expected magnitude, plus 1e-5 absolute. */
export function passTolerance(expected: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < expected.length; i++) max = Math.max(max, Math.abs(expected[i]));
  return 1e-5 * (1 + max);
}

function maxAbsError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let max = 0;
  // NaN in `got` must fail, so compare with a test that NaN cannot pass.
  for (let i = 0; i < want.length; i++) {
    const e = Math.abs(got[i] - want[i]);
    max = Number.isNaN(e) ? Infinity : Math.max(max, e);
  }
  return max;
}

/** Equal as sets (order of i1, i2 does not matter, spec.md §2). */
function sameSet(a: number[], b: number[]): boolean {
  const sa = [...a].sort((x, y) => x - y);
  const sb = [...b].sort((x, y) => x - y);
  return sa.length === sb.length && sa.every((x, i) => x === sb[i]);
}

/** Runs one case through `engine`: KV cache of capacity S with n_pad masked, sparqDecode with a trace, attentionDecode. */
export function runCase(engine: Engine, c: VectorCase, layout: KVLayout = 'k-twice'): CaseResult {
  const H = c.nKv * c.g;
  const cache = new KVCache({ nKvHeads: c.nKv, headDim: c.d, capacity: c.S, layout });
  cache.reset(0, c.nPad);
  // The file stores (n_kv, S, d); kvAppend takes tokens first: (S, n_kv, d).
  const k = Tensor.zeros('f32', [c.S, c.nKv, c.d]);
  const v = Tensor.zeros('f32', [c.S, c.nKv, c.d]);
  for (let h = 0; h < c.nKv; h++) {
    for (let j = 0; j < c.S; j++) {
      for (let i = 0; i < c.d; i++) {
        k.data[(j * c.nKv + h) * c.d + i] = c.K.data[(h * c.S + j) * c.d + i];
        v.data[(j * c.nKv + h) * c.d + i] = c.V.data[(h * c.S + j) * c.d + i];
      }
    }
  }
  engine.kvAppend(cache, 0, k, v);
  const q = Tensor.f32([1, H, c.d], c.q.data);
  const y = Tensor.zeros('f32', [1, H, c.d]);
  const trace = new SparqTrace(1, H, c.nKv, c.r, c.k);
  engine.sparqDecode(y, q, cache, { r: c.r, k: c.k, l: c.l, reallocate: c.reallocate }, { trace });
  const dense = Tensor.zeros('f32', [1, H, c.d]);
  engine.attentionDecode(dense, q, cache);

  const i1: number[][] = [];
  const i2: number[][] = [];
  for (let h = 0; h < c.nKv; h++) {
    i1.push(Array.from(trace.i1.subarray(h * c.r, (h + 1) * c.r)));
    i2.push(Array.from(trace.i2.subarray(h * c.k, h * c.k + trace.i2Count[h])));
  }
  const sparqError = maxAbsError(y.data, c.expected.y.data);
  const sparqTolerance = passTolerance(c.expected.y.data);
  const denseError = maxAbsError(dense.data, c.expected.dense.data);
  const denseTolerance = passTolerance(c.expected.dense.data);
  const i1Match = i1.every((set, h) => sameSet(set, c.expected.i1[h]));
  const i2Match = i2.every((set, h) => sameSet(set, c.expected.i2[h]));
  const pass = sparqError <= sparqTolerance && denseError <= denseTolerance && i1Match && i2Match;
  return {
    name: c.name,
    pass,
    sparqError,
    sparqTolerance,
    denseError,
    denseTolerance,
    i1Match,
    i2Match,
    y: y.data,
    i1,
    i2,
    alpha: trace.alpha,
  };
}

/** One line per case and backend, e.g. `PASS  mha_basic  [reference]  sparq 3.1e-8 / 2.9e-5  dense ...`. */
export function formatResult(result: CaseResult, backend: string): string {
  const e = (x: number) => x.toExponential(1);
  const sets =
    result.i1Match && result.i2Match
      ? 'i1 i2 match'
      : `i1 ${result.i1Match ? 'match' : 'DIFFER'}, i2 ${result.i2Match ? 'match' : 'DIFFER'}`;
  return `${result.pass ? 'PASS' : 'FAIL'}  ${result.name.padEnd(24)} [${backend}]  sparq max|err| ${e(result.sparqError)} (tol ${e(result.sparqTolerance)})  dense max|err| ${e(result.denseError)} (tol ${e(result.denseTolerance)})  ${sets}`;
}
