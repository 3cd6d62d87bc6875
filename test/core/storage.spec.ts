/**
 * Storage that changed after it was wrapped: an ArrayBuffer transferred
 * (detached) leaves typed arrays of length 0 behind. Validation catches it
 * before any backend reads (the reference would read undefined as NaN into
 * the cache, native would throw a bare TypeError), with the same error class
 * on every backend. A trace whose arrays do not match its fields likewise.
 */
import { Int4Matrix, KVCache, SparqRangeError, SparqTrace, Tensor, type Engine } from '@sparq/core';
import { describe, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';

/** Transfers `array`'s buffer away: array is left detached, length 0. */
function detach(array: { buffer: ArrayBufferLike }): void {
  structuredClone(array.buffer, { transfer: [array.buffer as ArrayBuffer] });
}

const detachedMessage = /holds 0 elements?|which holds 0.*detached/;

function cacheWithToken(engine: Engine): KVCache {
  const cache = new KVCache({ nKvHeads: 1, headDim: 4, capacity: 4 });
  engine.kvAppend(cache, 0, Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('f32', [1, 1, 4]));
  return cache;
}

forEachBackend('detached and mismatched storage', (engine) => {
  it('a detached input tensor: SparqRangeError naming it, nothing written', () => {
    const x = Tensor.f32([4], [1, 2, 3, 4]);
    const out = Tensor.zeros('f32', [4]);
    detach(x.data);
    expect(() => engine.rmsnorm(out, x, Tensor.f32([4], [1, 1, 1, 1]))).toThrow(SparqRangeError);
    expect(() => engine.rmsnorm(out, x, Tensor.f32([4], [1, 1, 1, 1]))).toThrow(
      /rmsnorm: x \[4\] needs elements \[0, 4\) of its storage, which holds 0 \(a detached/,
    );
    expect([...out.data]).toEqual([0, 0, 0, 0]);
  });

  it('a detached cache buffer, before append and decode', () => {
    const cache = cacheWithToken(engine);
    detach(cache.v);
    expect(() => engine.kvAppend(cache, 0, Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('f32', [1, 1, 4]))).toThrow(
      /kvAppend: cache\.v holds 0 elements, expected 16/,
    );
    expect(() => engine.attentionDecode(Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('f32', [1, 1, 4]), cache)).toThrow(
      SparqRangeError,
    );
  });

  it('detached INT4 scales', () => {
    const w = new Int4Matrix(2, 32);
    detach(w.scales);
    expect(() => engine.matvecInt4(Tensor.zeros('f32', [2]), w, Tensor.zeros('f32', [32]))).toThrow(
      /matvecInt4: w\.scales holds 0 elements, expected 2/,
    );
  });

  it('a SparqTrace whose arrays do not match its fields', () => {
    const cache = cacheWithToken(engine);
    const trace = new SparqTrace(1, 1, 1, 2, 2);
    const short = Object.assign(Object.create(SparqTrace.prototype) as SparqTrace, { ...trace, i2: new Int32Array(1) });
    expect(() =>
      engine.sparqDecode(
        Tensor.zeros('f32', [1, 1, 4]),
        Tensor.zeros('f32', [1, 1, 4]),
        cache,
        { r: 2, k: 2 },
        { trace: short },
      ),
    ).toThrow(/sparqDecode: trace\.i2 holds 1 elements?, expected 2/);
    detach(trace.alpha);
    expect(() =>
      engine.sparqDecode(
        Tensor.zeros('f32', [1, 1, 4]),
        Tensor.zeros('f32', [1, 1, 4]),
        cache,
        { r: 2, k: 2 },
        { trace },
      ),
    ).toThrow(detachedMessage);
  });
});

describe('detach helper', () => {
  it('really detaches', () => {
    const a = new Float32Array(4);
    detach(a);
    expect(a.length).toBe(0);
  });
});
