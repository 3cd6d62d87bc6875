/**
 * Reading the KV cache as f32, whatever it stores (SPEC 4).
 *
 * The cache keeps K and V as f32 or as f16 bits (Uint16Array). Attention always
 * computes on the stored values widened to f32 (exact: every half is a float),
 * so an f16 cache differs from an f32 one only by the rounding done at append.
 *
 *   k, v  (batch, nKvHeads, capacity, headDim)   rows, at cache.rowOffset(b, h, pos)
 *   kT    (batch, nKvHeads, headDim, capacity)   columns, at cache.columnOffset(b, h, i)
 */
import { f16ToF32, type KVCache, type KVStorage } from '@sparq/core';

/** The stored element `store[at]` of the cache, as an f32 value. */
export function readElement(cache: KVCache, store: KVStorage, at: number): number {
  return cache.dtype === 'f16' ? f16ToF32(store[at]) : store[at];
}

/** store[at .. at + headDim) -> out (headDim) f32: one K or V row. */
export function readRow(out: Float32Array, cache: KVCache, store: KVStorage, at: number): void {
  for (let i = 0; i < cache.headDim; i++) out[i] = readElement(cache, store, at + i);
}

/**
 * Component i of the key at position pos of (seq, kvh): from K transposed when
 * the cache has it (the column is contiguous over positions, SparQ's layout),
 * else from the key row (the 'single-k' layout: a strided gather).
 */
export function readKeyComponent(cache: KVCache, seq: number, kvh: number, i: number, pos: number): number {
  if (cache.kT) return readElement(cache, cache.kT, cache.columnOffset(seq, kvh, i) + pos);
  return readElement(cache, cache.k, cache.rowOffset(seq, kvh, pos) + i);
}

/** The valid positions [nPad, nPast) of sequence `seq`, ascending. */
export function validPositions(cache: KVCache, seq: number): Int32Array {
  const first = cache.nPad[seq];
  const positions = new Int32Array(cache.nValid(seq));
  // Left padding [0, nPad) is stored but never attended.
  for (let j = 0; j < positions.length; j++) positions[j] = first + j;
  return positions;
}
