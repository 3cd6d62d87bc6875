/**
 * The quantized KV cache layout (core kv-cache.ts): buffer sizes and kinds per row dtype and kT
 * type, bytes per position against the formula written out here, views and option round trips,
 * and the validation messages.
 */
import {
  KT_DTYPES,
  KV_DTYPES,
  KVCache,
  SparqRangeError,
  kvBytesPerPosition,
  kvCacheBytes,
  type KTDType,
  type KVDType,
} from '@sparq/core';
import { describe, expect, it } from 'vitest';

/** ggml's bytes per 32-value block, written out independently of core's table. */
const ROW_BYTES_PER_32: Record<KVDType, number> = { f32: 128, f16: 64, q8_0: 34, q4_0: 18 };
/** Code bits per position of each kT type (f16 scales per 64 positions come on top for integers). */
const KT_BITS: Record<KTDType, number> = { f32: 32, f16: 16, i8: 8, i4: 4, i2: 2 };

/** Every (row dtype, kT) pair the layout allows: f32 kT only over f32 rows. */
const PAIRS = KV_DTYPES.flatMap((dtype) =>
  KT_DTYPES.filter((kT) => kT !== 'f32' || dtype === 'f32').map((kT) => [dtype, kT] as const),
);

describe('KVCache layout', () => {
  it('gives Llama 3 8B (8 KV heads, headDim 128) the bytes per position of the design', () => {
    const shape = { nKvHeads: 8, headDim: 128, capacity: 1 };
    // llama.cpp: 8 heads * 2 rows * rowBytes.
    expect(kvBytesPerPosition({ ...shape, dtype: 'f16', layout: 'single-k' })).toBe(8 * 2 * 256);
    expect(kvBytesPerPosition({ ...shape, dtype: 'q8_0', layout: 'single-k' })).toBe(8 * 2 * 4 * 34);
    // f16 rows + i4 kT: 64 bytes of codes + 4 bytes of scales per head.
    expect(kvBytesPerPosition({ ...shape, dtype: 'f16', kTDType: 'i4' })).toBe(8 * (2 * 256 + 64 + 4));
    expect(kvBytesPerPosition({ ...shape, dtype: 'q4_0', kTDType: 'i2' })).toBe(8 * (2 * 72 + 32 + 4));
    expect(kvBytesPerPosition({ ...shape, dtype: 'f16' })).toBe(8 * 3 * 256); // today's f16 layout, 1.5x
  });

  it('allocates buffers of the documented kinds and sizes for every dtype and kT', () => {
    for (const [dtype, kTDType] of PAIRS) {
      for (const [batch, nKvHeads, headDim, capacity] of [
        [1, 1, 32, 1],
        [2, 3, 64, 65],
        [1, 2, 96, 130],
      ] as const) {
        const cache = new KVCache({ batch, nKvHeads, headDim, capacity, dtype, kTDType });
        const heads = batch * nKvHeads;
        expect(cache.k.byteLength).toBe((heads * capacity * headDim * ROW_BYTES_PER_32[dtype]) / 32);
        expect(cache.v.byteLength).toBe(cache.k.byteLength);
        expect(cache.kRowOffset(0, 0, 1) * cache.k.BYTES_PER_ELEMENT).toBe((headDim * ROW_BYTES_PER_32[dtype]) / 32);
        const blocks = Math.ceil(capacity / 64);
        const integer = kTDType.startsWith('i');
        // Integer columns span whole 64-position blocks.
        const columnBytes = integer ? (blocks * 64 * KT_BITS[kTDType]) / 8 : (capacity * KT_BITS[kTDType]) / 8;
        expect(cache.kT!.byteLength).toBe(heads * headDim * columnBytes);
        expect(cache.kTScale?.length ?? 0).toBe(integer ? heads * headDim * blocks : 0);
        expect(cache.kT).toBeInstanceOf(
          { f32: Float32Array, f16: Uint16Array, i8: Int8Array, i4: Uint8Array, i2: Uint8Array }[kTDType],
        );
        const extra = heads * headDim * 8 + batch * 8; // vSum f64, nPast and nPad i32
        expect(kvCacheBytes(cache.options)).toBe(cache.byteLength + extra);
        // Per position, without padding: the formula of the design.
        const perHead =
          (2 * headDim * ROW_BYTES_PER_32[dtype]) / 32 +
          (headDim * KT_BITS[kTDType]) / 8 +
          (integer ? (headDim * 2) / 64 : 0);
        expect(kvBytesPerPosition(cache.options)).toBe(nKvHeads * perHead);
      }
    }
  });

  it('K and V rows of different types: each buffer at its own type, bytes per position the sum, kT after K', () => {
    const shape = { nKvHeads: 8, headDim: 128, capacity: 1 };
    // llama.cpp's -ctk q8_0 -ctv q4_0 on Llama 3 8B: 8 heads * (4 * 34 + 4 * 18).
    expect(kvBytesPerPosition({ ...shape, dtype: { k: 'q8_0', v: 'q4_0' }, layout: 'single-k' })).toBe(8 * (136 + 72));
    // K transposed defaults to K's type's (q8_0: i4, 64 bytes of codes + 4 of scales per head).
    expect(kvBytesPerPosition({ ...shape, dtype: { k: 'q8_0', v: 'q4_0' } })).toBe(8 * (136 + 72 + 68));
    expect(kvBytesPerPosition({ ...shape, dtype: { k: 'q4_0', v: 'q8_0' } })).toBe(8 * (72 + 136 + 36));
    for (const k of KV_DTYPES) {
      for (const v of KV_DTYPES) {
        const [batch, nKvHeads, headDim, capacity] = [2, 3, 64, 65];
        const cache = new KVCache({ batch, nKvHeads, headDim, capacity, dtype: { k, v }, kTDType: 'i8' });
        const heads = batch * nKvHeads;
        expect([cache.kDType, cache.vDType]).toEqual([k, v]);
        expect(cache.k.byteLength).toBe((heads * capacity * headDim * ROW_BYTES_PER_32[k]) / 32);
        expect(cache.v.byteLength).toBe((heads * capacity * headDim * ROW_BYTES_PER_32[v]) / 32);
        expect(cache.vRowOffset(0, 0, 1) * cache.v.BYTES_PER_ELEMENT).toBe((headDim * ROW_BYTES_PER_32[v]) / 32);
        expect(kvCacheBytes(cache.options)).toBe(cache.byteLength + heads * headDim * 8 + batch * 8);
        const perHead = (headDim * (ROW_BYTES_PER_32[k] + ROW_BYTES_PER_32[v])) / 32 + headDim + (headDim * 2) / 64;
        expect(kvBytesPerPosition(cache.options)).toBe(nKvHeads * perHead);
        // One type is given back as one type; the options and buffers rebuild the cache, views slice each side.
        expect(cache.options.dtype).toEqual(k === v ? k : { k, v });
        expect(new KVCache(cache.options, cache.buffers).options).toEqual(cache.options);
        const view = cache.view(1, 2, 3);
        expect(view.v.byteOffset - cache.v.byteOffset).toBe(cache.vRowOffset(1, 2, 0) * cache.v.BYTES_PER_ELEMENT);
        expect(view.v.byteLength * 6).toBe(cache.v.byteLength);
      }
    }
  });

  it('rejects a bad K or V type naming its field, and a block type on either side whose head dim is not whole blocks', () => {
    const shape = { nKvHeads: 1, headDim: 8, capacity: 4 };
    expect(() => new KVCache({ ...shape, dtype: { k: 'f16', v: 'q5_0' as KVDType } })).toThrow(
      "KVCache: dtype.v q5_0, expected 'f32' | 'f16' | 'q8_0' | 'q4_0'",
    );
    expect(() => new KVCache({ ...shape, dtype: { k: 'f16', v: 'q4_0' } })).toThrow(
      "KVCache: headDim 8 with dtype.v 'q4_0', expected a multiple of 32",
    );
    expect(() => new KVCache({ ...shape, dtype: { k: 'q8_0', v: 'f16' } })).toThrow(
      "KVCache: headDim 8 with dtype.k 'q8_0', expected a multiple of 32",
    );
    expect(() => new KVCache({ ...shape, dtype: { k: 'f16', v: 'f32' }, kTDType: 'f32' })).toThrow(
      "KVCache: kTDType 'f32' with K rows 'f16'",
    );
  });

  it('defaults kT per row dtype, and has none for single-k', () => {
    const shape = { nKvHeads: 1, headDim: 32, capacity: 4 };
    expect(
      ['f32', 'f16', 'q8_0', 'q4_0'].map((dtype) => new KVCache({ ...shape, dtype: dtype as KVDType }).kTDType),
    ).toEqual(['f32', 'f16', 'i4', 'i2']);
    const single = new KVCache({ ...shape, dtype: 'q8_0', kTDType: 'i8', layout: 'single-k' });
    expect([single.kTDType, single.kT, single.kTScale]).toEqual([null, null, null]);
    expect(kvBytesPerPosition(single.options)).toBe(2 * 34);
  });

  it('round-trips options and buffers, and views share memory with the right slices', () => {
    for (const [dtype, kTDType] of PAIRS) {
      const cache = new KVCache({ batch: 2, nKvHeads: 3, headDim: 64, capacity: 70, dtype, kTDType });
      const again = new KVCache(cache.options, cache.buffers);
      expect(again.options).toEqual(cache.options);
      const view = cache.view(1, 1, 3);
      expect(view.options).toEqual({ ...cache.options, batch: 1, nKvHeads: 2 });
      // The view's first byte of each buffer is the cache's byte at (seq 1, head 1).
      const byteAt = (a: ArrayBufferView) => a.byteOffset;
      expect(byteAt(view.k) - byteAt(cache.k)).toBe(cache.kRowOffset(1, 1, 0) * cache.k.BYTES_PER_ELEMENT);
      expect(byteAt(view.kT!) - byteAt(cache.kT!)).toBe(cache.columnOffset(1, 1, 0) * cache.kT!.BYTES_PER_ELEMENT);
      if (cache.kTScale) expect(byteAt(view.kTScale!) - byteAt(cache.kTScale)).toBe(cache.scaleOffset(1, 1, 0) * 2);
      expect(view.k.byteLength * 3).toBe(cache.k.byteLength);
    }
  });

  it('rejects bad dtypes, kT types and head dimensions, naming the field and the valid values', () => {
    const shape = { nKvHeads: 1, headDim: 48, capacity: 4 };
    expect(() => new KVCache({ ...shape, dtype: 'q8_0' })).toThrow(SparqRangeError);
    expect(() => new KVCache({ ...shape, dtype: 'q4_0' })).toThrow(
      "KVCache: headDim 48 with dtype 'q4_0', expected a multiple of 32",
    );
    expect(() => kvBytesPerPosition({ ...shape, dtype: 'q8_0' })).toThrow(/headDim 48/);
    expect(() => new KVCache({ ...shape, dtype: 'q5_0' as KVDType })).toThrow(
      "KVCache: dtype q5_0, expected 'f32' | 'f16' | 'q8_0' | 'q4_0'",
    );
    expect(() => new KVCache({ ...shape, kTDType: 'i3' as KTDType })).toThrow(
      "KVCache: kTDType i3, expected 'f32' | 'f16' | 'i8' | 'i4' | 'i2'",
    );
    expect(() => new KVCache({ ...shape, dtype: 'f16', kTDType: 'f32' })).toThrow(
      "KVCache: kTDType 'f32' with K rows 'f16'",
    );
    const cache = new KVCache({ nKvHeads: 1, headDim: 32, capacity: 4, dtype: 'q8_0', kTDType: 'i4' });
    expect(() => new KVCache(cache.options, { ...cache.buffers, kTScale: null })).toThrow(
      'KVCache: buffer kTScale must be a Uint16Array of 32 elements',
    );
  });
});
