/**
 * adviseHugePages: the native memory advisor core's allocBuffer calls. It
 * advises exactly the whole 2 MiB pages inside a typed array, leaves the bytes
 * as they were, returns 0 where nothing fits, and refuses what is not a
 * typed array with a JS error. Loading the addon installs it as core's advisor.
 */
import { ADVISE_MIN_BYTES, KVCache, allocBuffer, setMemoryAdvisor } from '@sparq/core';
import { describe, expect, it } from 'vitest';
import { addon, missing } from '../support/addon.ts';

const HUGE_PAGE = 2 << 20;

describe.skipIf(!addon)(`adviseHugePages${addon ? '' : ` (skipped: ${missing})`}`, () => {
  const advise = (bytes: Uint8Array) => addon!.adviseHugePages(bytes);

  it.runIf(process.platform === 'linux')('advises the whole huge pages inside the array, and keeps its bytes', () => {
    const bytes = new Uint8Array(allocBuffer(16 << 20));
    for (let i = 0; i < bytes.length; i += 4096) bytes[i] = i % 251;
    const advised = advise(bytes);
    // 16 MiB starting anywhere holds 7 or 8 aligned 2 MiB pages (8 only when it starts on a boundary).
    expect(advised % HUGE_PAGE).toBe(0);
    expect(advised).toBeGreaterThanOrEqual(7 * HUGE_PAGE);
    expect(advised).toBeLessThanOrEqual(8 * HUGE_PAGE);
    for (let i = 0; i < bytes.length; i += 4096) expect(bytes[i]).toBe(i % 251);
  });

  it('returns 0 for an array too small to hold an aligned huge page', () => {
    expect(advise(new Uint8Array(HUGE_PAGE - 1))).toBe(0);
    expect(advise(new Uint8Array(0))).toBe(0);
  });

  it('takes views of SharedArrayBuffers', () => {
    const advised = advise(new Uint8Array(new SharedArrayBuffer(8 << 20)));
    expect(advised % HUGE_PAGE).toBe(0);
  });

  it('refuses what is not a Uint8Array with a TypeError', () => {
    const call = addon!.adviseHugePages as unknown as (x: unknown) => number;
    expect(() => call({})).toThrow(TypeError);
    expect(() => call(new Float32Array(4))).toThrow(/adviseHugePages: bytes must be a Uint8Array/);
  });

  it('lineOffset: the bytes to the first 64-byte-aligned address, one view at a time through a cache line', () => {
    const buffer = new ArrayBuffer(256);
    const first = addon!.lineOffset(new Uint8Array(buffer));
    expect(first).toBeGreaterThanOrEqual(0);
    expect(first).toBeLessThan(64);
    // A view i bytes further in is i bytes closer to that boundary (mod 64): exactly one view of 64 is aligned.
    for (let i = 0; i < 64; i++) expect(addon!.lineOffset(new Uint8Array(buffer, i))).toBe((first - i + 64) % 64);
  });

  it('KV caches start on a cache line once the addon is loaded (core allocAligned)', () => {
    const cache = new KVCache({ nKvHeads: 2, headDim: 128, capacity: 8192, dtype: 'f16' }); // 4 MiB per buffer: advised
    for (const a of [cache.k, cache.kT!, cache.v])
      expect(addon!.lineOffset(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))).toBe(0);
  });

  it("is installed as core's advisor when the addon loads", () => {
    const seen: number[] = [];
    const native = setMemoryAdvisor((buffer) => seen.push(buffer.byteLength));
    try {
      expect(native).not.toBeNull();
      allocBuffer(ADVISE_MIN_BYTES);
      expect(seen).toEqual([ADVISE_MIN_BYTES]);
    } finally {
      setMemoryAdvisor(native);
    }
  });
});
