/**
 * Sessions on every KV row type (issue 24): the caches take the KV type and the session's default
 * K transposed (DEFAULT_SESSION_KT), decode runs on each backend, and the byte counts follow from
 * the model's shape. A random model with head dim 128 (two heads of a 256-wide layer) takes
 * q8_0 / q4_0 rows; the numbers of each type are the conformance suite's (test/conformance).
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_SESSION_KT, Session, buildModel, randomLlama, syncMirror, type AttentionConfig } from '@sparq/llm';
import { KVCache, Tensor, type KVDType, type KVTypeChoice } from '@sparq/core';
import { engines } from '../support/backends.ts';

const SPARQ: AttentionConfig = { method: 'sparq', r: 16, k: 8, l: 2, reallocate: true };
const { loaded } = randomLlama({ dim: 256, hiddenDim: 256, nLayers: 2, nHeads: 2, nKvHeads: 1, seqLen: 80 });
const prompt = Array.from({ length: 70 }, (_, i) => 3 + ((i * 37) % 250));
/** Bytes of one 128-value row: f32, f16, 4 q8_0 blocks of 34, 4 q4_0 blocks of 18. */
const ROW_BYTES: Record<KVDType, number> = { f32: 512, f16: 256, q8_0: 136, q4_0: 72 };
/** Bytes of K transposed per position of one 128-value head, scales included (one f16 per 64 positions). */
const KT_BYTES = { f32: 512, f16: 256, i8: 128 + 4, i4: 64 + 4, i2: 32 + 4 } as const;

describe.each(engines.map((e) => [e.name, e] as const))('sessions on each KV type [%s]', (_, engine) => {
  const model = buildModel(engine, loaded);
  it.each(['f32', 'f16', 'q8_0', 'q4_0'] as const)(
    '%s: default kT, finite SparQ decode past one 64-position block, KV bytes',
    (kv) => {
      const session = new Session(engine, model, { capacity: 72, maxPrefill: 32, attention: SPARQ, kvDType: kv });
      session.prefill(prompt);
      const logits = session.decode(5);
      expect(logits.every(Number.isFinite)).toBe(true);
      const kT = DEFAULT_SESSION_KT[kv];
      expect(session.caches.map((c) => [c.options.dtype, c.kTDType])).toEqual([
        [kv, kT],
        [kv, kT],
      ]);
      // 2 layers x 1 KV head: two rows and K transposed per position.
      expect(session.kvBytesPerPosition).toBe(2 * (2 * ROW_BYTES[kv] + KT_BYTES[kT]));
      // The cache holds 72 positions of rows; integer K transposed spans two whole 64-position blocks.
      const bits = { i8: 8, i4: 4, i2: 2 }[kT as 'i8' | 'i4' | 'i2'];
      // Per component: 128 positions of codes and 2 f16 scales.
      const kTHeld = bits ? 128 * ((128 * bits) / 8 + 2 * 2) : 72 * KT_BYTES[kT];
      expect(session.kvBytes).toBe(2 * (2 * 72 * ROW_BYTES[kv] + kTHeld));
    },
  );
});

describe.each(engines.map((e) => [e.name, e] as const))('K and V rows of different types [%s]', (_, engine) => {
  const model = buildModel(engine, loaded);
  const run = (kv: KVTypeChoice) => {
    const session = new Session(engine, model, { contextSize: 72, prefillChunk: 32, attention: SPARQ, kv });
    session.prefill(prompt);
    return { session, logits: session.decode(5) };
  };
  it.each([
    ['q8_0', 'q4_0'],
    ['q4_0', 'q8_0'],
  ] as const)('K %s, V %s: each side holds the bytes a one-type cache of its type holds; kT follows K', (k, v) => {
    const { session, logits } = run({ k, v });
    expect(logits.every(Number.isFinite)).toBe(true);
    const cache = session.caches[0];
    expect([cache.kDType, cache.vDType, cache.kTDType]).toEqual([k, v, DEFAULT_SESSION_KT[k]]);
    // The same prompt through caches of one type: layer 0's rows come from the embeddings alone,
    // so its K rows (and K transposed) equal the K type's cache byte for byte, its V rows and
    // their running sum the V type's. (Later layers' inputs carry the cache types' rounding.)
    const asK = run(k).session.caches[0];
    const asV = run(v).session.caches[0];
    expect(cache.k).toEqual(asK.k);
    expect(cache.kT).toEqual(asK.kT);
    expect(cache.v).toEqual(asV.v);
    expect(cache.vSum).toEqual(asV.vSum);
    // Bytes per position: a K row of K's type, a V row of V's, K transposed of K's default kT (2 layers x 1 KV head).
    expect(session.kvBytesPerPosition).toBe(2 * (ROW_BYTES[k] + ROW_BYTES[v] + KT_BYTES[DEFAULT_SESSION_KT[k]]));
  });

  it('dense decode reads K rows at K bytes and V rows at V bytes (q8_0 / q4_0, S = 71)', () => {
    const session = new Session(engine, model, {
      contextSize: 72,
      prefillChunk: 32,
      attention: { ...SPARQ, method: 'dense' },
      kv: { k: 'q8_0', v: 'q4_0' },
    });
    session.prefill(prompt);
    session.decode(5); // S = 71
    // Per layer: 71 K rows of 136 bytes, 71 V rows of 72; q and y (2 heads x 128 f32 each).
    expect(session.stats.kBytes).toBe(2 * 71 * 136);
    expect(session.stats.vBytes).toBe(2 * 71 * 72);
    expect(session.denseBytes).toBe(2 * (71 * (136 + 72) + 2 * 128 * 4));
  });
});

describe.each(engines.map((e) => [e.name, e] as const))('decode statistics in bytes [%s]', (_, engine) => {
  const model = buildModel(engine, loaded);
  it('SparQ over q4_0 rows with i2 kT: bytes read against what dense reads from the same cache', () => {
    const session = new Session(engine, model, { capacity: 72, maxPrefill: 32, attention: SPARQ, kvDType: 'q4_0' });
    session.prefill(prompt);
    session.decode(5); // S = 71
    // Per layer (one KV head, 2 query heads, d 128): 71 x 16 i2 codes (1/4 byte + 2/64 for the
    // scales) and 8 rows of K; 8 rows of V; vSum read and updated (2 x 128 f64); q and y (2 x 2 x 128 f32).
    const perLayer = 71 * 16 * (0.25 + 2 / 64) + 8 * 72 + 8 * 72 + 2 * 128 * 8 + 2 * 2 * 128 * 4;
    expect(session.stats.totalBytes).toBe(2 * perLayer);
    // Dense: 71 rows of K and of V, spec.md §3's 2d for q and y, in f32.
    expect(session.denseBytes).toBe(2 * (2 * 71 * 72 + 2 * 128 * 4));
  });
});

describe.each(engines.map((e) => [e.name, e] as const))('syncMirror [%s]', (_, engine) => {
  it.each(['f16', 'q8_0', 'q4_0'] as const)(
    '%s: a mirror of the same type holds the same bytes (rows decoded and stored again)',
    (kv) => {
      const options = { nKvHeads: 2, headDim: 64, capacity: 80, dtype: kv, kTDType: DEFAULT_SESSION_KT[kv] };
      const cache = new KVCache(options);
      const mirror = new KVCache(options);
      const rows = (n: number, salt: number) =>
        Tensor.f32(
          [n, 2, 64],
          Array.from({ length: n * 128 }, (_, e) => 3 * Math.sin(e * 0.7 + salt) * (e % 64 === 5 ? 9 : 1)),
        );
      engine.kvAppend(cache, 0, rows(50, 1), rows(50, 2));
      syncMirror(engine, cache, mirror, () => {});
      engine.kvAppend(cache, 0, rows(17, 3), rows(17, 4)); // a second sync appends only the new rows
      syncMirror(engine, cache, mirror, () => {});
      expect(mirror.nPast[0]).toBe(67);
      expect(mirror.k).toEqual(cache.k);
      expect(mirror.v).toEqual(cache.v);
      expect(mirror.kT).toEqual(cache.kT);
      expect(mirror.vSum).toEqual(cache.vSum);
    },
  );
});
