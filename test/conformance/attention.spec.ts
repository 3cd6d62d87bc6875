/**
 * Dense decode and causal prefill (spec.md §1) against an independent f64 oracle,
 * over random shapes (S = 1, odd d, GQA, padding, batch 2, f16/f32, both layouts),
 * and the element counts of spec.md §3's dense row.
 */
import { AttentionStats, Tensor } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { TOL_ATTENTION, buildCache, maxDiff, oracleAttend, rowOf, shapeArb, validOf } from './oracle.ts';

forEachBackend('attentionDecode', (engine) => {
  opIt(
    engine,
    'attentionDecode',
    'equals softmax(qK^T/sqrt(d))V over the valid positions, head h reading KV head floor(h/g)',
    () => {
      fc.assert(
        fc.property(shapeArb, (s) => {
          const built = buildCache(engine, s, 2);
          const out = Tensor.zeros('f32', built.q.shape);
          engine.attentionDecode(out, built.q, built.cache);
          for (let b = 0; b < s.batch; b++) {
            for (let h = 0; h < s.nKv * s.g; h++) {
              const want = oracleAttend(built, b, h, validOf(built.cache, b));
              expect(maxDiff(rowOf(out, b, h), want)).toBeLessThanOrEqual(TOL_ATTENTION);
            }
          }
        }),
        { numRuns: fcRuns(80) },
      );
    },
  );

  opIt(
    engine,
    'attentionDecode',
    'counts 2*S*d + 2*d elements per head (batch 1, g 1, no padding), K/V once per KV head with GQA',
    () => {
      fc.assert(
        fc.property(shapeArb, (s) => {
          const built = buildCache(engine, s);
          const stats = new AttentionStats();
          engine.attentionDecode(Tensor.zeros('f32', built.q.shape), built.q, built.cache, { stats });
          let want = 0;
          // Per sequence and KV head: K and V rows of the valid positions, q and y of g heads.
          for (let b = 0; b < s.batch; b++) want += s.nKv * (2 * built.cache.nValid(b) * s.d + 2 * s.g * s.d);
          expect(stats.total).toBe(want);
          expect(stats.kElements).toBe(stats.vElements);
          expect(stats.calls).toBe(1);
        }),
        { numRuns: fcRuns(40) },
      );
    },
  );
});

forEachBackend('attentionPrefill', (engine) => {
  opIt(engine, 'attentionPrefill', 'is causal: token i sees valid positions up to nPast - N + i', () => {
    fc.assert(
      fc.property(shapeArb, fc.integer({ min: 1, max: 6 }), (s, want) => {
        const built = buildCache(engine, s, 2);
        const { cache } = built;
        const n = Math.min(want, cache.nValid(0));
        const H = s.nKv * s.g;
        const q = Tensor.f32(
          [n, H, s.d],
          Array.from({ length: n * H * s.d }, (_, e) => Math.sin(e * 1.7 + s.seed)),
        );
        const out = Tensor.zeros('f32', [n, H, s.d]);
        engine.attentionPrefill(out, q, cache, 0);
        const valid = validOf(cache, 0);
        for (let i = 0; i < n; i++) {
          for (let h = 0; h < H; h++) {
            const one = { ...built, q: Tensor.f32([1, H, s.d], q.data.subarray(i * H * s.d, (i + 1) * H * s.d)) };
            const wantRow = oracleAttend(one, 0, h, valid.slice(0, valid.length - (n - 1 - i)));
            expect(maxDiff(rowOf(out, i, h), wantRow)).toBeLessThanOrEqual(TOL_ATTENTION);
          }
        }
      }),
      { numRuns: fcRuns(50) },
    );
  });

  opIt(engine, 'attentionPrefill', 'last row equals attentionDecode on the same cache', () => {
    fc.assert(
      fc.property(shapeArb, (s) => {
        const single = { ...s, batch: 1, lens: [s.lens[0]], pads: [s.pads[0]] };
        const built = buildCache(engine, single, 2);
        const n = Math.min(3, built.cache.nValid(0));
        const H = s.nKv * s.g;
        const q = Tensor.f32(
          [n, H, s.d],
          Array.from({ length: n * H * s.d }, (_, e) => Math.cos(e + s.seed)),
        );
        const out = Tensor.zeros('f32', q.shape);
        engine.attentionPrefill(out, q, built.cache, 0);
        const last = Tensor.f32([1, H, s.d], q.data.subarray((n - 1) * H * s.d));
        const dec = Tensor.zeros('f32', last.shape);
        engine.attentionDecode(dec, last, built.cache);
        expect(maxDiff(out.data.subarray((n - 1) * H * s.d), dec.data)).toBeLessThanOrEqual(TOL_ATTENTION);
      }),
      { numRuns: fcRuns(40) },
    );
  });
});
