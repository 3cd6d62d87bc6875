/**
 * kvAppend (spec.md §4; issue 24's layout in core kv-cache.ts): rows stored in the cache dtype (block
 * rows byte-equal to the `quantize` op on the rows), K transposed as the design's formula for every
 * kT type (written out in oracle.ts's kTBlockCodes, f64), the running V sum over valid decoded rows,
 * the same bytes whatever the append chunking, the block-scale edge cases, and an append past
 * capacity rejected with the cache unchanged.
 */
import { CapacityError, KVCache, Tensor, f16ToF32, f32ToF16, type KTDType, type KVDType } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt, referenceEngine } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { prng } from '../../packages/cli/src/commands/demo.ts';
import { at, buildCache, kTBlockCodes, shapeArb } from './oracle.ts';

/** The running mean is a sum of <= 30 decoded values in f64 divided by n: exact to ~1e-15 relative. */
const TOL_VSUM = 1e-12;

/** A float row element as stored (f16 bits widened; f32 as is). */
const stored = (dtype: KVDType | KTDType, store: ArrayLike<number>, i: number) =>
  dtype === 'f16' ? f16ToF32(store[i]) : store[i];

/**
 * The code of position p in an integer kT column at `col`, unpacked as the design states it:
 * i8 one signed byte per position; i4 code + 7 in byte p >> 1, even p in the low nibble;
 * i2 code + 1 at bits 2 (p & 3) of byte p >> 2.
 */
function codeAt(kT: KTDType, column: ArrayLike<number>, col: number, p: number): number {
  if (kT === 'i8') return column[col + p];
  if (kT === 'i4')
    return (p % 2 === 0 ? column[col + Math.floor(p / 2)] % 16 : Math.floor(column[col + Math.floor(p / 2)] / 16)) - 7;
  return (Math.floor(column[col + Math.floor(p / 4)] / 4 ** (p % 4)) % 4) - 1;
}
const BITS: Partial<Record<KTDType, number>> = { i8: 8, i4: 4, i2: 2 };

/** Bytes of `dtype` blocks the reference's quantize op makes of `row`. */
function quantizedBytes(dtype: 'q8_0' | 'q4_0', row: Float32Array): number[] {
  const blocks = Tensor.zeros(dtype, [1, row.length]);
  referenceEngine.quantize(blocks, Tensor.f32([1, row.length], row));
  return Array.from(blocks.data);
}

/** Checks kT and kTScale of sequence b, head h against the formula over the decoded rows K. */
function expectColumns(cache: KVCache, K: Float64Array, b: number, h: number): void {
  const kT = cache.kTDType!;
  const bits = BITS[kT];
  for (let i = 0; i < cache.headDim; i++) {
    const col = cache.columnOffset(b, h, i);
    const x = Array.from({ length: cache.nPast[b] }, (_, j) => K[at(cache, b, h, j) + i]);
    if (bits === undefined) {
      // Float kT: the stored row's value, rounded to f16 for 'f16'.
      x.forEach((v, j) => expect(stored(kT, cache.kT!, col + j)).toBe(kT === 'f16' ? f16ToF32(f32ToF16(v)) : v));
      continue;
    }
    for (let first = 0; first < x.length; first += 64) {
      const { scaleBits, codes } = kTBlockCodes(bits, x.slice(first, first + 64));
      expect(cache.kTScale![cache.scaleOffset(b, h, i) + first / 64]).toBe(scaleBits);
      // Every code of the block is written: positions past nPast hold 0.
      for (let t = 0; t < 64 && first + t < cache.capacity; t++)
        expect(codeAt(kT, cache.kT!, col, first + t)).toBe(codes[t] ?? 0);
    }
  }
}

/** 'k-twice' shapes up to 164 positions, so kT blocks fill, spill past 64 and 128 and end part-way. */
const longArb = fc
  .tuple(shapeArb, fc.integer({ min: 0, max: 140 }))
  .map(([s, extra]) => ({ ...s, layout: 'k-twice' as const, lens: s.lens.map((n) => n + extra) }));

forEachBackend('kvAppend', (engine) => {
  opIt(
    engine,
    'kvAppend',
    'stores K rows in the K type and V rows in the V type (q8_0 / q4_0 rows byte-equal to quantize of the rows) and advances nPast',
    () => {
      fc.assert(
        fc.property(shapeArb, (s) => {
          const { cache, K, V, Kin, Vin } = buildCache(engine, s);
          for (let b = 0; b < s.batch; b++) {
            expect(cache.nPast[b]).toBe(s.lens[b]);
            for (let h = 0; h < s.nKv; h++) {
              for (let j = 0; j < s.lens[b]; j++) {
                const from = at(cache, b, h, j);
                // K rows in the K type, V rows in the V type, each at its own row stride.
                const sides = [
                  {
                    dtype: s.dtype,
                    store: cache.k,
                    row: cache.kRowOffset(b, h, j),
                    stride: cache.kRowStride,
                    input: Kin,
                    want: K,
                  },
                  {
                    dtype: s.vDType,
                    store: cache.v,
                    row: cache.vRowOffset(b, h, j),
                    stride: cache.vRowStride,
                    input: Vin,
                    want: V,
                  },
                ];
                for (const { dtype, store, row, stride, input, want } of sides) {
                  if (dtype === 'q8_0' || dtype === 'q4_0') {
                    expect(Array.from(store.subarray(row, row + stride))).toEqual(
                      quantizedBytes(dtype, input.subarray(from, from + s.d)),
                    );
                    continue;
                  }
                  for (let i = 0; i < s.d; i++) expect(stored(dtype, store, row + i)).toBe(want[from + i]);
                }
              }
            }
          }
          expect(cache.kT === null).toBe(s.layout === 'single-k');
        }),
        { numRuns: fcRuns(60) },
      );
    },
  );

  opIt(
    engine,
    'kvAppend',
    'stores K transposed from the stored rows: f32 / f16 values, or integer codes with f16 scales per 64 positions',
    () => {
      fc.assert(
        fc.property(longArb, (s) => {
          const { cache, K } = buildCache(engine, s);
          for (let b = 0; b < s.batch; b++) for (let h = 0; h < s.nKv; h++) expectColumns(cache, K, b, h);
        }),
        { numRuns: fcRuns(40) },
      );
    },
  );

  opIt(engine, 'kvAppend', 'writes the same bytes whether tokens come one at a time or all at once', () => {
    fc.assert(
      fc.property(longArb, (s) => {
        const one = buildCache(engine, s, 1, 1).cache;
        const all = buildCache(engine, s, 1, 1 << 20).cache;
        for (const name of ['k', 'kT', 'kTScale', 'v', 'vSum', 'nPast', 'nPad'] as const) {
          expect(Array.from(one[name] ?? []), name).toEqual(Array.from(all[name] ?? []));
        }
      }),
      { numRuns: fcRuns(25) },
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
              expect(Math.abs(cache.vSum[(b * s.nKv + h) * s.d + i] - sum)).toBeLessThanOrEqual(
                TOL_VSUM * (1 + Math.abs(sum)),
              );
              expect(Math.abs(mean[i] - Math.fround(sum / n))).toBeLessThanOrEqual(TOL_VSUM + 1e-7 * Math.abs(sum / n));
            }
          }
        }
      }),
      { numRuns: fcRuns(60) },
    );
  });

  opIt(
    engine,
    'kvAppend',
    'rejects an append past capacity, naming both numbers, and leaves the cache unchanged',
    () => {
      const cases = [
        ['f32', 3, 'f32'],
        ['f16', 3, 'f16'],
        ['f16', 3, 'i8'],
        ['q8_0', 32, 'i4'],
        ['q4_0', 32, 'i2'],
      ] as const;
      for (const [dtype, d, kTDType] of cases) {
        const cache = new KVCache({ batch: 2, nKvHeads: 2, headDim: d, capacity: 5, dtype, kTDType });
        const fill = (n: number, x: number) =>
          Tensor.f32(
            [n, 2, d],
            Array.from({ length: n * 2 * d }, (_, i) => x + i / 8),
          );
        engine.kvAppend(cache, 0, fill(4, 1), fill(4, 2));
        engine.kvAppend(cache, 1, fill(1, 3), fill(1, 4));
        const arrays = () =>
          [cache.k, cache.kT!, cache.kTScale ?? [], cache.v, cache.vSum, cache.nPast, cache.nPad].map((a) =>
            Array.from(a),
          );
        const snapshot = arrays();
        expect(() => engine.kvAppend(cache, 0, fill(2, 5), fill(2, 6))).toThrow(CapacityError);
        expect(() => engine.kvAppend(cache, 0, fill(2, 5), fill(2, 6))).toThrow(/needs 6 positions, capacity is 5/);
        expect(arrays()).toEqual(snapshot);
        // Exactly filling the capacity is fine.
        engine.kvAppend(cache, 0, fill(1, 7), fill(1, 8));
        expect(cache.nPast[0]).toBe(5);
      }
    },
  );

  opIt(
    engine,
    'kvAppend',
    'derives kT block scales at the edges: all zeros, one outlier, a scale that underflows or rounds down, a partial last block',
    () => {
      // capacity 130: blocks [0, 64), [64, 128) and the partial [128, 130). headDim 32, f32 rows so the values are exact.
      const n = 130;
      const d = 32;
      const x = (j: number, i: number): number => {
        if (i === 0) return 0; // component 0: all zeros
        if (i === 1) return j === 70 ? -1000 : 0.01 * Math.sin(j); // one outlier in block 1
        if (i === 2) return j % 64 === 5 ? 1e-6 : 0; // amax / qmax among f16's subnormals (steps of 2^-24)
        if (i === 3) return j === 3 ? 1.082e-5 : 0; // amax / 127 = 8.5e-8 rounds down to one subnormal step (5.96e-8)
        return Math.cos(j * 0.37 + i);
      };
      for (const kTDType of ['i8', 'i4', 'i2'] as const) {
        const cache = new KVCache({ nKvHeads: 1, headDim: d, capacity: n, dtype: 'f32', kTDType });
        const rows = Tensor.f32(
          [n, 1, d],
          Array.from({ length: n * d }, (_, e) => x(Math.floor(e / d), e % d)),
        );
        engine.kvAppend(cache, 0, rows, rows);
        const qmax = { i8: 127, i4: 7, i2: 1 }[kTDType];
        const scale = (i: number, block: number) => f16ToF32(cache.kTScale![cache.scaleOffset(0, 0, i) + block]);
        const code = (i: number, p: number) => codeAt(kTDType, cache.kT!, cache.columnOffset(0, 0, i), p);
        // All zeros: scale 0, codes 0.
        for (let block = 0; block < 3; block++) expect(scale(0, block)).toBe(0);
        for (let p = 0; p < 192; p++) expect(code(0, p)).toBe(0);
        // The outlier takes -qmax and sets block 1's scale; the small values round to 0 beside it (0.01 < scale / 2).
        expect(scale(1, 1)).toBe(f16ToF32(f32ToF16(Math.fround(1000 / qmax))));
        expect(code(1, 70)).toBe(-qmax);
        for (let p = 64; p < 128; p++) if (p !== 70) expect(code(1, p)).toBe(0);
        // 1e-6 / qmax in steps of 2^-24: i8 0.13 (scale 0, codes 0); i4 2.40 -> 2, so 1e-6 / 2^-23 = 8.4 clamps to 7;
        // i2 16.8 -> 17, and 1e-6 / (17 * 2^-24) = 0.99 rounds to 1.
        expect(scale(2, 0) / 2 ** -24).toBe({ i8: 0, i4: 2, i2: 17 }[kTDType]);
        expect(code(2, 5)).toBe({ i8: 0, i4: 7, i2: 1 }[kTDType]);
        // i8: the scale rounds down to 2^-24, so 1.082e-5 / 2^-24 = 181.5 is clamped to 127.
        if (kTDType === 'i8') {
          expect(scale(3, 0)).toBe(2 ** -24);
          expect(code(3, 3)).toBe(127);
        }
        // The partial last block holds positions 128, 129; the rest of it is code 0.
        for (let i = 4; i < d; i++) {
          const { scaleBits, codes } = kTBlockCodes(
            { i8: 8, i4: 4, i2: 2 }[kTDType],
            [x(128, i), x(129, i)].map(Math.fround),
          );
          expect(cache.kTScale![cache.scaleOffset(0, 0, i) + 2]).toBe(scaleBits);
          expect([code(i, 128), code(i, 129), code(i, 130), code(i, 191)]).toEqual([...codes, 0, 0]);
        }
      }
    },
  );

  opIt(
    engine,
    'kvAppend',
    'after a truncate, appends write the bytes of a cache that never held the dropped positions (integer kT)',
    () => {
      // A block's codes are kept where its scale does not change: the dropped positions' codes
      // must still go (0 past nPast), and a scale the dropped keys set must be derived again.
      const arb = fc.record({
        kT: fc.constantFrom('i8', 'i4', 'i2'),
        dtype: fc.constantFrom('f32', 'f16'),
        written: fc.integer({ min: 1, max: 150 }),
        keep: fc.nat(),
        added: fc.integer({ min: 1, max: 70 }),
        // Per position: the magnitude of its key (a large one sets its block's scale).
        big: fc.array(fc.boolean(), { minLength: 300, maxLength: 300 }),
        seed: fc.nat(),
      });
      fc.assert(
        fc.property(arb, ({ kT, dtype, written, keep, added, big, seed }) => {
          const [nKv, d] = [2, 32];
          const kept = keep % (written + 1);
          const rand = prng(seed);
          const row = (p: number, scale: number) =>
            Tensor.f32(
              [1, nKv, d],
              Array.from({ length: nKv * d }, () => (big[p] ? 4 : 1) * scale * (2 * rand() - 1)),
            );
          // Positions [0, kept) shared; the dropped [kept, written) and the new ones differ.
          const shared = Array.from({ length: kept }, (_, p) => row(p, 1));
          const dropped = Array.from({ length: written - kept }, (_, i) => row(kept + i, 2));
          const fresh = Array.from({ length: added }, (_, i) => row(kept + i, 1));
          const capacity = Math.max(written, kept + added);
          const make = () => new KVCache({ nKvHeads: nKv, headDim: d, capacity, dtype, kTDType: kT });
          const truncated = make();
          for (const x of [...shared, ...dropped]) engine.kvAppend(truncated, 0, x, x);
          truncated.truncate(0, kept);
          const direct = make();
          for (const x of shared) engine.kvAppend(direct, 0, x, x);
          for (const x of fresh) {
            engine.kvAppend(truncated, 0, x, x);
            engine.kvAppend(direct, 0, x, x);
          }
          // The blocks holding positions [0, nPast), whole (0 past nPast); later blocks and the rows
          // past nPast may keep dropped keys until an append reaches them.
          expect(truncated.nPast[0]).toBe(direct.nPast[0]);
          const blocks = Math.ceil(direct.nPast[0] / 64);
          const bytes = (blocks * 64 * BITS[kT]!) / 8;
          for (let h = 0; h < nKv; h++)
            for (let i = 0; i < d; i++) {
              const [col, sc] = [direct.columnOffset(0, h, i), direct.scaleOffset(0, h, i)];
              expect(Array.from(truncated.kT!.subarray(col, col + bytes)), `kT ${h} ${i}`).toEqual(
                Array.from(direct.kT!.subarray(col, col + bytes)),
              );
              expect(Array.from(truncated.kTScale!.subarray(sc, sc + blocks)), `kTScale ${h} ${i}`).toEqual(
                Array.from(direct.kTScale!.subarray(sc, sc + blocks)),
              );
            }
        }),
        { numRuns: fcRuns(40) },
      );
    },
  );

  opIt(
    engine,
    'kvAppend',
    'writes the reference bytes at a model-sized shape (8 KV heads of 128: the pool splits heads)',
    () => {
      // Big enough for the native backend's per-head tasks (kv_append.cc) with one token per call.
      const [nKv, d, n] = [8, 128, 70];
      const rand = prng(7);
      const caches = [engine, referenceEngine].map((e) => {
        const cache = new KVCache({ nKvHeads: nKv, headDim: d, capacity: n, dtype: 'f16', kTDType: 'i4' });
        return { e, cache };
      });
      for (let p = 0; p < n; p++) {
        const x = Tensor.f32(
          [1, nKv, d],
          Array.from({ length: nKv * d }, () => 2 * rand() - 1),
        );
        for (const { e, cache } of caches) e.kvAppend(cache, 0, x, x);
      }
      const [a, b] = caches.map((c) => c.cache);
      for (const name of ['k', 'kT', 'kTScale', 'v', 'vSum', 'nPast'] as const)
        expect(Array.from(a[name] ?? []), name).toEqual(Array.from(b[name] ?? []));
    },
  );

  opIt(engine, 'kvAppend', 'rounds to f16 with round-to-nearest-even (1 + 2^-11 is a tie and rounds down to 1)', () => {
    const cache = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 1, dtype: 'f16' });
    engine.kvAppend(
      cache,
      0,
      Tensor.f32([1, 1, 2], [1 + 2 ** -11, 1 + 3 * 2 ** -11]),
      Tensor.f32([1, 1, 2], [1 + 2 ** -11, 65520]),
    );
    // 1 + 3*2^-11 is a tie between 1 + 2^-10 and 1 + 2^-9: even mantissa wins; 65520 overflows to infinity.
    expect([f16ToF32(cache.k[0]), f16ToF32(cache.k[1])]).toEqual([1, 1 + 2 ** -9]);
    expect([f16ToF32(cache.v[0]), f16ToF32(cache.v[1])]).toEqual([1, Infinity]);
    expect(cache.vSum[0]).toBe(1);
  });
});
