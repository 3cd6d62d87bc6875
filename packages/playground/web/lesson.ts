/**
 * One step replayed for teaching: the query a run recorded at `position` in
 * `layer`, against the cache as it was then (its first position+1 rows), run
 * through the reference backend's own ops (dense, SparQ with its trace, the
 * oracle, H2O, LM-Infinite), each counting what it reads. What the ops do not
 * return (the scores over all positions) is computed here from the same K,
 * for the charts; the positions SparQ chose come from its trace. The oracle
 * does not report its positions either: they are dense's top-k of the scores
 * computed here (f64; the op's f32 sums could order a near-tie differently).
 */
import { AttentionStats, H2OState, KVCache, SparqTrace, Tensor, f16ToF32, type AttentionMethod, type Engine } from '@sparq/core';
import { attentionCost, type AttentionConfig } from '@sparq/llm/browser';
import { lmInfinitePositions } from '@sparq/reference';
import type { QueryRecord } from './probe.ts';
import type { Lesson, MethodReads } from './protocol.ts';

/**
 * The cache as it stood when the query at `position` was attended: the same K
 * and V, nPast = position + 1, and V's running sum recomputed over those rows
 * (only SparQ's reallocation reads it: `withMean` false leaves it zero). An integer K
 * transposed keeps its codes and block scales as they stand now: a 64-position block's scale
 * may count positions written after `position`, so step 1's estimate can differ slightly from
 * the one made at the time.
 */
function cacheAt(cache: KVCache, position: number, withMean = true): KVCache {
  const { nKvHeads, headDim: d, capacity } = cache;
  const v = cache.v; // (1, nKvHeads, capacity, d), f32 values or f16 bits
  // The value a V element holds, as the cache's own running sum added it.
  const value = cache.dtype === 'f16' ? (at: number) => f16ToF32(v[at]) : (at: number) => v[at];
  const vSum = new Float64Array(nKvHeads * d); // (nKvHeads, d)
  for (let h = 0; h < nKvHeads && withMean; h++) {
    for (let j = 0; j <= position; j++) for (let i = 0; i < d; i++) vSum[h * d + i] += value((h * capacity + j) * d + i);
  }
  return new KVCache(cache.options, { k: cache.k, kT: cache.kT, kTScale: cache.kTScale, v: cache.v, vSum, nPast: Int32Array.of(position + 1), nPad: Int32Array.of(0) });
}

/** softmax of `x` in place (max subtracted first so exp cannot overflow). */
function softmax(x: Float64Array): Float64Array {
  let max = -Infinity;
  for (const v of x) max = Math.max(max, v);
  let sum = 0;
  for (let j = 0; j < x.length; j++) sum += x[j] = Math.exp(x[j] - max);
  for (let j = 0; j < x.length; j++) x[j] /= sum;
  return x;
}

/** Positions 0..S-1 ordered by `score` descending (ties: lower position first), the first k of them ascending. */
function topPositions(score: ArrayLike<number>, k: number): number[] {
  const order = Array.from({ length: score.length }, (_, j) => j).sort((a, b) => score[b] - score[a] || a - b);
  return order.slice(0, Math.min(k, score.length)).sort((a, b) => a - b);
}

/** ||a - b|| / ||b|| over the group's rows of two (nHeads, d) outputs. */
function relativeError(a: Float32Array, b: Float32Array, from: number, to: number): number {
  let diff = 0;
  let norm = 0;
  for (let i = from; i < to; i++) {
    diff += (a[i] - b[i]) ** 2;
    norm += b[i] ** 2;
  }
  return Math.sqrt(diff / (norm || 1));
}

export interface LessonInput {
  engine: Engine;
  caches: readonly KVCache[];
  records: readonly Map<number, QueryRecord>[];
  attention: AttentionConfig;
  nHeads: number;
  position: number;
  layer: number;
  head: number;
}

export function lesson(input: LessonInput): Lesson {
  const { engine, caches, records, attention, nHeads, position, layer, head } = input;
  const record = records[layer]?.get(position);
  if (!record) throw new Error(`playground: no query recorded at position ${position} of layer ${layer}`);
  const full = caches[layer];
  const { nKvHeads, headDim: d } = full;
  if (!Number.isInteger(head) || head < 0 || head >= nKvHeads) throw new Error(`playground: KV head ${head}, expected 0..${nKvHeads - 1}`);
  const g = nHeads / nKvHeads;
  const S = position + 1;
  const cache = cacheAt(full, position);
  const q = Tensor.wrap('f32', record.q, [1, nHeads, d]);
  const { r, k, l } = attention;
  const at = head * g * d; // the group's first element in q and in an output (nHeads, d)

  // Every method on this step, each counting its reads (all KV heads of the layer).
  const run = (method: AttentionMethod, call: (out: Tensor<'f32'>, stats: AttentionStats) => void) => {
    const out = Tensor.zeros('f32', [1, nHeads, d]);
    const stats = new AttentionStats();
    call(out, stats);
    return { out: out.data, stats, method };
  };
  const trace = new SparqTrace(1, nHeads, nKvHeads, r, k);
  const dense = run('dense', (out, stats) => engine.attentionDecode(out, q, cache, { stats }));
  const sparq = run('sparq', (out, stats) => engine.sparqDecode(out, q, cache, { r, k, l, reallocate: true }, { stats, trace }));
  const plain = run('sparq', (out) => engine.sparqDecode(out, q, cache, { r, k, l, reallocate: false }));
  const oracle = run('oracle', (out, stats) => engine.topkDecode(out, q, cache, { k }, { stats }));
  const lminf = run('lminf', (out, stats) => engine.lmInfiniteDecode(out, q, cache, { k }, { stats }));
  const h2o = replayH2O(input, k);

  // Step 1 as SparQ saw it: components by sum over the group of |q_i|.
  const rows = Array.from({ length: g }, (_, t) => Array.from(record.q.subarray(at + t * d, at + (t + 1) * d)));
  const absQ = Array.from({ length: d }, (_, i) => rows.reduce((sum, row) => sum + Math.abs(row[i]), 0));
  const i1 = Array.from(trace.i1.subarray(head * r, (head + 1) * r)).sort((a, b) => a - b);
  const tau = Array.from(trace.tau.subarray(head * g, (head + 1) * g));

  // Scores over positions 0..S-1 per head: ŝ from the r components at temperature tau, s exact.
  const K = full.k as Float32Array; // (1, nKvHeads, capacity, d)
  const key = (j: number, i: number) => K[(head * full.capacity + j) * d + i];
  const sHat = new Float64Array(S);
  const s = new Float64Array(S);
  const sPerHead: Float64Array[] = [];
  for (let t = 0; t < g; t++) {
    const approx = new Float64Array(S);
    const exact = new Float64Array(S);
    for (let j = 0; j < S; j++) {
      for (const i of i1) approx[j] += rows[t][i] * key(j, i);
      for (let i = 0; i < d; i++) exact[j] += rows[t][i] * key(j, i);
      approx[j] /= tau[t];
      exact[j] /= Math.sqrt(d);
    }
    softmax(approx);
    softmax(exact);
    sPerHead.push(exact);
    for (let j = 0; j < S; j++) {
      sHat[j] += approx[j] / g;
      s[j] += exact[j] / g;
    }
  }
  const chosen = Array.from(trace.i2.subarray(head * k, head * k + trace.i2Count[head]));
  const alpha = Array.from(trace.alpha.subarray(head * g, (head + 1) * g));
  const mass = sPerHead.map((p) => chosen.reduce((sum, j) => sum + p[j], 0));
  const denseTop = topPositions(s, k);

  const valid = Int32Array.from({ length: S }, (_, j) => j);
  const reads: MethodReads[] = [dense, sparq, oracle, h2o, lminf].map(({ method, stats }) => ({
    method,
    formula: nKvHeads * attentionCost({ ...attention, method, reallocate: true }, S, d),
    counted: stats.total,
  }));
  return {
    position, layer, head, g, d, S, r, k, l,
    q: rows, absQ, i1, tau,
    sHat: Array.from(sHat), s: Array.from(s),
    sparq: chosen, localFrom: Math.max(0, S - l), denseTop,
    alpha, mass,
    errReallocate: relativeError(sparq.out, dense.out, at, at + g * d),
    errPlain: relativeError(plain.out, dense.out, at, at + g * d),
    kept: { h2o: h2o.kept, lminf: Array.from(lmInfinitePositions(valid, k)), oracle: denseTop },
    reads,
  };
}

/**
 * H2O at `position`: its choice depends on every decode step before, so it is
 * replayed from the first decode step of the run with the recorded queries
 * (eviction starts at generation; before it, H2O attends every position).
 * Returns the positions the KV head attends at `position`, and that step's reads.
 */
function replayH2O(input: LessonInput, k: number): { kept: number[]; stats: AttentionStats; method: AttentionMethod; out: Float32Array } {
  const { engine, caches, records, nHeads, position, layer, head } = input;
  const full = caches[layer];
  const state = new H2OState(full);
  const d = full.headDim;
  const out = Tensor.zeros('f32', [1, nHeads, d]);
  const steps = [...records[layer].entries()].filter(([p, rec]) => rec.decode && p <= position).map(([p]) => p).sort((a, b) => a - b);
  if (steps.at(-1) !== position) steps.push(position); // a prefill position: H2O has evicted nothing yet
  let kept: number[] = [];
  let stats = new AttentionStats();
  for (const p of steps) {
    const base = head * full.capacity;
    if (p === position) kept = Array.from({ length: p + 1 }, (_, j) => j).filter((j) => state.evicted[base + j] === 0);
    stats = new AttentionStats();
    engine.h2oDecode(out, Tensor.wrap('f32', records[layer].get(p)!.q, [1, nHeads, d]), cacheAt(full, p, false), state, { k }, { stats });
  }
  return { kept, stats, method: 'h2o', out: out.data };
}
