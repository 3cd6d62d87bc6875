/**
 * sparqDecode: SparQ Attention (Ribar et al., ICML 2024, Algorithm 1; spec.md §2).
 *
 *   q, out (batch, nHeads, headDim); params r (components), k (positions),
 *   l (local window, default 0), reallocate (default true).
 *
 * Per (sequence, KV head) group of g query heads, over valid positions [nPad, nPast) (S = nPast):
 *   1. i1 = top-r of sum_t |q_t|;  tau_t = sqrt(d * |q_t[i1]|_1 / |q_t|_1);
 *      s_hat_t = softmax(q_t[i1] · K[:, i1]^T / tau_t)          reads nValid * r of K (transposed)
 *   2. k' = min(k, nValid); i2 = top-k' valid positions by (j >= S - l, sum_t s_hat_t[j]);
 *      alpha_t = sum of s_hat_t[i2]
 *   3. y_t = softmax(q_t · K[i2]^T / sqrt(d)) · V[i2]             reads 2 * k' * d of K and V rows
 *      y_t = alpha_t * y_t + (1 - alpha_t) * vMean  (reallocate)   reads and updates vMean: 2d
 * Cost per KV head for g = 1 (spec.md §3): S*r + 2*k'*d + 4*d (2*d without reallocation).
 * With GQA: nValid*r + 2*k'*d + 2*d (vMean, once per KV head) + 2*d per query head.
 * Ties (top-r, top-k) go to the lowest index. A query of all zeros has |q|_1 = 0:
 * we take tau = sqrt(d) (the ratio read as 1, i.e. the dense temperature).
 */
import type { AttentionStats, KVCache, SparqOptions, SparqParams, SparqTrace, Tensor } from '@sparq/core';
import { attendPositions } from './attend.ts';
import { readKeyComponent, validPositions } from './cache-read.ts';
import { forEachDecodeGroup, type HeadGroup } from './group.ts';
import { topIndices } from './select.ts';
import { softmaxRows } from './softmax.ts';

export function sparqDecode(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  params: SparqParams,
  options?: SparqOptions,
): void {
  const stats = options?.stats;
  const trace = options?.trace;
  const l = params.l ?? 0;
  const reallocate = params.reallocate ?? true;
  forEachDecodeGroup(out, q, cache, stats, (group) => {
    const { seq, kvh, g, d, q: qd, qAt } = group;
    const valid = validPositions(cache, seq); // (n) ascending
    const n = valid.length;
    const traceHead = seq * q.shape[1] + kvh * g; // trace index of the group's first query head

    // ---- Step 1: approximate attention scores from the r largest query components ----
    // i1: the r components with the largest |q| summed over the group.
    const absSum = new Float64Array(d); // (d)
    for (let t = 0; t < g; t++) for (let i = 0; i < d; i++) absSum[i] += Math.abs(qd[qAt + t * d + i]);
    const i1 = topIndices(Array.from(absSum.keys()), params.r, absSum); // (r)
    // tau_t: the share of |q_t|_1 the chosen components carry sets the temperature.
    const tau = new Float64Array(g); // (g)
    for (let t = 0; t < g; t++) {
      let part = 0;
      let whole = 0;
      for (let i = 0; i < d; i++) whole += Math.abs(qd[qAt + t * d + i]);
      for (const i of i1) part += Math.abs(qd[qAt + t * d + i]);
      tau[t] = Math.sqrt(d * (whole > 0 ? part / whole : 1));
    }
    // s_hat (g, n): q_t[i1] · K[j, i1] / tau_t, one K column i at a time (contiguous in K transposed).
    const sHat = new Float32Array(g * n);
    const logit = new Float64Array(g * n); // (g, n) partial dot products, f64
    for (const i of i1) {
      // Each column entry is read once and used by all g heads.
      for (let j = 0; j < n; j++) {
        const kji = readKeyComponent(cache, seq, kvh, i, valid[j]);
        for (let t = 0; t < g; t++) logit[t * n + j] += qd[qAt + t * d + i] * kji;
      }
    }
    if (stats) stats.kElements += n * params.r;
    for (let e = 0; e < g * n; e++) sHat[e] = logit[e] / tau[Math.floor(e / n)];
    softmaxRows(sHat, g, n);

    // ---- Step 2: choose the top-k' positions (local window first) ----
    const score = new Float64Array(cache.capacity); // indexed by position: sum_t s_hat_t
    const isLocal = new Uint8Array(cache.capacity); // 1 for the last l positions (j >= S - l)
    for (let j = 0; j < n; j++) {
      for (let t = 0; t < g; t++) score[valid[j]] += sHat[t * n + j];
      isLocal[valid[j]] = valid[j] >= cache.nPast[seq] - l ? 1 : 0;
    }
    const i2 = topIndices(valid, params.k, score, isLocal); // (k') ascending
    // alpha_t: the approximate probability mass the chosen positions cover.
    const alpha = new Float64Array(g); // (g)
    for (let t = 0; t < g; t++) for (const j of i2) alpha[t] += sHat[t * n + (j - valid[0])];

    // ---- Step 3: exact attention over i2, interpolated with the mean value ----
    attendPositions(group, cache, i2, stats);
    if (reallocate) interpolateMean(group, cache, alpha, stats);

    if (trace) record(trace, group, traceHead, i1, i2, alpha, tau);
  });
}

/** y_t <- alpha_t * y_t + (1 - alpha_t) * vMean: the mass SparQ skipped goes to the average value. */
function interpolateMean(group: HeadGroup, cache: KVCache, alpha: Float64Array, stats?: AttentionStats): void {
  const { g, d, out, outAt } = group;
  const vMean = new Float32Array(d); // (d) from the running sum: no pass over V
  cache.vMean(group.seq, group.kvh, vMean);
  // Read the mean and (in the paper's cost model) update it with the new token: 2d per KV head.
  if (stats) stats.auxElements += 2 * d;
  for (let t = 0; t < g; t++) {
    for (let i = 0; i < d; i++) out[outAt + t * d + i] = alpha[t] * out[outAt + t * d + i] + (1 - alpha[t]) * vMean[i];
  }
}

/** Copies one group's choices into the trace (layouts in SparqTrace's doc). */
function record(
  trace: SparqTrace,
  group: HeadGroup,
  traceHead: number,
  i1: Int32Array,
  i2: Int32Array,
  alpha: Float64Array,
  tau: Float64Array,
): void {
  const bh = group.seq * trace.nKvHeads + group.kvh;
  trace.i1.set(i1, bh * trace.r);
  trace.i2.fill(0, bh * trace.k, (bh + 1) * trace.k);
  trace.i2.set(i2, bh * trace.k);
  trace.i2Count[bh] = i2.length;
  for (let t = 0; t < group.g; t++) {
    trace.alpha[traceHead + t] = alpha[t];
    trace.tau[traceHead + t] = tau[t];
  }
}
