/**
 * kvAppend (SPEC 4): write N new tokens into the pre-allocated cache, in place.
 *
 *   k, v (N, nKvHeads, headDim) f32  ->  positions nPast .. nPast + N - 1 of sequence `seq`
 *
 * For each token and KV head it writes the key row, the key column entries (K
 * transposed, 'k-twice' layout only) and the value row, converting to the cache
 * dtype (f16 rounds to nearest even via f32ToF16). The running sum vSum (f64)
 * gains every valid value row (position >= nPad), taken *after* rounding, so
 * vSum / nValid is exactly the mean of what attention will read (SPEC 2's vMean).
 * Core has checked shapes and capacity, so nothing here can fail half-way.
 */
import { f32ToF16, type KVCache, type KVStorage, type Tensor } from '@sparq/core';
import { readElement } from './cache-read.ts';

/** Stores `value` at store[at] in the cache's dtype. */
function store(cache: KVCache, buffer: KVStorage, at: number, value: number): void {
  // A Float32Array rounds to f32 on store; f16 is kept as its bits.
  buffer[at] = cache.dtype === 'f16' ? f32ToF16(value) : value;
}

export function kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void {
  const [n, nKv, d] = k.shape;
  const start = cache.nPast[seq];
  // Each new token t lands at position start + t.
  for (let t = 0; t < n; t++) {
    const pos = start + t;
    // Each KV head has its own rows, columns and running sum.
    for (let h = 0; h < nKv; h++) {
      const src = (t * nKv + h) * d; // (N, nKvHeads, headDim) row-major
      const row = cache.rowOffset(seq, h, pos);
      const sum = (seq * nKv + h) * d; // vSum (batch, nKvHeads, headDim)
      // One component at a time: row, column (if stored), value, running sum.
      for (let i = 0; i < d; i++) {
        store(cache, cache.k, row + i, k.data[k.offset + src + i]);
        if (cache.kT) store(cache, cache.kT, cache.columnOffset(seq, h, i) + pos, k.data[k.offset + src + i]);
        store(cache, cache.v, row + i, v.data[v.offset + src + i]);
        // Padding is stored but masked, so it never enters the mean.
        if (pos >= cache.nPad[seq]) cache.vSum[sum + i] += readElement(cache, cache.v, row + i);
      }
    }
  }
  cache.nPast[seq] = start + n;
}
