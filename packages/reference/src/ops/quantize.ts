/**
 * The `quantize` / `dequantize` ops for ggml's block formats (spec.md §5 and the GGUF types of model
 * hubs): f32 rows to blocks and back, byte-exact with ggml's reference code.
 *
 *   quantize:   x (..., n) f32           -> out (..., n) block dtype, n whole blocks
 *   dequantize: x (..., n) block dtype   -> out (..., n) f32
 *
 * Core has checked that both tensors are contiguous with equal shapes, and (tensor.ts) that a
 * block tensor's offset is a whole number of blocks. A contiguous tensor is one run of elements,
 * and every row is whole blocks, so we can walk blocks straight through without looking at rows:
 * block b covers elements [E b, E b + E) of the run (E = BLOCK_LAYOUT elements, 32 or 256), i.e.
 * bytes [b * blockBytes, ...) of the blocks. The per-format arithmetic is in one file per family.
 */
import { BLOCK_LAYOUT, type BlockDType, type Tensor } from '@sparq/core';
import type { BlockCodec } from './ggml-block.ts';
import { iq4_nl, iq4_xs } from './iq4.ts';
import { q2_k } from './q2-k.ts';
import { q3_k } from './q3-k.ts';
import { q6_k } from './q6-k.ts';
import { q8_0 } from './q8-0.ts';
import { q4_0, q5_0 } from './qx-0.ts';
import { q4_1, q5_1 } from './qx-1.ts';
import { q4_k, q5_k } from './qx-k.ts';

const CODECS: Readonly<Record<BlockDType, BlockCodec>> = {
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q8_0,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k,
  iq4_nl,
  iq4_xs,
};

/** The block dtypes this backend quantizes, dequantizes and multiplies: all of them. */
export const BLOCK_CODEC_DTYPES = Object.keys(CODECS) as readonly BlockDType[];

/** Elements per sub-block of a block dtype's integer view (16 or 32; ggml-block.ts BlockCodes). */
export function subBlockOf(dtype: BlockDType): number {
  return CODECS[dtype].subBlock;
}

/** Byte index in a block tensor's storage of its element `element` (a block boundary), counted from the tensor's offset. */
function byteIndex(t: Tensor<BlockDType>, element: number): number {
  // Offsets count elements; blocks are `elements` elements of `bytes` bytes each.
  const { elements, bytes } = BLOCK_LAYOUT[t.dtype];
  return ((t.offset + element) / elements) * bytes;
}

/** x (..., n) f32 -> out (..., n) blocks. */
export function quantize(out: Tensor<BlockDType>, x: Tensor<'f32'>): void {
  quantizeBytes(out.dtype, out.data, byteIndex(out, 0), x.data, x.offset, x.size);
}

/**
 * x[xAt .. xAt+count) f32 -> consecutive blocks of `dtype` from bytes[at] (count whole blocks):
 * the quantize op on raw storage, e.g. one row of a quantized KV cache.
 */
export function quantizeBytes(
  dtype: BlockDType,
  bytes: Uint8Array,
  at: number,
  x: Float32Array,
  xAt: number,
  count: number,
): void {
  // One block of consecutive elements at a time.
  eachBlock(dtype, at, count, (codec, e, blockAt) => codec.quantizeBlock(bytes, blockAt, x, xAt + e));
}

/** visit(codec, e, blockAt) for the blocks of `count` elements (whole blocks) of `dtype` stored from byte `at`: element e's block at blockAt. */
function eachBlock(
  dtype: BlockDType,
  at: number,
  count: number,
  visit: (codec: BlockCodec, e: number, blockAt: number) => void,
): void {
  const { elements, bytes } = BLOCK_LAYOUT[dtype];
  for (let e = 0; e < count; e += elements) visit(CODECS[dtype], e, at + (e / elements) * bytes);
}

/** Consecutive blocks of `dtype` from bytes[at] -> out[outAt .. outAt+count) f32 (count whole blocks). */
export function dequantizeBytes(
  dtype: BlockDType,
  out: Float32Array,
  outAt: number,
  bytes: Uint8Array,
  at: number,
  count: number,
): void {
  eachBlock(dtype, at, count, (codec, e, blockAt) => codec.dequantizeBlock(out, outAt + e, bytes, blockAt));
}

/** x (..., n) blocks -> out (..., n) f32. */
export function dequantize(out: Tensor<'f32'>, x: Tensor<BlockDType>): void {
  dequantizeRun(out.data, out.offset, x, 0, x.size);
}

/**
 * Decodes `count` elements (whole blocks) of block tensor `x`, starting at its element `first`
 * (counted from x's offset), into out[outAt .. outAt+count). matvec uses it to decode one weight row.
 */
export function dequantizeRun(
  out: Float32Array,
  outAt: number,
  x: Tensor<BlockDType>,
  first: number,
  count: number,
): void {
  dequantizeBytes(x.dtype, out, outAt, x.data, byteIndex(x, first), count);
}

/**
 * The integer view (ggml-block.ts BlockCodes) of `count` elements (whole blocks) of block tensor
 * `x` from its element `first`: codes[0 .. count), and scales, mins [0 .. count / subBlockOf(dtype))
 * in sub-block order. The 'int8' product reads one weight row this way.
 */
export function blockCodesRun(
  codes: Int32Array,
  scales: Float32Array,
  mins: Float32Array,
  x: Tensor<BlockDType>,
  first: number,
  count: number,
): void {
  blockCodesBytes(x.dtype, codes, scales, mins, x.data, byteIndex(x, first), count);
}

/**
 * The same integer view of `count` elements (whole blocks) of `dtype` stored from bytes[at]: the
 * attention's integer key scores read one quantized K row this way (int8-key-scores.ts).
 */
export function blockCodesBytes(
  dtype: BlockDType,
  codes: Int32Array,
  scales: Float32Array,
  mins: Float32Array,
  bytes: Uint8Array,
  at: number,
  count: number,
): void {
  const block = blockScratch(dtype);
  eachBlock(dtype, at, count, (codec, e, blockAt) => {
    codec.blockCodes(block.codes, block.scales, block.mins, bytes, blockAt);
    const s = e / codec.subBlock; // the block's first sub-block
    codes.set(block.codes, e);
    scales.set(block.scales, s);
    mins.set(block.mins, s);
  });
}

/** One block's integer view per dtype, reused by every call (no allocation per block). */
const scratch = new Map<BlockDType, { codes: Int32Array; scales: Float32Array; mins: Float32Array }>();
function blockScratch(dtype: BlockDType) {
  let s = scratch.get(dtype);
  if (!s) {
    const { elements } = BLOCK_LAYOUT[dtype];
    const subBlocks = elements / CODECS[dtype].subBlock;
    s = { codes: new Int32Array(elements), scales: new Float32Array(subBlocks), mins: new Float32Array(subBlocks) };
    scratch.set(dtype, s);
  }
  return s;
}
