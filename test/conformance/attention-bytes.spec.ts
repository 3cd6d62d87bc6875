/**
 * AttentionStats in bytes (core attention.ts, countBytes): what dense, SparQ and H2O decode read
 * from caches of every row type and K transposed type, against spec.md §3's elements priced by hand
 * from the layouts of docs/kv-cache.md (d = 64: a row is 256 bytes f32, 128 f16, 2 x 34 q8_0,
 * 2 x 18 q4_0; a kT element 4 f32, 2 f16, 1 / 0.5 / 0.25 i8 / i4 / i2 plus one f16 scale per 64
 * positions). So SparQ's data ratio over a q4_0 cache is a ratio of bytes, not of elements.
 */
import {
  AttentionStats,
  H2OState,
  KVCache,
  Tensor,
  type Engine,
  type KTDType,
  type KVDType,
  type KVLayout,
} from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const d = 64;
const ROW_BYTES: Record<KVDType, number> = { f32: 256, f16: 128, q8_0: 68, q4_0: 36 };
const KT_ELEMENT_BYTES: Record<KTDType, number> = {
  f32: 4,
  f16: 2,
  i8: 1 + 2 / 64,
  i4: 0.5 + 2 / 64,
  i2: 0.25 + 2 / 64,
};
const CACHES: { dtype: KVDType; kT: KTDType | null; layout: KVLayout }[] = [
  { dtype: 'f32', kT: 'f32', layout: 'k-twice' },
  { dtype: 'f16', kT: 'f16', layout: 'k-twice' },
  { dtype: 'f16', kT: 'i4', layout: 'k-twice' },
  { dtype: 'q8_0', kT: 'i8', layout: 'k-twice' },
  { dtype: 'q4_0', kT: 'i2', layout: 'k-twice' },
  { dtype: 'q4_0', kT: null, layout: 'single-k' },
];

/** A cache of nKv heads holding S random positions, and a random query of g heads per KV head. */
function filled(engine: Engine, c: (typeof CACHES)[number], nKv: number, g: number, S: number, seed: number) {
  const cache = new KVCache({
    nKvHeads: nKv,
    headDim: d,
    capacity: S,
    dtype: c.dtype,
    layout: c.layout,
    ...(c.kT && { kTDType: c.kT }),
  });
  const rows = (salt: number) =>
    Tensor.f32(
      [S, nKv, d],
      Array.from({ length: S * nKv * d }, (_, e) => Math.sin(e * 0.37 + seed + salt)),
    );
  engine.kvAppend(cache, 0, rows(0), rows(1));
  const q = Tensor.f32(
    [1, nKv * g, d],
    Array.from({ length: nKv * g * d }, (_, e) => Math.cos(e * 0.21 + seed)),
  );
  return { cache, q, out: Tensor.zeros('f32', q.shape) };
}

const shape = fc.record({
  nKv: fc.integer({ min: 1, max: 2 }),
  g: fc.integer({ min: 1, max: 4 }),
  S: fc.integer({ min: 1, max: 150 }),
  seed: fc.integer({ min: 0, max: 1000 }),
});

forEachBackend('AttentionStats bytes', (engine) => {
  for (const c of CACHES) {
    const name = `${c.dtype} rows, kT ${c.kT ?? 'none'} (${c.layout})`;

    opIt(
      engine,
      'attentionDecode',
      `dense over ${name}: S rows of K and of V per KV head in the row type, q and y in f32`,
      () => {
        fc.assert(
          fc.property(shape, ({ nKv, g, S, seed }) => {
            const { cache, q, out } = filled(engine, c, nKv, g, S, seed);
            const stats = new AttentionStats();
            engine.attentionDecode(out, q, cache, { stats });
            expect(stats.kBytes).toBe(nKv * S * ROW_BYTES[c.dtype]);
            expect(stats.vBytes).toBe(nKv * S * ROW_BYTES[c.dtype]);
            expect(stats.ioBytes).toBe(4 * nKv * 2 * g * d);
            expect(stats.totalBytes).toBe(stats.kBytes + stats.vBytes + stats.ioBytes);
          }),
          { numRuns: fcRuns(10) },
        );
      },
    );

    opIt(
      engine,
      'sparqDecode',
      `SparQ over ${name}: S x r column elements, k' rows of K and of V, the f64 mean of V`,
      () => {
        fc.assert(
          fc.property(
            shape,
            fc.integer({ min: 1, max: d }),
            fc.integer({ min: 1, max: 40 }),
            ({ nKv, g, S, seed }, r, k) => {
              const { cache, q, out } = filled(engine, c, nKv, g, S, seed);
              const stats = new AttentionStats();
              engine.sparqDecode(out, q, cache, { r, k, l: 2 }, { stats });
              const kPrime = Math.min(k, S);
              // Step 1 reads r components of S keys: from K transposed, or gathered from the rows (single-k).
              const column = c.kT && c.layout === 'k-twice' ? KT_ELEMENT_BYTES[c.kT] : ROW_BYTES[c.dtype] / d;
              expect(stats.kBytes).toBeCloseTo(nKv * (S * r * column + kPrime * ROW_BYTES[c.dtype]), 6);
              expect(stats.vBytes).toBe(nKv * kPrime * ROW_BYTES[c.dtype]);
              expect(stats.auxBytes).toBe(nKv * 2 * d * 8); // vSum read and updated, f64
              expect(stats.ioBytes).toBe(4 * nKv * 2 * g * d);
            },
          ),
          { numRuns: fcRuns(10) },
        );
      },
    );
  }

  opIt(engine, 'h2oDecode', 'H2O over q4_0 rows: k rows of K and V, S f32 scores read and written', () => {
    const S = 90;
    const k = 24;
    const { cache, q, out } = filled(engine, CACHES[4], 1, 2, S, 3);
    const state = new H2OState(cache);
    const stats = new AttentionStats();
    engine.h2oDecode(out, q, cache, state, { k }, { stats });
    // Nothing is evicted before this step: all S positions are read, then the scores of S.
    expect(stats.kBytes).toBe(stats.kElements * (36 / 64));
    expect(stats.vBytes).toBe(stats.vElements * (36 / 64));
    expect(stats.auxBytes).toBe(4 * stats.auxElements);
    expect(stats.auxElements).toBeGreaterThan(0);
  });
});
