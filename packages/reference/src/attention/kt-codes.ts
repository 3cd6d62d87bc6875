/**
 * The integer copy of K transposed (kTDType 'i8' | 'i4' | 'i2'): what SparQ step 1 reads to rank
 * positions. Layout in core's kv-cache.ts; the numbers are defined here.
 *
 *   kT      (batch, nKvHeads, headDim, columnStride)  b-bit codes c in [-qmax, qmax], qmax = 2^(b-1) - 1
 *   kTScale (batch, nKvHeads, headDim, kTBlocks)      f16 scale d per block of KT_BLOCK = 64 positions
 *   component i at position p  ~  d[p >> 6] * c[p]   (exact in f32: an 11-bit significand times <= 8 bits)
 *
 * A block's scale and codes are a pure function of the stored K rows of its positions
 * [start, min(start + 64, nPast)), decoded to f32 (what dense attention reads):
 *   amax = max |k|;  d = f16(amax / qmax);  c = clamp(roundHalfAway(k / d), -qmax, qmax)
 * - amax / qmax is an f32 division (computed in f64 and rounded once, which is the same number:
 *   f64 holds more than twice f32's significand, so the double rounding cannot differ).
 * - k / d is taken in f64 (double in C++) and rounded halves away from zero (C's round), so the
 *   reference and native get the same codes bit for bit.
 * - d rounds to f16, possibly below amax / qmax, so |k / d| may exceed qmax by a little: the clamp.
 * - d = 0 (an all-zero block, or amax below f16's smallest subnormal) gives every code 0.
 * Every code of a re-derived block is written: positions at or past nPast get code 0, so the
 * stored bytes do not depend on the order or chunking of appends.
 */
import { KT_BLOCK, KT_INT_BITS, f16ToF32, f32ToF16, type KVCache } from '@sparq/core';
import { clamp, roundHalfAway } from '../ops/round.ts';

type IntegerKT = 'i8' | 'i4' | 'i2';

/** Code of position p of the column at byte `col` (columnOffset), as a signed integer. */
export function readCode(kT: IntegerKT, column: Uint8Array | Int8Array, col: number, p: number): number {
  if (kT === 'i8') return column[col + p];
  // Packed codes are stored with an offset of qmax so they are never negative.
  if (kT === 'i4') return ((column[col + (p >> 1)] >> ((p & 1) * 4)) & 0xf) - 7;
  return ((column[col + (p >> 2)] >> ((p & 3) * 2)) & 0x3) - 1;
}

/** Stores `code` for position p of the column at byte `col`, leaving the other codes of its byte alone. */
function writeCode(kT: IntegerKT, column: Uint8Array | Int8Array, col: number, p: number, code: number): void {
  if (kT === 'i8') {
    column[col + p] = code;
    return;
  }
  const bits = KT_INT_BITS[kT];
  const perByte = 8 / bits;
  const shift = (p % perByte) * bits;
  const mask = ((1 << bits) - 1) << shift;
  const at = col + Math.floor(p / perByte);
  column[at] = (column[at] & ~mask) | ((code + (1 << (bits - 1)) - 1) << shift);
}

/**
 * Re-derives block `block` (positions [64 block, 64 block + 64)) of every component of KV head
 * `kvh` of sequence `seq` from `rows` (n, headDim): the decoded K rows of the block's stored
 * positions, n = min(64, nPast - 64 block).
 */
export function quantizeKTBlock(
  cache: KVCache,
  seq: number,
  kvh: number,
  block: number,
  rows: Float32Array,
  n: number,
): void {
  const kT = cache.kTDType as IntegerKT;
  const column = cache.kT as Uint8Array | Int8Array;
  const scales = cache.kTScale!;
  const d = cache.headDim;
  const qmax = 2 ** (KT_INT_BITS[kT] - 1) - 1;
  const first = block * KT_BLOCK;
  // One component (a row of K transposed) at a time: its own scale.
  for (let i = 0; i < d; i++) {
    let amax = 0;
    for (let t = 0; t < n; t++) amax = Math.max(amax, Math.abs(rows[t * d + i]));
    const scaleBits = f32ToF16(amax / qmax);
    const scale = f16ToF32(scaleBits);
    scales[cache.scaleOffset(seq, kvh, i) + block] = scaleBits;
    const col = cache.columnOffset(seq, kvh, i);
    for (let t = 0; t < KT_BLOCK; t++) {
      const code = t < n && scale !== 0 ? clamp(roundHalfAway(rows[t * d + i] / scale), -qmax, qmax) : 0;
      writeCode(kT, column, col, first + t, code);
    }
  }
}
