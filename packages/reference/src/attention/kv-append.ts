/**
 * kvAppend (spec.md §4): write N new tokens into the pre-allocated cache, in place.
 *
 *   k, v (N, nKvHeads, headDim) f32  ->  positions nPast .. nPast + N - 1 of sequence `seq`
 *
 * 1. Rows: each key row is stored in the cache's kDType, each value row in its vDType: f32; f16 rounded to nearest
 *    even (f32ToF16); q8_0 / q4_0 as ggml blocks by the `quantize` op's code (byte-exact with
 *    llama.cpp's cache).
 * 2. vSum (f64) gains every valid value row (position >= nPad) as decoded from storage, so
 *    vSum / nValid is exactly the mean of what attention will read (spec.md §2's vMean).
 * 3. K transposed ('k-twice' only) is derived from the *stored* key rows, decoded: f32 / f16
 *    columns take each new position's value; integer columns (kt-codes.ts) re-derive every
 *    64-position block the append touched from all stored rows of that block, so the result
 *    does not depend on how the tokens were split into appends.
 * Core has checked shapes and capacity, so nothing here can fail half-way.
 */
import { KT_BLOCK, f32ToF16, isBlockKV, isIntegerKT, type KVCache, type Tensor } from '@sparq/core';
import { quantizeBytes } from '../ops/quantize.ts';
import { readRow } from './cache-read.ts';
import { quantizeKTBlock } from './kt-codes.ts';

/** src[srcAt .. srcAt + headDim) f32 -> one row of cache.k or cache.v (`side`) at `at`, in its side's type. */
function writeRow(cache: KVCache, side: 'k' | 'v', at: number, src: Float32Array, srcAt: number): void {
  const d = cache.headDim;
  const store = cache[side];
  const dtype = side === 'k' ? cache.kDType : cache.vDType;
  if (isBlockKV(dtype)) quantizeBytes(dtype, store as Uint8Array, at, src, srcAt, d);
  // f16 keeps its bits; a Float32Array rounds to f32 on store.
  else if (dtype === 'f16') for (let i = 0; i < d; i++) store[at + i] = f32ToF16(src[srcAt + i]);
  else for (let i = 0; i < d; i++) store[at + i] = src[srcAt + i];
}

export function kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void {
  const [n, nKv, d] = k.shape;
  const start = cache.nPast[seq];
  const end = start + n;
  const row = new Float32Array(d); // (d) one stored row, decoded
  // Each new token t lands at position start + t; each KV head has its own rows, columns and sum.
  for (let t = 0; t < n; t++) {
    const pos = start + t;
    for (let h = 0; h < nKv; h++) {
      const src = (t * nKv + h) * d; // (N, nKvHeads, headDim) row-major
      const kAt = cache.kRowOffset(seq, h, pos);
      const vAt = cache.vRowOffset(seq, h, pos);
      writeRow(cache, 'k', kAt, k.data, k.offset + src);
      writeRow(cache, 'v', vAt, v.data, v.offset + src);
      // Padding is stored but masked, so it never enters the mean.
      if (pos >= cache.nPad[seq]) {
        readRow(row, cache, 'v', vAt);
        const sum = (seq * nKv + h) * d; // vSum (batch, nKvHeads, headDim)
        for (let i = 0; i < d; i++) cache.vSum[sum + i] += row[i];
      }
      if (cache.kTDType === 'f32' || cache.kTDType === 'f16') {
        readRow(row, cache, 'k', kAt);
        for (let i = 0; i < d; i++)
          cache.kT![cache.columnOffset(seq, h, i) + pos] = cache.kTDType === 'f16' ? f32ToF16(row[i]) : row[i];
      }
    }
  }
  if (isIntegerKT(cache.kTDType)) {
    const rows = new Float32Array(KT_BLOCK * d); // (64, d) the stored rows of one block, decoded
    // Every block holding a new position, from all its stored positions so far.
    for (let block = Math.floor(start / KT_BLOCK); block * KT_BLOCK < end; block++) {
      const first = block * KT_BLOCK;
      const count = Math.min(KT_BLOCK, end - first);
      for (let h = 0; h < nKv; h++) {
        for (let t = 0; t < count; t++)
          readRow(rows.subarray(t * d, (t + 1) * d), cache, 'k', cache.kRowOffset(seq, h, first + t));
        quantizeKTBlock(cache, seq, h, block, rows, count);
      }
    }
  }
  cache.nPast[seq] = end;
}
