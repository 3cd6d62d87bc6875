/**
 * sparqDecode (spec.md §2): a hand-worked case, the invariants of spec.md §2 over random
 * shapes (r = d and k >= nValid is dense, with and without reallocation; l >= k
 * selects only the window; i2 never holds a masked position), step 1 and 3
 * against an f64 oracle given the chosen sets, both layouts alike, and the
 * element counts of spec.md §3's SparQ row.
 */
import { AttentionStats, KVCache, SparqTrace, Tensor } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import {
  TOL_ATTENTION,
  at,
  buildCache,
  exactKTShapeArb,
  maxDiff,
  oracleAttend,
  rowOf,
  shapeArb,
  validOf,
  type Shape,
} from './oracle.ts';

/** Hand-computed values below are given to 6 decimals. */
const TOL_HAND = 2e-6;

/**
 * Step 1's approximate probabilities against the f64 oracle: the logits (|x| <~ 20) are rounded
 * to f32 (~1.2e-6 absolute, so ~1.2e-6 relative in each probability) and the softmax runs in f32,
 * so each s_hat and any sum of them (alpha <= 1) is within a few 1e-6; 1e-5 as for attention.
 */
const TOL_STEP1 = 1e-5;

const paramsArb = (s: Shape) =>
  fc.record({
    r: fc.integer({ min: 1, max: s.d }),
    k: fc.integer({ min: 1, max: 30 }),
    l: fc.integer({ min: 0, max: 30 }),
    reallocate: fc.boolean(),
  });

function run(
  engine: Parameters<Parameters<typeof forEachBackend>[1]>[0],
  s: Shape,
  p: { r: number; k: number; l: number; reallocate: boolean },
) {
  const built = buildCache(engine, s, 2);
  const H = s.nKv * s.g;
  const out = Tensor.zeros('f32', built.q.shape);
  const trace = new SparqTrace(s.batch, H, s.nKv, p.r, p.k);
  const stats = new AttentionStats();
  engine.sparqDecode(out, built.q, built.cache, p, { trace, stats });
  const i2 = (b: number, h: number) =>
    Array.from(trace.i2.subarray((b * s.nKv + h) * p.k, (b * s.nKv + h) * p.k + trace.i2Count[b * s.nKv + h]));
  return { built, out, trace, stats, i2 };
}

forEachBackend('sparqDecode', (engine) => {
  opIt(engine, 'sparqDecode', 'hand-worked: S 4, d 2, r 1, k 2', () => {
    // K rows [0,0] [1,0] [0,2] [2,1]; V rows [1,0] [0,1] [1,1] [2,0]; q = [1, 1].
    const cache = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 4 });
    engine.kvAppend(
      cache,
      0,
      Tensor.f32([4, 1, 2], [0, 0, 1, 0, 0, 2, 2, 1]),
      Tensor.f32([4, 1, 2], [1, 0, 0, 1, 1, 1, 2, 0]),
    );
    const q = Tensor.f32([1, 1, 2], [1, 1]);
    const out = Tensor.zeros('f32', [1, 1, 2]);
    const trace = new SparqTrace(1, 1, 1, 1, 2);
    engine.sparqDecode(out, q, cache, { r: 1, k: 2 }, { trace });
    // Step 1: |q| = [1, 1] ties, so i1 = {0} (lowest index). tau = sqrt(d * |q[i1]|_1 / |q|_1) = sqrt(2 * 1/2) = 1.
    expect(Array.from(trace.i1)).toEqual([0]);
    expect(trace.tau[0]).toBe(1);
    // Approximate logits q[0] * K[j,0] / 1 = [0, 1, 0, 2]; s_hat = [1, e, 1, e^2] / (2 + e + e^2 = 12.107338)
    //   = [0.082595, 0.224515, 0.082595, 0.610296].
    // Step 2: the top 2 are positions 3 and 1; alpha = (e + e^2) / 12.107338 = 0.834811.
    expect(Array.from(trace.i2).sort()).toEqual([1, 3]);
    expect(trace.i2Count[0]).toBe(2);
    expect(Math.abs(trace.alpha[0] - 0.834811)).toBeLessThanOrEqual(TOL_HAND);
    // Step 3: exact logits q.K1 / sqrt(2) = 0.707107, q.K3 / sqrt(2) = 2.121320; weights
    //   w3 = 1 / (1 + exp(-1.414214) = 0.243117) = 0.804430, w1 = 0.195570;
    //   y_k = 0.195570 * [0,1] + 0.804430 * [2,0] = [1.608859, 0.195570];
    //   vMean = ([1,0] + [0,1] + [1,1] + [2,0]) / 4 = [1, 0.5];
    //   y = 0.834811 * y_k + 0.165189 * vMean = [1.508282, 0.245859].
    expect(maxDiff(out.data, [1.508282, 0.245859])).toBeLessThanOrEqual(TOL_HAND);
    // Without reallocation y = y_k.
    engine.sparqDecode(out, q, cache, { r: 1, k: 2, reallocate: false });
    expect(maxDiff(out.data, [1.608859, 0.19557])).toBeLessThanOrEqual(TOL_HAND);
    // A window of l = 2 forces positions {2, 3}: logits 2/sqrt(2), 3/sqrt(2), w3 = 1/(1 + exp(-0.707107)) = 0.669762,
    //   alpha = (1 + e^2) / 12.107338 = 0.692890; y_k = 0.330238 * [1,1] + 0.669762 * [2,0] = [1.669762, 0.330238];
    //   y = 0.692890 * y_k + 0.307110 * [1, 0.5] = [1.464071, 0.382374].
    engine.sparqDecode(out, q, cache, { r: 1, k: 2, l: 2 }, { trace });
    expect(Array.from(trace.i2).sort()).toEqual([2, 3]);
    expect(maxDiff(out.data, [1.464071, 0.382374])).toBeLessThanOrEqual(TOL_HAND);
  });

  opIt(engine, 'sparqDecode', 'r = d and k >= nValid equals dense attention, with and without reallocation', () => {
    fc.assert(
      fc.property(shapeArb, fc.boolean(), fc.integer({ min: 0, max: 4 }), (s, reallocate, l) => {
        const { built, out } = run(engine, s, { r: s.d, k: 30, l, reallocate });
        const dense = Tensor.zeros('f32', built.q.shape);
        engine.attentionDecode(dense, built.q, built.cache);
        expect(maxDiff(out.data, dense.data)).toBeLessThanOrEqual(TOL_ATTENTION);
      }),
      { numRuns: fcRuns(80) },
    );
  });

  opIt(engine, 'sparqDecode', 'i2 holds min(k, nValid) distinct valid positions; l >= k keeps only the window', () => {
    fc.assert(
      fc.property(
        shapeArb.chain((s) => fc.tuple(fc.constant(s), paramsArb(s))),
        ([s, p]) => {
          const { built, i2 } = run(engine, s, p);
          for (let b = 0; b < s.batch; b++) {
            const { nPad, nPast } = { nPad: built.cache.nPad[b], nPast: built.cache.nPast[b] };
            for (let h = 0; h < s.nKv; h++) {
              const set = i2(b, h);
              expect(set.length).toBe(Math.min(p.k, nPast - nPad));
              expect(new Set(set).size).toBe(set.length);
              for (const j of set) expect(j >= nPad && j < nPast).toBe(true);
              // The window j >= S - l ranks first: with l >= k every choice lies in it.
              if (p.l >= p.k) for (const j of set) expect(j).toBeGreaterThanOrEqual(nPast - p.l);
            }
          }
        },
      ),
      { numRuns: fcRuns(100) },
    );
  });

  opIt(engine, 'sparqDecode', 'i1, tau follow step 1 and y follows step 3 given the chosen sets (f64 oracle)', () => {
    fc.assert(
      fc.property(
        shapeArb.chain((s) => fc.tuple(fc.constant(s), paramsArb(s))),
        ([s, p]) => {
          const { built, out, trace, i2 } = run(engine, s, p);
          const { cache, q, V } = built;
          const H = s.nKv * s.g;
          for (let b = 0; b < s.batch; b++) {
            for (let h = 0; h < s.nKv; h++) {
              // i1: top-r of |q| summed over the group, ties to the lowest index.
              const abs = Array.from({ length: s.d }, (_, i) => {
                let sum = 0;
                for (let t = 0; t < s.g; t++) sum += Math.abs(q.data[(b * H + h * s.g + t) * s.d + i]);
                return sum;
              });
              const order = abs.map((_, i) => i).sort((x, y) => abs[y] - abs[x] || x - y);
              const i1 = Array.from(trace.i1.subarray((b * s.nKv + h) * p.r, (b * s.nKv + h + 1) * p.r)).sort(
                (x, y) => x - y,
              );
              expect(i1).toEqual(order.slice(0, p.r).sort((x, y) => x - y));
              // Step 3 on the chosen i2, interpolated with the mean of valid V rows.
              const mean = new Float64Array(s.d);
              for (const j of validOf(cache, b))
                for (let i = 0; i < s.d; i++)
                  mean[i] += V[((b * s.nKv + h) * cache.capacity + j) * s.d + i] / cache.nValid(b);
              for (let t = 0; t < s.g; t++) {
                const head = h * s.g + t;
                const qRow = q.data.subarray((b * H + head) * s.d, (b * H + head + 1) * s.d);
                const l1 = qRow.reduce((acc, x) => acc + Math.abs(x), 0);
                const part = i1.reduce((acc, i) => acc + Math.abs(qRow[i]), 0);
                expect(Math.abs(trace.tau[b * H + head] - Math.sqrt((s.d * part) / l1))).toBeLessThanOrEqual(
                  1e-6 * Math.sqrt(s.d),
                );
                const alpha = p.reallocate ? trace.alpha[b * H + head] : 1;
                const yk = oracleAttend(built, b, head, i2(b, h));
                const want = yk.map((y, i) => alpha * y + (1 - alpha) * mean[i]);
                expect(maxDiff(rowOf(out, b, head), want)).toBeLessThanOrEqual(TOL_ATTENTION);
              }
            }
          }
        },
      ),
      { numRuns: fcRuns(80) },
    );
  });

  opIt(
    engine,
    'sparqDecode',
    'step 1 ranks with K transposed as stored (f32, f16 or integer codes): alpha and i2 against the f64 oracle',
    () => {
      fc.assert(
        fc.property(
          shapeArb.chain((s) => fc.tuple(fc.constant(s), paramsArb(s))),
          ([s, p]) => {
            const { built, trace, i2 } = run(engine, s, p);
            const { cache, q, KT } = built;
            const H = s.nKv * s.g;
            for (let b = 0; b < s.batch; b++) {
              const valid = validOf(cache, b);
              for (let h = 0; h < s.nKv; h++) {
                const i1 = Array.from(trace.i1.subarray((b * s.nKv + h) * p.r, (b * s.nKv + h + 1) * p.r));
                // s_hat_t over valid positions from KT (what K transposed holds), with the backend's tau.
                const score = new Map<number, number>(valid.map((j) => [j, 0]));
                const chosen = i2(b, h);
                for (let t = 0; t < s.g; t++) {
                  const head = b * H + h * s.g + t;
                  const logits = valid.map(
                    (j) =>
                      i1.reduce((acc, i) => acc + q.data[head * s.d + i] * KT[at(cache, b, h, j) + i], 0) /
                      trace.tau[head],
                  );
                  const max = Math.max(...logits);
                  const total = logits.reduce((acc, x) => acc + Math.exp(x - max), 0);
                  const sHat = logits.map((x) => Math.exp(x - max) / total);
                  valid.forEach((j, n) => score.set(j, score.get(j)! + sHat[n]));
                  const alpha = chosen.reduce((acc, j) => acc + sHat[j - valid[0]], 0);
                  expect(Math.abs(trace.alpha[head] - alpha)).toBeLessThanOrEqual(TOL_STEP1);
                }
                // Outside the local window, every chosen position scores at least every one left out.
                const windowStart = cache.nPast[b] - p.l;
                const left = valid.filter((j) => j < windowStart && !chosen.includes(j)).map((j) => score.get(j)!);
                const taken = chosen.filter((j) => j < windowStart).map((j) => score.get(j)!);
                if (left.length > 0 && taken.length > 0)
                  expect(Math.min(...taken)).toBeGreaterThanOrEqual(Math.max(...left) - s.g * TOL_STEP1);
              }
            }
          },
        ),
        { numRuns: fcRuns(80) },
      );
    },
  );

  opIt(engine, 'sparqDecode', "gives the same output with K stored twice or once ('k-twice' / 'single-k')", () => {
    fc.assert(
      fc.property(
        exactKTShapeArb.chain((s) => fc.tuple(fc.constant(s), paramsArb(s))),
        ([s, p]) => {
          const a = run(engine, { ...s, layout: 'k-twice' }, p);
          const b = run(engine, { ...s, layout: 'single-k' }, p);
          expect(maxDiff(a.out.data, b.out.data)).toBeLessThanOrEqual(TOL_ATTENTION);
          expect(Array.from(a.trace.i2)).toEqual(Array.from(b.trace.i2));
        },
      ),
      { numRuns: fcRuns(40) },
    );
  });

  opIt(
    engine,
    'sparqDecode',
    "counts S*r + 2*k'*d + 4*d per head (2*d less without reallocation); with GQA K, V, vMean once per KV head",
    () => {
      fc.assert(
        fc.property(
          shapeArb.chain((s) => fc.tuple(fc.constant(s), paramsArb(s))),
          ([s, p]) => {
            const { built, stats } = run(engine, s, p);
            let want = 0;
            for (let b = 0; b < s.batch; b++) {
              const S = built.cache.nValid(b);
              const kp = Math.min(p.k, S);
              want += s.nKv * (S * p.r + 2 * kp * s.d + (p.reallocate ? 2 * s.d : 0) + 2 * s.g * s.d);
            }
            expect(stats.total).toBe(want);
            // The spec.md §3 row itself, for batch 1, g 1, no padding:
            if (s.batch === 1 && s.g === 1 && s.nKv === 1 && s.pads[0] === 0) {
              const S = s.lens[0];
              expect(stats.total).toBe(S * p.r + 2 * Math.min(p.k, S) * s.d + (p.reallocate ? 4 : 2) * s.d);
            }
          },
        ),
        { numRuns: fcRuns(60) },
      );
    },
  );
});
