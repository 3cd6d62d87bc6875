/**
 * The scale searches of ggml's K-quant reference quantizers (`make_qx_quants`, `make_q3_quants`,
 * `make_qkx2_quants` in ggml-quants.c), as facts re-derived, not transcribed. Each quantizes a
 * sub-block of n values to integer codes L with one scale (and, for the "x = d * q - m" formats,
 * one minimum), choosing them to minimise a weighted squared or absolute error rather than simply
 * from max |x|: that is where K-quants get their accuracy.
 *
 * Bit-exactness: llama.cpp's quantizers live in libggml-base, built without FMA contraction, so
 * every C float operation rounds once to f32; we wrap every operation in Math.fround in C's
 * evaluation order (left to right: `w * x * l` is (w * x) * l), and round with ggml's nearestInt.
 * Change one rounding and a code can flip, and the file no longer matches llama-quantize's.
 */
import { nearestInt } from './round.ts';

const f32 = Math.fround;

/** ggml's GROUP_MAX_EPS: a sub-block whose max |x| is below this counts as all zero. */
export const GROUP_MAX_EPS = f32(1e-15);

/** max(lo, min(hi, v)): ggml's MAX(lo, MIN(hi, v)). */
function clampInt(v: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, v));
}

/** The signed value of largest magnitude in x[at .. at+n) (the first on a tie) and that magnitude. */
export function signedMax(x: Float32Array, at: number, n: number): { max: number; amax: number } {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[at + i]);
    if (ax > amax) {
      amax = ax;
      max = x[at + i];
    }
  }
  return { max, amax };
}

/**
 * Symmetric codes l in [-nmax, nmax - 1] with x ~ scale * l, weighted by w = x^2 (ggml's
 * `make_qx_quants` with rmse_type 1, the one Q6_K uses). Writes L[lAt + i] = l + nmax and returns
 * the scale. Start: the largest |x| maps to -nmax exactly (scale = max / -nmax, the signed range's
 * extra negative level, as in Q4_0). Then 18 more trial scales -(nmax + 0.1 k) / max, k = -9..9
 * except 0; for each trial's codes the best scale in closed form is sum w x l / sum w l^2, and its
 * weighted error is sum w x^2 - (sum w x l)^2 / sum w l^2: the trial with the largest
 * (sum w x l)^2 / sum w l^2 wins. An all-zero sub-block gets scale 0 and codes 0 (not nmax:
 * ggml's, and harmless, since they decode through scale 0).
 */
export function makeQxQuants(
  n: number,
  nmax: number,
  x: Float32Array,
  xAt: number,
  L: Uint8Array,
  lAt: number,
): number {
  const { max, amax } = signedMax(x, xAt, n);
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, lAt, lAt + n);
    return 0;
  }
  /** Codes for inverse scale `iscale` (written to L when `store`) and their sums sum w x l, sum w l^2. */
  const trial = (iscale: number, store: boolean): { sumlx: number; suml2: number } => {
    let sumlx = 0;
    let suml2 = 0;
    for (let i = 0; i < n; i++) {
      const v = x[xAt + i];
      const l = clampInt(nearestInt(f32(iscale * v)), -nmax, nmax - 1);
      if (store) L[lAt + i] = l + nmax;
      const w = f32(v * v);
      sumlx = f32(sumlx + f32(f32(w * v) * l));
      suml2 = f32(suml2 + f32(f32(w * l) * l));
    }
    return { sumlx, suml2 };
  };
  let { sumlx, suml2 } = trial(f32(-nmax / max), true);
  let scale = suml2 !== 0 ? f32(sumlx / suml2) : 0;
  let best = f32(scale * sumlx);
  for (let k = -9; k <= 9; k++) {
    if (k === 0) continue;
    const iscale = f32(-f32(nmax + f32(f32(0.1) * k)) / max);
    ({ sumlx, suml2 } = trial(iscale, false));
    if (suml2 > 0 && f32(sumlx * sumlx) > f32(best * suml2)) {
      trial(iscale, true);
      scale = f32(sumlx / suml2);
      best = f32(scale * sumlx);
    }
  }
  return scale;
}

/**
 * Q3_K's sub-block search (ggml's `make_q3_quants` with do_rmse): codes l in [-nmax, nmax - 1],
 * x ~ scale * l, weights w = x^2. Starts from the codes for scale max / -nmax, then up to 5 sweeps
 * of coordinate descent: for each element in turn, the code that best fits the other elements'
 * current least-squares scale (x * sum' w l^2 / sum' w x l, sums without that element) replaces its
 * code when that raises (sum w x l)^2 / sum w l^2, i.e. lowers the weighted squared error. Stops
 * after a sweep that changes nothing. Writes L[lAt + i] = l + nmax, returns the final
 * least-squares scale; an all-zero sub-block gets scale 0 and codes 0.
 */
export function makeQ3Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  xAt: number,
  L: Uint8Array,
  lAt: number,
): number {
  const { max, amax } = signedMax(x, xAt, n);
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, lAt, lAt + n);
    return 0;
  }
  const iscale = f32(-nmax / max);
  const l = new Int8Array(n); // (n) signed codes while searching
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const v = x[xAt + i];
    l[i] = clampInt(nearestInt(f32(iscale * v)), -nmax, nmax - 1);
    const w = f32(v * v);
    sumlx = f32(sumlx + f32(f32(w * v) * l[i]));
    suml2 = f32(suml2 + f32(f32(w * l[i]) * l[i]));
  }
  for (let sweep = 0; sweep < 5; sweep++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const v = x[xAt + i];
      const w = f32(v * v);
      // The sums without element i.
      let slx = f32(sumlx - f32(f32(w * v) * l[i]));
      if (!(slx > 0)) continue;
      let sl2 = f32(suml2 - f32(f32(w * l[i]) * l[i]));
      const next = clampInt(nearestInt(f32(f32(v * sl2) / slx)), -nmax, nmax - 1);
      if (next === l[i]) continue;
      slx = f32(slx + f32(f32(w * v) * next));
      sl2 = f32(sl2 + f32(f32(w * next) * next));
      // Better when slx^2 / sl2 > sumlx^2 / suml2, cross-multiplied (both denominators > 0).
      if (sl2 > 0 && f32(f32(slx * slx) * suml2) > f32(f32(sumlx * sumlx) * sl2)) {
        l[i] = next;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (changed === 0) break;
  }
  for (let i = 0; i < n; i++) L[lAt + i] = l[i] + nmax;
  return suml2 > 0 ? f32(sumlx / suml2) : 0;
}

/** Scratch for makeQkx2Quants' trial codes (sub-blocks have at most 32 elements). */
const AUX = new Uint8Array(32);

/** sum_i w_i |s * codes[cAt + i] + m - x_i| (or its square when !useMad), in ggml's f32 order. */
function weightedError(
  n: number,
  x: Float32Array,
  xAt: number,
  weights: Float32Array,
  codes: Uint8Array,
  cAt: number,
  s: number,
  m: number,
  useMad: boolean,
): number {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const diff = f32(f32(f32(s * codes[cAt + i]) + m) - x[xAt + i]);
    sum = f32(sum + f32(weights[i] * (useMad ? Math.abs(diff) : f32(diff * diff))));
  }
  return sum;
}

/** The result of makeQkx2Quants: x ~ scale * L - min. */
export interface ScaleMin {
  scale: number;
  /** Subtracted after scaling; >= 0, since the fitted offset is capped at 0 (min(x, 0) at most). */
  min: number;
}

/**
 * The "x = scale * l - min" search of Q2_K, Q4_K and Q5_K (ggml's `make_qkx2_quants`): codes l in
 * [0, nmax], weights w[i]. The offset starts at min(x_min, 0) and the scale at (max - offset) / nmax.
 * Then nstep + 1 trial inverse scales (rmin + rdelta * k + nmax) / (max - offset): for each trial's
 * codes (taken relative to the best offset so far), scale and offset are refitted by weighted least squares (the 2x2 normal equations, solved
 * by Cramer's rule with determinant D = sum w * sum w l^2 - (sum w l)^2), the offset capped at 0
 * (ggml stores the minimum as a non-negative number to subtract), and the trial with the lowest
 * weighted error (absolute if `useMad`, else squared) wins. Writes L[lAt + i], returns scale and min.
 */
export function makeQkx2Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  xAt: number,
  weights: Float32Array,
  L: Uint8Array,
  lAt: number,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): ScaleMin {
  let min = x[xAt];
  let max = x[xAt];
  let sumW = weights[0];
  let sumX = f32(sumW * x[xAt]);
  for (let i = 1; i < n; i++) {
    const v = x[xAt + i];
    if (v < min) min = v;
    if (v > max) max = v;
    sumW = f32(sumW + weights[i]);
    sumX = f32(sumX + f32(weights[i] * v));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, lAt, lAt + n);
    return { scale: 0, min: -min };
  }
  let iscale = f32(nmax / f32(max - min));
  let scale = f32(1 / iscale);
  for (let i = 0; i < n; i++) L[lAt + i] = clampInt(nearestInt(f32(iscale * f32(x[xAt + i] - min))), 0, nmax);
  let bestError = weightedError(n, x, xAt, weights, L, lAt, scale, min, useMad);
  const aux = AUX; // (n) the trial's codes
  for (let k = 0; k <= nstep; k++) {
    // Note `min` is the best fit so far, not the starting offset: after a trial wins, the next
    // trials scale and shift by its offset (ggml's loop does the same; byte-exactness needs it).
    iscale = f32(f32(f32(rmin + f32(rdelta * k)) + nmax) / f32(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = clampInt(nearestInt(f32(iscale * f32(x[xAt + i] - min))), 0, nmax);
      aux[i] = l;
      const wl = f32(weights[i] * l);
      sumL = f32(sumL + wl);
      sumL2 = f32(sumL2 + f32(wl * l));
      sumXL = f32(sumXL + f32(wl * x[xAt + i]));
    }
    const D = f32(f32(sumW * sumL2) - f32(sumL * sumL));
    if (!(D > 0)) continue;
    let thisScale = f32(f32(f32(sumW * sumXL) - f32(sumX * sumL)) / D);
    let thisMin = f32(f32(f32(sumL2 * sumX) - f32(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = f32(sumXL / sumL2);
    }
    const err = weightedError(n, x, xAt, weights, aux, 0, thisScale, thisMin, useMad);
    if (err < bestError) {
      L.set(aux.subarray(0, n), lAt);
      bestError = err;
      scale = thisScale;
      min = thisMin;
    }
  }
  return { scale, min: -min };
}

/**
 * The sub-block fits of a "x = scale * l - min" super-block (Q2_K, Q4_K, Q5_K): makeQkx2Quants on
 * each of the `count` sub-blocks of `sub` elements at x[xAt ..], weights from `weigh(at, weights)`
 * (filling weights[0 .. sub) for the sub-block at x[at]). Fills scales, mins and the codes L, and
 * returns the largest scale and minimum (both >= 0, so their maxima start from 0).
 */
export function fitSubBlocks(
  x: Float32Array,
  xAt: number,
  sub: number,
  count: number,
  weigh: (at: number, weights: Float32Array) => void,
  search: { nmax: number; rmin: number; nstep: number; useMad: boolean },
  out: { L: Uint8Array; scales: Float32Array; mins: Float32Array },
): { maxScale: number; maxMin: number } {
  const weights = new Float32Array(sub);
  let maxScale = 0;
  let maxMin = 0;
  for (let s = 0; s < count; s++) {
    weigh(xAt + sub * s, weights);
    const fit = makeQkx2Quants(
      sub,
      search.nmax,
      x,
      xAt + sub * s,
      weights,
      out.L,
      sub * s,
      search.rmin,
      f32(0.1),
      search.nstep,
      search.useMad,
    );
    out.scales[s] = fit.scale;
    out.mins[s] = fit.min;
    if (fit.scale > maxScale) maxScale = fit.scale;
    if (fit.min > maxMin) maxMin = fit.min;
  }
  return { maxScale, maxMin };
}
