/**
 * The baselines of spec.md §3 with budget k: oracle top-k (FlexGen), LM-Infinite
 * (sinks + recent) and H2O (heavy hitters + window, evicting for good), each
 * against the f64 oracle on the positions it must keep, and their element counts.
 */
import { AttentionStats, H2OState, Tensor } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { TOL_ATTENTION, buildCache, maxDiff, oracleAttend, rowOf, scoredQuery, shapeArb, validOf } from './oracle.ts';

const kArb = fc.integer({ min: 1, max: 30 });

forEachBackend('topkDecode', (engine) => {
  opIt(
    engine,
    'topkDecode',
    "attends the top k' positions by group-summed exact probability; k >= nValid is dense",
    () => {
      fc.assert(
        fc.property(shapeArb, kArb, (s, k) => {
          const built = buildCache(engine, s, 2);
          const out = Tensor.zeros('f32', built.q.shape);
          const stats = new AttentionStats();
          engine.topkDecode(out, built.q, built.cache, { k }, { stats });
          let want = 0;
          for (let b = 0; b < s.batch; b++) {
            const valid = validOf(built.cache, b);
            for (let h = 0; h < s.nKv; h++) {
              // Group-summed probabilities from the oracle's logits, then the top k' (ties: lowest index).
              const score = valid.map(() => 0);
              for (let t = 0; t < s.g; t++) {
                const head = h * s.g + t;
                const qRow = scoredQuery(
                  s.dtype,
                  built.q.data.subarray((b * s.nKv * s.g + head) * s.d, (b * s.nKv * s.g + head + 1) * s.d),
                );
                const logits = valid.map((j) => {
                  let dot = 0;
                  for (let i = 0; i < s.d; i++)
                    dot += qRow[i] * built.K[((b * s.nKv + h) * built.cache.capacity + j) * s.d + i];
                  return dot / Math.sqrt(s.d);
                });
                const max = Math.max(...logits);
                const total = logits.reduce((acc, x) => acc + Math.exp(x - max), 0);
                logits.forEach((x, n) => (score[n] += Math.exp(x - max) / total));
              }
              const kept = valid
                .map((_, n) => n)
                .sort((x, y) => score[y] - score[x] || x - y)
                .slice(0, Math.min(k, valid.length));
              // Near-ties may legitimately differ in f32; skip heads whose cut is within 1e-5.
              const sorted = [...score].sort((x, y) => y - x);
              if (kept.length < valid.length && sorted[kept.length - 1] - sorted[kept.length] < 1e-5) continue;
              for (let t = 0; t < s.g; t++) {
                const head = h * s.g + t;
                expect(
                  maxDiff(
                    rowOf(out, b, head),
                    oracleAttend(
                      built,
                      b,
                      head,
                      kept.map((n) => valid[n]),
                    ),
                  ),
                ).toBeLessThanOrEqual(TOL_ATTENTION);
              }
            }
            // FlexGen's cost: all of K, k' rows of V, q and y per head.
            want += s.nKv * (valid.length * s.d + Math.min(k, valid.length) * s.d + 2 * s.g * s.d);
          }
          expect(stats.total).toBe(want);
        }),
        { numRuns: fcRuns(80) },
      );
    },
  );
});

forEachBackend('lmInfiniteDecode', (engine) => {
  opIt(
    engine,
    'lmInfiniteDecode',
    "keeps the first min(16, k-1) valid positions plus the most recent, and counts 2k'd + 2d",
    () => {
      fc.assert(
        fc.property(shapeArb, fc.integer({ min: 1, max: 24 }), fc.integer({ min: 0, max: 30 }), (s, k, extra) => {
          // Long enough sequences that the sinks matter.
          const long = { ...s, lens: s.lens.map((n) => n + extra) };
          const built = buildCache(engine, long, 2);
          const out = Tensor.zeros('f32', built.q.shape);
          const stats = new AttentionStats();
          engine.lmInfiniteDecode(out, built.q, built.cache, { k }, { stats });
          let want = 0;
          for (let b = 0; b < s.batch; b++) {
            const valid = validOf(built.cache, b);
            const sinks = Math.min(16, k - 1);
            const kept =
              valid.length <= k ? valid : [...valid.slice(0, sinks), ...valid.slice(valid.length - (k - sinks))];
            expect(kept).toContain(built.cache.nPast[b] - 1); // the current token is always kept
            for (let head = 0; head < s.nKv * s.g; head++) {
              expect(maxDiff(rowOf(out, b, head), oracleAttend(built, b, head, kept))).toBeLessThanOrEqual(
                TOL_ATTENTION,
              );
            }
            want += s.nKv * (2 * kept.length * s.d + 2 * s.g * s.d);
          }
          expect(stats.total).toBe(want);
        }),
        { numRuns: fcRuns(80) },
      );
    },
  );
});

forEachBackend('h2oDecode', (engine) => {
  opIt(
    engine,
    'h2oDecode',
    'evicts for good down to k (lowest accumulated weight outside the window of the newest max(1, floor(k/4))), then attends the survivors',
    () => {
      fc.assert(
        fc.property(shapeArb, fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 5 }), (s, k, steps) => {
          const single = { ...s, batch: 1, lens: [s.lens[0] + steps], pads: [s.pads[0]] };
          const built = buildCache(engine, single, 2);
          const { cache } = built;
          const final = cache.nPast[0];
          const state = new H2OState(cache);
          const H = s.nKv * s.g;
          let everEvicted = new Uint8Array(state.evicted.length);
          // Replay the last `steps` tokens as decode steps: shrink nPast, then grow it one token per step.
          cache.nPast[0] = final - steps;
          for (let step = 0; step < steps; step++) {
            cache.nPast[0]++;
            const valid = validOf(cache, 0);
            const survivors = (h: number) => valid.filter((j) => state.evicted[h * cache.capacity + j] === 0);
            const before = Array.from({ length: s.nKv }, (_, h) => survivors(h));
            const accBefore = state.acc.slice();
            const out = Tensor.zeros('f32', [1, H, s.d]);
            const stats = new AttentionStats();
            engine.h2oDecode(out, built.q, cache, state, { k }, { stats });
            const w = Math.max(1, Math.floor(k / 4));
            const window = valid.slice(valid.length - w);
            let want = 0;
            for (let h = 0; h < s.nKv; h++) {
              // Down to k survivors, all from before, the current token and the window included.
              const after = survivors(h);
              expect(after.length).toBe(Math.min(k, before[h].length));
              for (const j of after) expect(before[h]).toContain(j);
              for (const j of window) expect(after).toContain(j);
              // Exact attention over the survivors.
              for (let t = 0; t < s.g; t++)
                expect(
                  maxDiff(rowOf(out, 0, h * s.g + t), oracleAttend(built, 0, h * s.g + t, after)),
                ).toBeLessThanOrEqual(TOL_ATTENTION);
              // Heavy hitters: no evicted position had more accumulated weight than a kept one outside the window.
              const evictedNow = before[h].filter((j) => !after.includes(j));
              const keptOld = after.filter((j) => !window.includes(j));
              for (const e of evictedNow)
                for (const j of keptOld)
                  expect(accBefore[h * cache.capacity + e]).toBeLessThanOrEqual(accBefore[h * cache.capacity + j]);
              // The evicted positions' scores did not change; the attended ones' did not shrink.
              for (const e of evictedNow)
                expect(state.acc[h * cache.capacity + e]).toBe(accBefore[h * cache.capacity + e]);
              for (const j of after)
                expect(state.acc[h * cache.capacity + j]).toBeGreaterThanOrEqual(accBefore[h * cache.capacity + j]);
              want += 2 * after.length * s.d + 2 * after.length + 2 * s.g * s.d;
            }
            // Evicted for good: nothing evicted before is back.
            for (let e = 0; e < everEvicted.length; e++) if (everEvicted[e]) expect(state.evicted[e]).toBe(1);
            everEvicted = state.evicted.slice();
            // Counts: |C| rows of K and V, acc read + write per attended position, q and y.
            expect(stats.total).toBe(want);
          }
        }),
        { numRuns: fcRuns(60) },
      );
    },
  );

  opIt(
    engine,
    'h2oDecode',
    "in steady state (g 1) reads spec.md §3's 2kd + 2d of K, V, q and y, plus 2k accumulated scores (spec.md §3 models 2S for a dense score vector)",
    () => {
      const s = {
        batch: 1,
        nKv: 1,
        g: 1,
        d: 8,
        dtype: 'f32' as const,
        vDType: 'f32' as const,
        kT: 'f32' as const,
        layout: 'k-twice' as const,
        lens: [40],
        pads: [0],
        seed: 7,
      };
      const built = buildCache(engine, s);
      const state = new H2OState(built.cache);
      const k = 8;
      built.cache.nPast[0] = 30;
      engine.h2oDecode(Tensor.zeros('f32', [1, 1, 8]), built.q, built.cache, state, { k }); // the first step evicts 30 down to k
      built.cache.nPast[0] = 31;
      const stats = new AttentionStats();
      engine.h2oDecode(Tensor.zeros('f32', [1, 1, 8]), built.q, built.cache, state, { k }, { stats });
      expect(stats.kElements + stats.vElements + stats.ioElements).toBe(2 * k * 8 + 2 * 8);
      expect(stats.auxElements).toBe(2 * k);
    },
  );
});

/**
 * h2oSeed adds, per position, a sum of up to N group-mean probabilities, each within f32 rounding of
 * the f64 oracle's (relative 2^-24 per product and sum over <= 64 terms): 1e-5 per row, times N rows.
 */
const TOL_SEED_PER_ROW = 1e-5;

forEachBackend('h2oSeed', (engine) => {
  opIt(
    engine,
    'h2oSeed',
    "adds each position's causal softmax weights, summed over the prefill's rows and averaged over the group, to acc",
    () => {
      fc.assert(
        fc.property(
          shapeArb,
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 0, max: 2 ** 31 }),
          (s, rows, seed) => {
            const built = buildCache(engine, s, 2);
            const { cache } = built;
            const seq = s.batch - 1;
            const valid = validOf(cache, seq);
            const n = Math.min(rows, valid.length);
            const H = s.nKv * s.g;
            let x = seed;
            const next = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32) * 4 - 2;
            const q = Tensor.f32([n, H, s.d], Array.from({ length: n * H * s.d }, next));
            const state = new H2OState(cache);
            state.acc.fill(0.25); // seeding adds to what is there
            engine.h2oSeed(state, q, cache, seq);
            for (let h = 0; h < s.nKv; h++) {
              const want = new Float64Array(cache.capacity).fill(0.25);
              for (let i = 0; i < n; i++) {
                const visible = valid.slice(0, valid.length - (n - 1 - i));
                for (let t = 0; t < s.g; t++) {
                  const qRow = scoredQuery(
                    s.dtype,
                    q.data.subarray((i * H + h * s.g + t) * s.d, (i * H + h * s.g + t + 1) * s.d),
                  );
                  const logits = visible.map((j) => {
                    let dot = 0;
                    for (let e = 0; e < s.d; e++)
                      dot += qRow[e] * built.K[((seq * s.nKv + h) * cache.capacity + j) * s.d + e];
                    return dot / Math.sqrt(s.d);
                  });
                  const max = Math.max(...logits);
                  const total = logits.reduce((a, l) => a + Math.exp(l - max), 0);
                  visible.forEach((j, c) => (want[j] += Math.exp(logits[c] - max) / total / s.g));
                }
              }
              const base = (seq * s.nKv + h) * cache.capacity;
              expect(maxDiff(state.acc.subarray(base, base + cache.capacity), want)).toBeLessThanOrEqual(
                TOL_SEED_PER_ROW * n,
              );
              // Each row's weights sum to 1: the seeds add n in all.
              const added =
                state.acc.subarray(base, base + cache.capacity).reduce((a, v) => a + v, 0) - 0.25 * cache.capacity;
              expect(Math.abs(added - n)).toBeLessThanOrEqual(TOL_SEED_PER_ROW * n * cache.capacity);
            }
            // Nothing evicted, other sequences untouched.
            expect(state.evicted.every((e) => e === 0)).toBe(true);
            for (let b = 0; b < seq; b++)
              for (let j = 0; j < s.nKv * cache.capacity; j++)
                expect(state.acc[b * s.nKv * cache.capacity + j]).toBe(0.25);
          },
        ),
        { numRuns: fcRuns(60) },
      );
    },
  );
});

forEachBackend('attentionPrefill', (engine) => {
  opIt(
    engine,
    'attentionPrefill',
    'with options.h2o: the outputs and scores of attentionPrefill then h2oSeed, exactly',
    () => {
      fc.assert(
        fc.property(shapeArb, fc.integer({ min: 1, max: 12 }), (s, rows) => {
          const built = buildCache(engine, s, 2);
          const { cache } = built;
          const seq = s.batch - 1;
          const n = Math.min(rows, validOf(cache, seq).length);
          const H = s.nKv * s.g;
          const q = Tensor.f32(
            [n, H, s.d],
            Array.from({ length: n * H * s.d }, (_, e) => Math.sin(e * 0.9 + s.seed)),
          );
          const run = (apart: boolean) => {
            const out = Tensor.zeros('f32', q.shape);
            const state = new H2OState(cache);
            state.acc.fill(0.25);
            const stats = new AttentionStats();
            if (apart) {
              engine.attentionPrefill(out, q, cache, seq, { stats });
              engine.h2oSeed(state, q, cache, seq);
            } else engine.attentionPrefill(out, q, cache, seq, { stats, h2o: state });
            return {
              out: Array.from(out.data),
              acc: Array.from(state.acc),
              stats: { ...stats },
              evicted: Array.from(state.evicted),
            };
          };
          expect(run(false)).toEqual(run(true));
        }),
        { numRuns: fcRuns(40) },
      );
    },
  );
});
