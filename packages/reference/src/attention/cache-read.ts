/**
 * Reading the KV cache as f32, whatever it stores (spec.md §4; layout in core's kv-cache.ts).
 *
 *   k, v  (batch, nKvHeads, capacity, k/vRowStride) rows at cache.kRowOffset / vRowOffset(b, h, pos):
 *         f32 values, f16 bits, or headDim / 32 ggml blocks (q8_0, q4_0) as bytes, K in
 *         cache.kDType and V in cache.vDType (the two may differ, as llama.cpp's -ctk / -ctv)
 *   kT    (batch, nKvHeads, headDim, columnStride) columns at cache.columnOffset(b, h, i):
 *         f32, f16, or integer codes with a scale per 64 positions (kt-codes.ts)
 *
 * Attention computes on the stored values decoded to f32: widening f16 is exact, and a block
 * decodes exactly as ggml's dequantize does (the `dequantize` op's code). The one exception is
 * q · k over q8_0 / q4_0 K rows, an integer product of the codes with the query rounded to Q8_0
 * blocks, as llama.cpp computes it (int8-key-scores.ts); V rows are always decoded.
 */
import { KT_BLOCK, f16ToF32, isBlockKV, isIntegerKT, type KVCache } from '@sparq/core';
import { dequantizeBytes } from '../ops/quantize.ts';
import { readCode } from './kt-codes.ts';

/** cache.k or cache.v (`side`) [at ..] -> out (headDim) f32: one row in its side's type, `at` from kRowOffset / vRowOffset. */
export function readRow(out: Float32Array, cache: KVCache, side: 'k' | 'v', at: number): void {
  const store = cache[side];
  const dtype = side === 'k' ? cache.kDType : cache.vDType;
  if (isBlockKV(dtype)) dequantizeBytes(dtype, out, 0, store as Uint8Array, at, cache.headDim);
  else if (dtype === 'f16') for (let i = 0; i < cache.headDim; i++) out[i] = f16ToF32(store[at + i]);
  else for (let i = 0; i < cache.headDim; i++) out[i] = store[at + i];
}

const oneRow = new Map<number, Float32Array>(); // scratch (headDim) per head dimension

/**
 * Component i of the key at position pos of (seq, kvh): from K transposed when the cache has it
 * (the column is contiguous over positions, SparQ's layout), else from the key row (the
 * 'single-k' layout: a strided gather, here by decoding the whole row).
 */
export function readKeyComponent(cache: KVCache, seq: number, kvh: number, i: number, pos: number): number {
  const col = cache.columnOffset(seq, kvh, i);
  const kT = cache.kTDType;
  if (kT === 'f32') return cache.kT![col + pos];
  if (kT === 'f16') return f16ToF32(cache.kT![col + pos]);
  if (isIntegerKT(kT)) {
    const scale = f16ToF32(cache.kTScale![cache.scaleOffset(seq, kvh, i) + Math.floor(pos / KT_BLOCK)]);
    return scale * readCode(kT, cache.kT as Uint8Array | Int8Array, col, pos);
  }
  let row = oneRow.get(cache.headDim);
  if (!row) oneRow.set(cache.headDim, (row = new Float32Array(cache.headDim)));
  readRow(row, cache, 'k', cache.kRowOffset(seq, kvh, pos));
  return row[i];
}

/** The valid positions [nPad, nPast) of sequence `seq`, ascending. */
export function validPositions(cache: KVCache, seq: number): Int32Array {
  const first = cache.nPad[seq];
  const positions = new Int32Array(cache.nValid(seq));
  // Left padding [0, nPad) is stored but never attended.
  for (let j = 0; j < positions.length; j++) positions[j] = first + j;
  return positions;
}
