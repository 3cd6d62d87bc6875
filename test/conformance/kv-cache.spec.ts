/**
 * kvAppend (SPEC 4): rows, K transposed and V stored in the cache dtype, the
 * running V sum over valid rows of the stored values, nPast advanced, and an
 * append past capacity rejected with the cache unchanged.
 */
import { CapacityError, KVCache, Tensor, f16ToF32 } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { at, buildCache, shapeArb } from './oracle.ts';

/** The running mean is a sum of <= 30 f16/f32 values in f64 divided by n: exact to ~1e-15 relative. */
const TOL_VSUM = 1e-12;

const stored = (c: KVCache, store: ArrayLike<number>, i: number) => (c.dtype === 'f16' ? f16ToF32(store[i]) : store[i]);

forEachBackend('kvAppend', (engine) => {
  opIt(engine, 'kvAppend', 'stores rows, columns and values rounded to the cache dtype, and advances nPast', () => {
    fc.assert(
      fc.property(shapeArb, (s) => {
        const { cache, K, V } = buildCache(engine, s);
        for (let b = 0; b < s.batch; b++) {
          expect(cache.nPast[b]).toBe(s.lens[b]);
          for (let h = 0; h < s.nKv; h++) {
            for (let j = 0; j < s.lens[b]; j++) {
              for (let i = 0; i < s.d; i++) {
                expect(stored(cache, cache.k, cache.rowOffset(b, h, j) + i)).toBe(K[at(cache, b, h, j) + i]);
                expect(stored(cache, cache.v, cache.rowOffset(b, h, j) + i)).toBe(V[at(cache, b, h, j) + i]);
                if (cache.kT) expect(stored(cache, cache.kT, cache.columnOffset(b, h, i) + j)).toBe(K[at(cache, b, h, j) + i]);
              }
            }
          }
        }
        expect(cache.kT === null).toBe(s.layout === 'single-k');
      }),
      { numRuns: 60 },
    );
  });

  opIt(engine, 'kvAppend', 'keeps vSum equal to the sum of the stored valid V rows (so vMean is their mean)', () => {
    fc.assert(
      fc.property(shapeArb, (s) => {
        const { cache, V } = buildCache(engine, s);
        const mean = new Float32Array(s.d);
        for (let b = 0; b < s.batch; b++) {
          for (let h = 0; h < s.nKv; h++) {
            cache.vMean(b, h, mean);
            for (let i = 0; i < s.d; i++) {
              let sum = 0;
              // Padding rows are stored but never part of the mean.
              for (let j = s.pads[b]; j < s.lens[b]; j++) sum += V[at(cache, b, h, j) + i];
              const n = s.lens[b] - s.pads[b];
              expect(Math.abs(cache.vSum[(b * s.nKv + h) * s.d + i] - sum)).toBeLessThanOrEqual(TOL_VSUM * (1 + Math.abs(sum)));
              expect(Math.abs(mean[i] - Math.fround(sum / n))).toBeLessThanOrEqual(TOL_VSUM + 1e-7 * Math.abs(sum / n));
            }
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  opIt(engine, 'kvAppend', 'rejects an append past capacity, naming both numbers, and leaves the cache unchanged', () => {
    for (const dtype of ['f32', 'f16'] as const) {
      const cache = new KVCache({ batch: 2, nKvHeads: 2, headDim: 3, capacity: 5, dtype });
      const fill = (n: number, x: number) => Tensor.f32([n, 2, 3], Array.from({ length: n * 6 }, (_, i) => x + i / 8));
      engine.kvAppend(cache, 0, fill(4, 1), fill(4, 2));
      engine.kvAppend(cache, 1, fill(1, 3), fill(1, 4));
      const snapshot = [cache.k, cache.kT!, cache.v, cache.vSum, cache.nPast, cache.nPad].map((a) => Array.from(a));
      expect(() => engine.kvAppend(cache, 0, fill(2, 5), fill(2, 6))).toThrow(CapacityError);
      expect(() => engine.kvAppend(cache, 0, fill(2, 5), fill(2, 6))).toThrow(/needs 6 positions, capacity is 5/);
      expect([cache.k, cache.kT!, cache.v, cache.vSum, cache.nPast, cache.nPad].map((a) => Array.from(a))).toEqual(snapshot);
      // Exactly filling the capacity is fine.
      engine.kvAppend(cache, 0, fill(1, 7), fill(1, 8));
      expect(cache.nPast[0]).toBe(5);
    }
  });

  opIt(engine, 'kvAppend', 'rounds to f16 with round-to-nearest-even (1 + 2^-11 is a tie and rounds down to 1)', () => {
    const cache = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 1, dtype: 'f16' });
    engine.kvAppend(cache, 0, Tensor.f32([1, 1, 2], [1 + 2 ** -11, 1 + 3 * 2 ** -11]), Tensor.f32([1, 1, 2], [1 + 2 ** -11, 65520]));
    // 1 + 3*2^-11 is a tie between 1 + 2^-10 and 1 + 2^-9: even mantissa wins; 65520 overflows to infinity.
    expect([f16ToF32(cache.k[0]), f16ToF32(cache.k[1])]).toEqual([1, 1 + 2 ** -9]);
    expect([f16ToF32(cache.v[0]), f16ToF32(cache.v[1])]).toEqual([1, Infinity]);
    expect(cache.vSum[0]).toBe(1);
  });
});
