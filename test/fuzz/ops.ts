/**
 * The op fuzzer: seeded random calls of every op, run on every backend from
 * the same inputs. Shapes, strides, dtypes and parameters (r, k, l, positions,
 * sequence numbers) are drawn in and out of range; values are small dyadic
 * numbers (exact sums, so selections tie and must follow the tie rule), plain
 * random floats, or laced with NaN, infinities and huge values; buffers are
 * sometimes detached, shared or strided. Each case must end, on every backend,
 * in an error of the project's classes (SparqError) or a result, and the
 * backends must agree: the same error class, or outputs within AGREE of each
 * other with NaN and infinities in the same places (docs/edge-cases.md).
 */
import {
  H2OState,
  Int4Matrix,
  KVCache,
  SparqError,
  SparqTrace,
  Tensor,
  UnsupportedOpError,
  f32ToBf16,
  f32ToF16,
  type BlockDType,
  type Engine,
} from '@sparq/core';
import { seeded } from '../conformance/numeric.ts';

/** Relative agreement of two backends' finite outputs: a consistency check, far looser than the conformance bounds. */
export const AGREE = 2e-3;
/** Absolute floor of the agreement test, for outputs that are differences of nearly equal values. */
const AGREE_FLOOR = 1e-4;

/** A result, flagged `unspecified` when its inputs may overflow f32 (only the absence of errors is compared). */
export type Outcome =
  { error: string; message: string } | { outputs: (Float32Array | Int32Array)[]; unspecified: boolean };

export interface FuzzCase {
  /** What the case calls, for reports: op name and the drawn shapes and parameters. */
  label: string;
  run(engine: Engine): Outcome;
}

type ValueMode = 'dyadic' | 'random' | 'special';
const SPECIALS = [NaN, Infinity, -Infinity, 1e30, -1e30, 3e38, 0, -0, 70000];
/** From here on a product of two values and a sum over a row can pass f32's range (2^128). */
const HUGE = 2 ** 50;

/** The draws of one case; every run of the case replays them, so each backend sees the same inputs. */
class Draw {
  readonly random: () => number;
  mode: ValueMode;
  /** Set when a value of magnitude >= HUGE was drawn: products may overflow f32, results are unspecified. */
  huge = false;
  constructor(seed: number) {
    this.random = seeded(seed);
    const m = this.random();
    this.mode = m < 0.5 ? 'dyadic' : m < 0.8 ? 'random' : 'special';
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.random() * (max - min + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)];
  }
  chance(p: number): boolean {
    return this.random() < p;
  }
  value(): number {
    if (this.mode === 'special' && this.chance(0.05)) {
      const v = this.pick(SPECIALS);
      if (Math.abs(v) >= HUGE) this.huge = true;
      return v;
    }
    // Multiples of 1/4 in [-2, 2]: dot products of a few of them are exact in f32.
    if (this.mode === 'dyadic') return this.int(-8, 8) / 4;
    return Math.fround(this.random() * 4 - 2);
  }
  /** An out-of-range or odd parameter now and then, else one in [min, max]. */
  param(min: number, max: number): number {
    if (this.chance(0.08)) return this.pick([0, -1, 1.5, NaN, max + 1, 2 ** 31]);
    return this.int(min, max);
  }
  /** A float tensor of `shape`, sometimes shared, strided (a transposed view) or detached. */
  f32(shape: number[], fresh = false): Tensor<'f32'> {
    const shared = this.chance(0.1);
    const t = Tensor.zeros('f32', shape, { shared });
    for (let i = 0; i < t.size; i++) t.data[i] = this.value();
    if (fresh) return t;
    if (shape.length >= 2 && this.chance(0.03))
      return t.permute(...shape.map((_, i) => shape.length - 1 - i)) as Tensor<'f32'>;
    if (!shared && this.chance(0.02)) structuredClone(t.data.buffer, { transfer: [t.data.buffer as ArrayBuffer] });
    return t;
  }
}

const MATRIX_TYPES = ['f32', 'f16', 'bf16', 'q4_0', 'q8_0', 'q4_k'] as const;
const QUANT_TYPES: BlockDType[] = ['q4_0', 'q4_1', 'q5_0', 'q8_0', 'q4_k', 'q6_k', 'iq4_nl'];

/** An op the backend declares absent (for this dtype): not compared. */
const UNSUPPORTED = 'unsupported';

/** Runs `call` with the engine, turning its result or error into an Outcome. */
function outcome(d: Draw, call: (d: Draw) => (Float32Array | Int32Array)[]): Outcome {
  try {
    const outputs = call(d).map((a) => a.slice());
    return { outputs, unspecified: d.huge };
  } catch (error) {
    const e = error as Error;
    const kind =
      e instanceof UnsupportedOpError
        ? UNSUPPORTED
        : e instanceof SparqError
          ? e.constructor.name
          : `crash ${e?.constructor?.name}`;
    return { error: kind, message: String(e?.message) };
  }
}

/** A cache of `nValid` tokens (after `nPad` masked ones) appended by `engine` from the draw's values. */
function filledCache(
  engine: Engine,
  d: Draw,
  shape: { batch: number; nKv: number; headDim: number; capacity: number },
  nValid: number,
  nPad: number,
  layout: 'k-twice' | 'single-k',
  dtype: 'f32' | 'f16',
): KVCache {
  const cache = new KVCache({
    batch: shape.batch,
    nKvHeads: shape.nKv,
    headDim: shape.headDim,
    capacity: shape.capacity,
    layout,
    dtype,
  });
  for (let b = 0; b < shape.batch; b++) {
    cache.reset(b, Math.min(nPad, shape.capacity));
    const n = Math.min(nValid + nPad, shape.capacity);
    if (n > 0) {
      const k = d.f32([n, shape.nKv, shape.headDim], true);
      const v = d.f32([n, shape.nKv, shape.headDim], true);
      engine.kvAppend(cache, b, k, v);
    }
  }
  return cache;
}

/** One fuzz case from `seed`: an op and its inputs, replayable on any engine. */
export function fuzzCase(seed: number, preparer: Engine): FuzzCase {
  const op = new Draw(seed).pick(OPS);
  return {
    label: `${op} (seed ${seed})`,
    run: (engine) => outcome(new Draw(seed), (d) => CASES[op](engine, d, preparer)),
  };
}

const CASES = {
  matvec(engine: Engine, d: Draw, preparer: Engine) {
    d.random(); // the op pick
    const rows = d.int(1, 6);
    const cols = d.pick([32, 64, 256]);
    const type = d.pick(MATRIX_TYPES);
    const wf = d.f32([rows, cols], true);
    let w: Tensor = wf;
    if (type === 'f16' || type === 'bf16') {
      w = Tensor.zeros(type, [rows, cols]);
      const round = type === 'f16' ? f32ToF16 : f32ToBf16;
      for (let i = 0; i < w.size; i++) w.data[i] = round(wf.data[i]);
    } else if (type !== 'f32') {
      // Weights made once, by the reference quantizer, so every backend multiplies the same blocks.
      w = Tensor.zeros(type, [rows, cols]);
      preparer.quantize(w as Tensor<BlockDType>, wf);
    }
    const n = d.int(1, 3);
    const x = d.f32(d.chance(0.5) ? [cols] : [n, cols]);
    const out = Tensor.zeros('f32', x.rank === 1 ? [rows] : [n, rows]);
    if (x.rank === 1) engine.matvec(out, w, x);
    else engine.matmul(out, w, x);
    return [out.data];
  },
  int4(engine: Engine, d: Draw) {
    d.random();
    const rows = d.int(1, 5);
    const cols = d.pick([32, 64, 128]);
    const w = new Int4Matrix(rows, cols, { groupSize: d.pick([32, 'row'] as const), symmetric: d.chance(0.5) });
    engine.quantizeInt4(w, d.f32([rows, cols]));
    const out = Tensor.zeros('f32', [rows]);
    engine.matvecInt4(out, w, d.f32([cols]), d.pick(['dequant', 'int8'] as const));
    return [out.data, w.scales.slice()];
  },
  quantize(engine: Engine, d: Draw) {
    d.random();
    const type = d.pick(QUANT_TYPES);
    const cols = d.pick([32, 256, 40]);
    const x = d.f32([d.int(1, 3), cols]);
    const q = Tensor.zeros(type, [x.shape[0], cols % 32 === 0 ? cols : 32]);
    engine.quantize(q, x);
    const back = Tensor.zeros('f32', q.shape);
    engine.dequantize(back, q);
    return [back.data];
  },
  rmsnorm(engine: Engine, d: Draw) {
    d.random();
    const dim = d.int(1, 40);
    const x = d.f32([d.int(1, 3), dim]);
    const out = Tensor.zeros('f32', x.shape);
    engine.rmsnorm(out, x, d.f32([dim]), d.pick([1e-5, 1e-6, 0, -1, NaN]));
    return [out.data];
  },
  rope(engine: Engine, d: Draw) {
    d.random();
    const n = d.int(1, 3);
    const x = d.f32([n, d.int(1, 4), 2 * d.int(1, 8) + (d.chance(0.05) ? 1 : 0)]);
    const positions = Tensor.zeros('i32', [n]);
    for (let i = 0; i < n; i++) positions.data[i] = d.param(0, 5000);
    engine.rope(x, positions, d.pick([10000, 1e6, 0, -5]), { pairs: d.pick(['adjacent', 'halves'] as const) });
    return [x.data];
  },
  // add and swiglu: elementwise, sometimes past the native scan's 64K-element chunks (the scan of
  // gate and up on the pool), sometimes with mismatched shapes, out aliasing an input.
  elementwise(engine: Engine, d: Draw) {
    d.random();
    const op = d.pick(['add', 'swiglu'] as const);
    const n = d.chance(0.2) ? d.int(16_000, 70_000) : d.int(1, 70);
    const a = d.f32([n]);
    const b = d.f32(d.chance(0.05) ? [n + 1] : [n]);
    const out = d.chance(0.3) ? a : Tensor.zeros('f32', [n]);
    if (op === 'add') engine.add(out, a, b);
    else engine.swiglu(out, a, b);
    return [out.data];
  },
  softmax(engine: Engine, d: Draw) {
    d.random();
    const x = d.f32([d.int(1, 3), d.int(1, 40)]);
    engine.softmax(x);
    return [x.data];
  },
  topk(engine: Engine, d: Draw) {
    d.random();
    const len = d.int(1, 30);
    const x = d.f32([d.int(1, 3), len]);
    // k past len is refused by validation; past len + 1 it would only test the allocator.
    const k = d.param(1, len);
    const out = Tensor.zeros('i32', [x.shape[0], Number.isInteger(k) && k > len ? len + 1 : Math.max(1, k)]);
    engine.topk(out, x);
    return [sortedRows(out)];
  },
  attention(engine: Engine, d: Draw) {
    d.random();
    const batch = d.int(1, 2);
    const nKv = d.int(1, 3);
    const g = d.pick([1, 1, 2, 4]);
    const headDim = d.pick([2, 4, 8, 16, 32]);
    const capacity = d.int(1, 24);
    const nValid = d.int(0, capacity);
    const nPad = d.chance(0.2) ? d.int(0, 3) : 0;
    const method = d.pick(['dense', 'prefill', 'sparq', 'oracle', 'h2o', 'lminf'] as const);
    // Selections compare scores: with plain random floats two scores can sit within a rounding
    // error of each other, and backends that sum in a different order may rank them differently
    // (a near tie, docs/edge-cases.md). Dyadic values make the scores exact, so ties are exact
    // and the tie rule decides.
    if (method !== 'dense' && method !== 'prefill' && d.mode === 'random') d.mode = 'dyadic';
    const layout = method === 'sparq' || d.chance(0.5) ? 'k-twice' : 'single-k';
    const cache = filledCache(
      engine,
      d,
      { batch, nKv, headDim, capacity },
      nValid,
      nPad,
      layout,
      d.chance(0.2) ? 'f16' : 'f32',
    );
    if (method === 'prefill') {
      const n = d.param(1, Math.max(1, nValid));
      const q = d.f32([Math.max(1, Number.isInteger(n) ? n : 1), nKv * g, headDim]);
      const out = Tensor.zeros('f32', q.shape);
      engine.attentionPrefill(out, q, cache, d.param(0, batch - 1));
      return [out.data];
    }
    const k = d.param(1, capacity + 2);
    const q = d.f32([batch, nKv * g, headDim]);
    const out = Tensor.zeros('f32', q.shape);
    if (method === 'dense') engine.attentionDecode(out, q, cache);
    else if (method === 'oracle') engine.topkDecode(out, q, cache, { k });
    else if (method === 'lminf') engine.lmInfiniteDecode(out, q, cache, { k });
    else if (method === 'sparq') {
      const r = d.param(1, headDim);
      const trace =
        Number.isInteger(r) && r >= 1 && Number.isInteger(k) && k >= 1 && r <= 64 && k <= 64
          ? new SparqTrace(batch, nKv * g, nKv, r, k)
          : undefined;
      engine.sparqDecode(
        out,
        q,
        cache,
        { r, k, l: d.chance(0.3) ? undefined : d.param(0, capacity + 2), reallocate: d.chance(0.5) },
        { trace },
      );
      return trace
        ? [
            out.data,
            Float32Array.from(trace.alpha),
            sortedCounted(trace.i2, trace.i2Count, Number.isInteger(k) ? k : 0),
          ]
        : [out.data];
    } else {
      // H2O: up to three decode steps, a new token appended before each after the first.
      const state = new H2OState(cache);
      const outs: Float32Array[] = [];
      for (let step = d.int(1, 3); step > 0; step--) {
        engine.h2oDecode(out, q, cache, state, { k });
        outs.push(out.data.slice());
        if (step > 1)
          for (let b = 0; b < batch; b++)
            engine.kvAppend(cache, b, d.f32([1, nKv, headDim], true), d.f32([1, nKv, headDim], true));
      }
      return [...outs, Float32Array.from(state.evicted)];
    }
    return [out.data];
  },
} satisfies Record<string, (engine: Engine, d: Draw, preparer: Engine) => (Float32Array | Int32Array)[]>;

const OPS = Object.keys(CASES) as (keyof typeof CASES)[];

/** Each row of i32 indices sorted (order within a selection is free). */
function sortedRows(t: Tensor<'i32'>): Int32Array {
  const [n, k] = t.shape;
  const out = new Int32Array(n * k);
  for (let i = 0; i < n; i++) out.set(t.data.slice(i * k, (i + 1) * k).sort(), i * k);
  return out;
}

/** The first count[bh] of each (k)-row of `i2`, sorted; the rest -1. */
function sortedCounted(i2: Int32Array, count: Int32Array, k: number): Int32Array {
  const out = new Int32Array(i2.length).fill(-1);
  for (let bh = 0; bh < count.length; bh++) out.set(i2.slice(bh * k, bh * k + count[bh]).sort(), bh * k);
  return out;
}

/** Why two outcomes disagree, or null when they agree. */
export function disagreement(a: Outcome, b: Outcome): string | null {
  if (('error' in a && a.error === UNSUPPORTED) || ('error' in b && b.error === UNSUPPORTED)) return null;
  if ('error' in a || 'error' in b) {
    const ea = 'error' in a ? `${a.error}: ${a.message}` : 'a result';
    const eb = 'error' in b ? `${b.error}: ${b.message}` : 'a result';
    return 'error' in a && 'error' in b && a.error === b.error ? null : `${ea} vs ${eb}`;
  }
  if (a.unspecified) return null;
  for (let o = 0; o < a.outputs.length; o++) {
    const x = a.outputs[o];
    const y = b.outputs[o];
    if (x.length !== y.length) return `output ${o}: ${x.length} vs ${y.length} elements`;
    for (let i = 0; i < x.length; i++) {
      const [u, v] = [x[i], y[i]];
      if (Object.is(u, v) || u === v) continue;
      const bothNaN = Number.isNaN(u) && Number.isNaN(v);
      const close =
        Number.isFinite(u) &&
        Number.isFinite(v) &&
        Math.abs(u - v) <= AGREE_FLOOR + AGREE * Math.max(Math.abs(u), Math.abs(v));
      if (!bothNaN && !close) return `output ${o} element ${i}: ${u} vs ${v}`;
    }
  }
  return null;
}

/** A crash: an error that is not one of the project's classes. */
export function isCrash(o: Outcome): boolean {
  return 'error' in o && o.error.startsWith('crash');
}

export interface FuzzReport {
  cases: number;
  /** Cases ending in a project error on the first backend, in a result, or declared unsupported by some backend. */
  errors: number;
  results: number;
  unsupported: number;
  problems: string[];
}

/** Runs `count` cases from `seed` on every engine; problems list crashes and disagreements (at most `maxProblems`). */
export function fuzzOps(engines: readonly Engine[], count: number, seed: number, maxProblems = 20): FuzzReport {
  const report: FuzzReport = { cases: 0, errors: 0, results: 0, unsupported: 0, problems: [] };
  const preparer = engines.find((e) => e.name === 'reference') ?? engines[0];
  for (let i = 0; i < count && report.problems.length < maxProblems; i++) {
    const c = fuzzCase(seed + i, preparer);
    const outcomes = engines.map((e) => c.run(e));
    report.cases++;
    if (outcomes.some((o) => 'error' in o && o.error === UNSUPPORTED)) report.unsupported++;
    else if ('error' in outcomes[0]) report.errors++;
    else report.results++;
    outcomes.forEach((o, j) => {
      if (isCrash(o)) report.problems.push(`${c.label} [${engines[j].name}]: ${(o as { message: string }).message}`);
    });
    for (let j = 1; j < outcomes.length; j++) {
      const why = disagreement(outcomes[0], outcomes[j]);
      if (why) report.problems.push(`${c.label}: ${engines[0].name} vs ${engines[j].name}: ${why}`);
    }
  }
  return report;
}
