/**
 * Attention statistics on real decode steps (issue 14; the SparQ paper's
 * sections 3 and 5): a dense teacher-forced run over the text windows, and at
 * every decode step of every layer, on the very q and KV cache the model
 * produced, each method is run beside dense and compared with it:
 *   topkAgreement  |dense's top-k' positions of the head  ∩  positions the method attends| / k',
 *                  k' = min(k, S), per query head (the paper's top-k agreement)
 *   mass           the true softmax mass (dense probabilities) of the attended positions
 *   alpha          SparQ's coverage estimate of that mass (spec.md §2 step 5), beside it
 *   outputError    ||y_method - y_dense|| / ||y_dense|| per query head
 * plus each query head's kurtosis over its d components (m4 / m2^2, 3 for a
 * Gaussian; the paper's heavy-tailed queries) and a sweep of SparQ's top-k
 * agreement over r and k with no local window (the selection alone).
 *
 * How: a ProbeEngine (the session's engine, with attentionDecode observed)
 * sees each dense decode call. The methods run on a mirror cache per layer in
 * SparQ's layout (K twice), holding the same rows, so the session itself is
 * never touched; H2O keeps its own state per layer on that mirror, seeded by the
 * prefill's weights and evicting as it would along this (dense) trajectory.
 */
import { Engine, H2OState, KVCache, SparqTrace, Tensor, f16ToF32, isBlockKV, type AttentionOptions } from '@sparq/core';
import { defaultAttention, type AttentionConfig } from '../attention-method.ts';
import type { PerplexityProtocol, OnWindow } from './perplexity.ts';
import { windowsOf } from './perplexity.ts';
import { evalSession, type EvalModel } from './run-model.ts';

/** LM-Infinite's attention sinks (spec.md §3): the first positions. */
export const LM_INFINITE_SINKS = 16;

export interface LabelledConfig {
  label: string;
  config: AttentionConfig;
}

export interface MethodAttentionStats extends LabelledConfig {
  topkAgreement: number;
  mass: number;
  /** SparQ only: mean alpha, and mean |alpha - mass|. */
  alpha: number | null;
  alphaError: number | null;
  outputError: number;
  /** (query head, layer, step) samples averaged. */
  samples: number;
}

export interface AttentionStatsResult {
  /** Decode steps observed (each over every layer). */
  steps: number;
  methods: MethodAttentionStats[];
  /** SparQ's top-k agreement with l = 0, per (r, k). */
  sweep: { r: number; k: number; topkAgreement: number }[];
  /** Mean query kurtosis per (layer, head). */
  kurtosis: number[][];
}

export interface StatsSweep {
  r: readonly number[];
  k: readonly number[];
}

/** An engine whose dense decode calls are reported to `observe` after they run. */
class ProbeEngine extends Engine {
  observe: (out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache) => void = () => {};
  observePrefill: (q: Tensor<'f32'>, cache: KVCache) => void = () => {};

  override attentionPrefill(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    seq: number,
    options?: AttentionOptions,
  ): void {
    super.attentionPrefill(out, q, cache, seq, options);
    this.observePrefill(q, cache);
  }

  override attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void {
    super.attentionDecode(out, q, cache, options);
    this.observe(out, q, cache);
  }

  /** Dense decode attention without the observer (for the comparisons it makes). */
  denseDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache): void {
    super.attentionDecode(out, q, cache);
  }
}

/** Running sums of one method's statistics. */
class Sums {
  agreement = 0;
  mass = 0;
  alpha = 0;
  alphaError = 0;
  outputError = 0;
  n = 0;
}

/** Statistics of `configs` (and the r/k sweep) over the decode steps of the protocol's windows. */
export function attentionStatistics(
  m: EvalModel,
  tokens: readonly number[],
  p: PerplexityProtocol,
  configs: readonly LabelledConfig[],
  sweep: StatsSweep,
  onWindow?: OnWindow,
): AttentionStatsResult {
  const c = m.model.config;
  const { nLayers, nHeads, nKvHeads, headDim: d } = c;
  const g = nHeads / nKvHeads;
  const probe = new ProbeEngine(m.engine.backend);
  const session = evalSession(m, defaultAttention('dense', d, p.window), p.window, probe);
  const mirrors = session.caches.map(
    () =>
      new KVCache({
        nKvHeads,
        headDim: d,
        capacity: p.window,
        dtype: m.kvDType,
        kTDType: m.kTDType,
        layout: 'k-twice',
      }),
  );
  const h2o = configs.map((x) => (x.config.method === 'h2o' ? mirrors.map((mirror) => new H2OState(mirror)) : null));
  const sums = configs.map(() => new Sums());
  const sweepCells = sweep.r.flatMap((r) => sweep.k.map((k) => ({ r, k, sum: 0, n: 0 })));
  const kurtSum = Array.from({ length: nLayers }, () => new Float64Array(nHeads));
  let observations = 0;

  const scratch = Tensor.zeros('f32', [1, nHeads, d]);
  const probs = new Float64Array(nHeads * p.window); // (H, S) dense probabilities
  const rank = new Int32Array(nHeads * p.window); // (H, S) rank of each position in its head's order
  const order = new Int32Array(p.window);

  // H2O's scores start from the prefill's weights (h2oSeed), as in a session created for H2O.
  probe.observePrefill = (q, cache) => {
    const layer = session.caches.indexOf(cache);
    syncMirror(probe, cache, mirrors[layer], () => h2o.forEach((states) => states?.[layer].reset(0)));
    for (const states of h2o) if (states) probe.h2oSeed(states[layer], q, mirrors[layer], 0);
  };
  probe.observe = (out, q, cache) => {
    const layer = session.caches.indexOf(cache);
    const mirror = mirrors[layer];
    syncMirror(probe, cache, mirror, () => h2o.forEach((states) => states?.[layer].reset(0)));
    const S = cache.nValid(0);
    const keys = Array.from({ length: nKvHeads }, (_, kvh) => readRows(probe, cache, 'k', kvh, 0, S)); // (nKv) each (S, d)
    const qd = q.data.subarray(q.offset, q.offset + nHeads * d); // (H, d)
    const yd = out.data.subarray(out.offset, out.offset + nHeads * d); // (H, d)
    // Dense probabilities and each head's ranking of positions (ties: lowest index first).
    for (let h = 0; h < nHeads; h++) {
      const kvh = Math.floor(h / g);
      const row = probs.subarray(h * p.window, h * p.window + S);
      let max = -Infinity;
      for (let j = 0; j < S; j++) {
        let dot = 0;
        for (let i = 0; i < d; i++) dot += qd[h * d + i] * keys[kvh][j * d + i];
        row[j] = dot / Math.sqrt(d);
        max = Math.max(max, row[j]);
      }
      let sum = 0;
      for (let j = 0; j < S; j++) sum += row[j] = Math.exp(row[j] - max);
      for (let j = 0; j < S; j++) row[j] /= sum;
      for (let j = 0; j < S; j++) order[j] = j;
      order.subarray(0, S).sort((a, b) => row[b] - row[a] || a - b);
      for (let j = 0; j < S; j++) rank[h * p.window + order[j]] = j;
      kurtSum[layer][h] += kurtosis(qd, h * d, d);
    }
    // The share of head h's dense top-k' among `positions`, and their dense mass.
    const agreementOf = (h: number, positions: ArrayLike<number>, kPrime: number) => {
      let hits = 0;
      let mass = 0;
      for (let s = 0; s < positions.length; s++) {
        const j = positions[s];
        if (rank[h * p.window + j] < kPrime) hits++;
        mass += probs[h * p.window + j];
      }
      return { agreement: hits / kPrime, mass };
    };
    configs.forEach(({ config: a }, ci) => {
      const kPrime = Math.min(a.k, S);
      const positions: Int32Array[] = [];
      let trace: SparqTrace | null = null;
      switch (a.method) {
        case 'dense':
          for (let kvh = 0; kvh < nKvHeads; kvh++) positions.push(range(0, S));
          probe.denseDecode(scratch, q, mirror);
          break;
        case 'sparq':
          trace = new SparqTrace(1, nHeads, nKvHeads, a.r, a.k);
          probe.sparqDecode(scratch, q, mirror, { r: a.r, k: a.k, l: a.l, reallocate: a.reallocate }, { trace });
          for (let kvh = 0; kvh < nKvHeads; kvh++)
            positions.push(trace.i2.slice(kvh * a.k, kvh * a.k + trace.i2Count[kvh]));
          break;
        case 'oracle':
          // By definition the top-k' positions of the group's summed exact probabilities.
          for (let kvh = 0; kvh < nKvHeads; kvh++) positions.push(groupTop(probs, p.window, kvh * g, g, S, kPrime));
          probe.topkDecode(scratch, q, mirror, { k: a.k });
          break;
        case 'h2o': {
          // What this step attends: the valid positions not evicted before it.
          const state = h2o[ci]![layer];
          for (let kvh = 0; kvh < nKvHeads; kvh++)
            positions.push(range(0, S).filter((j) => state.evicted[kvh * state.capacity + j] === 0));
          probe.h2oDecode(scratch, q, mirror, state, { k: a.k });
          break;
        }
        case 'lminf': {
          const sinks = Math.min(LM_INFINITE_SINKS, kPrime - 1);
          const kept =
            kPrime >= S ? range(0, S) : Int32Array.from([...range(0, sinks), ...range(S - (kPrime - sinks), S)]);
          for (let kvh = 0; kvh < nKvHeads; kvh++) positions.push(kept);
          probe.lmInfiniteDecode(scratch, q, mirror, { k: a.k });
          break;
        }
      }
      const sum = sums[ci];
      for (let h = 0; h < nHeads; h++) {
        const { agreement, mass } = agreementOf(h, positions[Math.floor(h / g)], kPrime);
        sum.agreement += agreement;
        sum.mass += mass;
        if (trace) {
          sum.alpha += trace.alpha[h];
          sum.alphaError += Math.abs(trace.alpha[h] - mass);
        }
        sum.outputError += relativeError(scratch.data, yd, h * d, d);
        sum.n++;
      }
    });
    for (const cell of sweepCells) {
      const kPrime = Math.min(cell.k, S);
      const trace = new SparqTrace(1, nHeads, nKvHeads, cell.r, cell.k);
      probe.sparqDecode(scratch, q, mirror, { r: cell.r, k: cell.k, l: 0 }, { trace });
      for (let h = 0; h < nHeads; h++) {
        const kvh = Math.floor(h / g);
        cell.sum += agreementOf(
          h,
          trace.i2.subarray(kvh * cell.k, kvh * cell.k + trace.i2Count[kvh]),
          kPrime,
        ).agreement;
        cell.n++;
      }
    }
    if (layer === 0) observations++;
  };

  const windows = windowsOf(tokens.length, p);
  windows.forEach(({ start, n }, w) => {
    session.reset();
    if (n > p.warmup) {
      session.prefill(tokens.slice(start, start + p.warmup), { allRows: true }); // every row's query reaches observePrefill
      for (let pos = p.warmup; pos < n; pos++) session.decode(tokens[start + pos]);
    }
    onWindow?.(w + 1, windows.length);
  });

  const mean = (x: number, n: number) => (n > 0 ? x / n : Number.NaN);
  return {
    steps: observations,
    methods: configs.map((x, i) => {
      const s = sums[i];
      const sparq = x.config.method === 'sparq';
      return {
        ...x,
        topkAgreement: mean(s.agreement, s.n),
        mass: mean(s.mass, s.n),
        alpha: sparq ? mean(s.alpha, s.n) : null,
        alphaError: sparq ? mean(s.alphaError, s.n) : null,
        outputError: mean(s.outputError, s.n),
        samples: s.n,
      };
    }),
    sweep: sweepCells.map(({ r, k, sum, n }) => ({ r, k, topkAgreement: mean(sum, n) })),
    kurtosis: kurtSum.map((row) => Array.from(row, (v) => mean(v, observations))),
  };
}

/**
 * Appends to `mirror` the rows of `cache` it lacks (after emptying it, and calling `onReset`, when
 * `cache` started over). The rows go through f32 as attention reads them and are stored again in
 * the mirror's type: the same values and bytes when the types match. Widening f16 is exact; a
 * q8_0 / q4_0 block decoded and quantized again gives its own bytes back, because its largest
 * value decodes to exactly qmax * d (127 d, or -8 d for q4_0), so the scale comes out d again
 * and every value c * d divides back to its code c.
 */
export function syncMirror(engine: Engine, cache: KVCache, mirror: KVCache, onReset: () => void): void {
  const { nKvHeads, headDim: d } = cache;
  if (mirror.nPast[0] > cache.nPast[0]) {
    mirror.reset(0);
    onReset();
  }
  const from = mirror.nPast[0];
  const n = cache.nPast[0] - from;
  if (n === 0) return;
  const k = Tensor.zeros('f32', [n, nKvHeads, d]);
  const v = Tensor.zeros('f32', [n, nKvHeads, d]);
  for (let h = 0; h < nKvHeads; h++) {
    const kRows = readRows(engine, cache, 'k', h, from, n);
    const vRows = readRows(engine, cache, 'v', h, from, n);
    for (let t = 0; t < n; t++) {
      k.data.set(kRows.subarray(t * d, (t + 1) * d), (t * nKvHeads + h) * d);
      v.data.set(vRows.subarray(t * d, (t + 1) * d), (t * nKvHeads + h) * d);
    }
  }
  engine.kvAppend(mirror, 0, k, v);
}

/**
 * Rows [from, from + n) of KV head h of the cache's k or v (`side`, sequence 0) as f32, as
 * attention reads them: (n, headDim). A head's rows are contiguous, so block rows are decoded by
 * one call of the engine's dequantize.
 */
function readRows(engine: Engine, cache: KVCache, side: 'k' | 'v', h: number, from: number, n: number): Float32Array {
  const d = cache.headDim;
  const out = new Float32Array(n * d);
  const store = cache[side];
  const dtype = side === 'k' ? cache.kDType : cache.vDType;
  const at = side === 'k' ? cache.kRowOffset(0, h, from) : cache.vRowOffset(0, h, from);
  const stride = side === 'k' ? cache.kRowStride : cache.vRowStride;
  if (isBlockKV(dtype))
    engine.dequantize(
      Tensor.wrap('f32', out, [n * d]),
      Tensor.wrap(dtype, (store as Uint8Array).subarray(at, at + n * stride), [n * d]),
    );
  else for (let e = 0; e < n * d; e++) out[e] = dtype === 'f16' ? f16ToF32(store[at + e]) : store[at + e];
  return out;
}

/** [from, to) as an Int32Array. */
function range(from: number, to: number): Int32Array {
  return Int32Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);
}

/** The top `count` of S positions by the summed probabilities of heads [first, first + g) (ties: lowest index). */
function groupTop(probs: Float64Array, stride: number, first: number, g: number, S: number, count: number): Int32Array {
  const score = new Float64Array(S);
  for (let t = 0; t < g; t++) for (let j = 0; j < S; j++) score[j] += probs[(first + t) * stride + j];
  return range(0, S)
    .sort((a, b) => score[b] - score[a] || a - b)
    .subarray(0, count);
}

/** Kurtosis m4 / m2^2 of x[at .. at + n) (3 for Gaussian data; NaN for constant data). */
export function kurtosis(x: Float32Array, at: number, n: number): number {
  let mu = 0;
  for (let i = 0; i < n; i++) mu += x[at + i];
  mu /= n;
  let m2 = 0;
  let m4 = 0;
  for (let i = 0; i < n; i++) {
    const e = (x[at + i] - mu) ** 2;
    m2 += e;
    m4 += e * e;
  }
  m2 /= n;
  m4 /= n;
  return m4 / (m2 * m2);
}

/** ||a - b|| / ||b|| over [at, at + n). */
function relativeError(a: Float32Array, b: Float32Array, at: number, n: number): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (a[at + i] - b[at + i]) ** 2;
    den += b[at + i] ** 2;
  }
  return Math.sqrt(num / den);
}
