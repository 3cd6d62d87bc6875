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
import { AttentionStats, H2OState, KVCache, SparqTrace, Tensor, type AttentionMethod, type Engine } from '@sparq/core';
import { attentionCost, type AttentionConfig } from '@sparq/llm/browser';
import { lmInfinitePositions, readKeyComponent, readRow } from '@sparq/reference';
import type { QueryRecord } from './probe.ts';
import type { Lesson, MethodReads } from './protocol.ts';

/**
 * Re-appends positions [from, to] of `full` (every KV head of sequence 0) to `cache`, which holds
 * positions [0, from): the rows as stored, decoded as attention reads them. Re-encoding a decoded
 * row gives back its bytes (widening f16 is exact; a ggml block requantizes to itself), and an
 * append derives K transposed's block scales again from the stored rows, so after it `cache` is
 * `full` as it stood when position `to` was attended: the same rows, K transposed with the block
 * scales of that moment (not of the end of the run), and V's running sum over those rows.
 */
function appendRows(engine: Engine, cache: KVCache, full: KVCache, from: number, to: number): void {
  const { nKvHeads, headDim: d } = full;
  const n = to - from + 1;
  const k = Tensor.zeros('f32', [n, nKvHeads, d]);
  const v = Tensor.zeros('f32', [n, nKvHeads, d]);
  const row = new Float32Array(d);
  for (let j = 0; j < n; j++) {
    for (let h = 0; h < nKvHeads; h++) {
      readRow(row, full, 'k', full.kRowOffset(0, h, from + j));
      k.data.set(row, (j * nKvHeads + h) * d);
      readRow(row, full, 'v', full.vRowOffset(0, h, from + j));
      v.data.set(row, (j * nKvHeads + h) * d);
    }
  }
  engine.kvAppend(cache, 0, k, v);
}

/** A new cache of `full`'s options holding its positions [0, position]. */
function cacheAt(engine: Engine, full: KVCache, position: number): KVCache {
  const cache = new KVCache(full.options);
  appendRows(engine, cache, full, 0, position);
  return cache;
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
  if (!records[layer]) throw new Error(`playground: layer ${layer}, expected 0..${records.length - 1}`);
  const query = queryAt(records[layer], position, layer);
  const full = caches[layer];
  const { nKvHeads, headDim: d } = full;
  if (!Number.isInteger(head) || head < 0 || head >= nKvHeads)
    throw new Error(`playground: KV head ${head}, expected 0..${nKvHeads - 1}`);
  const g = nHeads / nKvHeads;
  const S = position + 1;
  const cache = cacheAt(engine, full, position);
  const q = Tensor.wrap('f32', query, [1, nHeads, d]);
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
  const sparq = run('sparq', (out, stats) =>
    engine.sparqDecode(out, q, cache, { r, k, l, reallocate: true }, { stats, trace }),
  );
  const plain = run('sparq', (out) => engine.sparqDecode(out, q, cache, { r, k, l, reallocate: false }));
  const oracle = run('oracle', (out, stats) => engine.topkDecode(out, q, cache, { k }, { stats }));
  const lminf = run('lminf', (out, stats) => engine.lmInfiniteDecode(out, q, cache, { k }, { stats }));
  const h2o = replayH2O(input, k);

  // Step 1 as SparQ saw it: components by sum over the group of |q_i|.
  const rows = Array.from({ length: g }, (_, t) => Array.from(query.subarray(at + t * d, at + (t + 1) * d)));
  const absQ = Array.from({ length: d }, (_, i) => rows.reduce((sum, row) => sum + Math.abs(row[i]), 0));
  const i1 = Array.from(trace.i1.subarray(head * r, (head + 1) * r)).sort((a, b) => a - b);
  const tau = Array.from(trace.tau.subarray(head * g, (head + 1) * g));

  // Scores over positions 0..S-1 per head: ŝ from the r components of K as step 1 read them (K
  // transposed, which may be coarser than the rows) at temperature tau; s exact, from the K rows.
  const keys = new Float32Array(S * d); // (S, d) this KV head's key rows, decoded
  for (let j = 0; j < S; j++) readRow(keys.subarray(j * d, (j + 1) * d), cache, 'k', cache.kRowOffset(0, head, j));
  const sHat = new Float64Array(S);
  const s = new Float64Array(S);
  const sPerHead: Float64Array[] = [];
  for (let t = 0; t < g; t++) {
    const approx = new Float64Array(S);
    const exact = new Float64Array(S);
    for (let j = 0; j < S; j++) {
      for (const i of i1) approx[j] += rows[t][i] * readKeyComponent(cache, 0, head, i, j);
      for (let i = 0; i < d; i++) exact[j] += rows[t][i] * keys[j * d + i];
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
    position,
    layer,
    head,
    g,
    d,
    S,
    r,
    k,
    l,
    q: rows,
    absQ,
    i1,
    tau,
    sHat: Array.from(sHat),
    s: Array.from(s),
    sparq: chosen,
    localFrom: Math.max(0, S - l),
    denseTop,
    alpha,
    mass,
    errReallocate: relativeError(sparq.out, dense.out, at, at + g * d),
    errPlain: relativeError(plain.out, dense.out, at, at + g * d),
    kept: { h2o: h2o.kept, lminf: Array.from(lmInfinitePositions(valid, k)), oracle: denseTop },
    reads,
  };
}

/**
 * H2O at `position`, as its authors run it: the prompt's dense attention weights seed the
 * accumulated scores (h2oSeed), then every decode step evicts. Its choice depends on every step
 * before, so the run is replayed from the prompt with the recorded queries, appending each
 * position's K and V before that step's attention as the run did. At a prompt position p the
 * replay treats positions [0, p) as the prompt and p as the first decode step.
 * Returns the positions the KV head attends at `position`, that step's reads and output, and
 * H2O's state after it.
 */
export function replayH2O(
  input: LessonInput,
  k: number,
): { kept: number[]; stats: AttentionStats; method: AttentionMethod; out: Float32Array; state: H2OState } {
  const { engine, caches, records, nHeads, position, layer, head } = input;
  const full = caches[layer];
  const d = full.headDim;
  const recorded = records[layer];
  const firstDecode = Math.min(position, ...[...recorded.entries()].filter(([, rec]) => rec.decode).map(([p]) => p));
  const cache = new KVCache(full.options);
  const state = new H2OState(cache);
  if (firstDecode > 0) {
    // The prompt [0, firstDecode): its rows and its queries, one causal seed as the run's prefill.
    appendRows(engine, cache, full, 0, firstDecode - 1);
    const q = Tensor.zeros('f32', [firstDecode, nHeads, d]);
    for (let p = 0; p < firstDecode; p++) q.data.set(queryAt(recorded, p, layer), p * nHeads * d);
    engine.h2oSeed(state, q, cache, 0);
  }
  const out = Tensor.zeros('f32', [1, nHeads, d]);
  let stats = new AttentionStats();
  for (let p = firstDecode; p <= position; p++) {
    appendRows(engine, cache, full, p, p);
    stats = new AttentionStats();
    engine.h2oDecode(
      out,
      Tensor.wrap('f32', queryAt(recorded, p, layer), [1, nHeads, d]),
      cache,
      state,
      { k },
      { stats },
    );
  }
  // A step evicts before it attends, so what the last step attended is what survived it.
  const base = head * cache.capacity;
  const kept = Array.from({ length: position + 1 }, (_, j) => j).filter((j) => state.evicted[base + j] === 0);
  return { kept, stats, method: 'h2o', out: out.data, state };
}

/** The query recorded at `position` of `layer`. */
function queryAt(recorded: ReadonlyMap<number, QueryRecord>, position: number, layer: number): Float32Array {
  const record = recorded.get(position);
  // A session records every prompt row's query in the last layer only with forward.prefillAllRows.
  if (!record) throw new Error(`playground: no query recorded at position ${position} of layer ${layer}`);
  return record.q;
}
