/**
 * Large engine buffers go through allocBuffer, which hands each one to the
 * registered memory advisor (the native addon's huge-page request) before
 * anything touches it, and leaves small ones alone.
 */
import {
  ADVISE_MIN_BYTES,
  CACHE_LINE,
  Int4Matrix,
  KVCache,
  SparqRangeError,
  Tensor,
  allocAligned,
  allocBuffer,
  setMemoryAdvisor,
} from '@sparq/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

describe('allocBuffer and the memory advisor', () => {
  let advised: ArrayBufferLike[] = [];
  let previous: ReturnType<typeof setMemoryAdvisor> = null;
  beforeEach(() => {
    advised = [];
    previous = setMemoryAdvisor((buffer) => {
      // The advisor sees the buffer before anything wrote to it.
      expect(new Uint8Array(buffer).every((b) => b === 0)).toBe(true);
      advised.push(buffer);
    });
  });
  afterEach(() => setMemoryAdvisor(previous));

  it('advises buffers of at least ADVISE_MIN_BYTES, once each, and no smaller ones', () => {
    const big = allocBuffer(ADVISE_MIN_BYTES);
    const small = allocBuffer(ADVISE_MIN_BYTES - 1);
    expect(big.byteLength).toBe(ADVISE_MIN_BYTES);
    expect(small.byteLength).toBe(ADVISE_MIN_BYTES - 1);
    expect(advised).toEqual([big]);
  });

  it('gives SharedArrayBuffers when shared, advised alike', () => {
    const shared = allocBuffer(ADVISE_MIN_BYTES, true);
    expect(shared).toBeInstanceOf(SharedArrayBuffer);
    expect(advised).toEqual([shared]);
  });

  it("routes the KV cache's, tensors' and Int4Matrix's large storage through it", () => {
    const cache = new KVCache({ nKvHeads: 4, headDim: 128, capacity: 4096 }); // 8 MiB per K / K^T / V buffer
    expect(advised).toEqual([cache.k.buffer, cache.kT!.buffer, cache.v.buffer]);
    advised = [];
    const t = Tensor.zeros('f32', [1024, 1024]);
    expect(advised).toEqual([t.data.buffer]);
    advised = [];
    const w = new Int4Matrix(4096, 4096);
    expect(advised).toEqual([w.packed.buffer]); // 8 MiB of nibbles; its scales and zeros are smaller
  });

  it('names what could not be allocated', () => {
    expect(() => allocBuffer(2 ** 52, false, 'KVCache')).toThrow(SparqRangeError);
    expect(() => allocBuffer(2 ** 52, false, 'KVCache')).toThrow(
      /^KVCache: 4503599627370496 bytes cannot be allocated/,
    );
    expect(advised).toEqual([]);
  });

  it("allocAligned: the advisor's cache-line offset, CACHE_LINE bytes of room; 0 when it tells none or an unusable one", () => {
    for (const [told, offset] of [
      [48, 48],
      [0, 0],
      [undefined, 0],
      [12, 0],
      [CACHE_LINE, 0],
      [-16, 0],
      [8.5, 0],
    ] as const) {
      setMemoryAdvisor(() => told);
      const got = allocAligned(ADVISE_MIN_BYTES, false, 'test');
      expect(got.offset).toBe(offset);
      expect(got.buffer.byteLength).toBe(ADVISE_MIN_BYTES + CACHE_LINE);
    }
    // Small buffers are never advised, so their offset is 0.
    setMemoryAdvisor(() => 48);
    expect(allocAligned(1024).offset).toBe(0);
  });

  it("the KV cache's K, K^T and V start at the advisor's offset and hold exactly their elements", () => {
    setMemoryAdvisor(() => 48);
    for (const dtype of ['f32', 'f16'] as const) {
      const cache = new KVCache({ nKvHeads: 4, headDim: 128, capacity: 4096, dtype });
      for (const a of [cache.k, cache.kT!, cache.v]) {
        expect(a.byteOffset).toBe(48);
        expect(a.length).toBe(4 * 4096 * 128);
      }
    }
  });

  it('without an advisor, buffers are plain', () => {
    setMemoryAdvisor(null);
    expect(allocBuffer(ADVISE_MIN_BYTES).byteLength).toBe(ADVISE_MIN_BYTES);
    expect(advised).toEqual([]);
  });
});
