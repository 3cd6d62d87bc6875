/**
 * The `quantize` / `dequantize` ops for ggml's block formats (SPEC 5): f32 rows to Q4_0, Q4_1 or
 * Q8_0 blocks and back, byte-exact with ggml's reference code.
 *
 *   quantize:   x (..., n) f32          -> out (..., n) q4_0 | q4_1 | q8_0, n a multiple of 32
 *   dequantize: x (..., n) q4_0 | ...   -> out (..., n) f32
 *
 * Core has checked that both tensors are contiguous with equal shapes, and (tensor.ts) that a
 * block tensor's offset is a whole number of blocks. A contiguous tensor is one run of elements,
 * and every row is whole blocks, so we can walk blocks straight through without looking at rows:
 * block b covers elements [32b, 32b + 32) of the run, i.e. bytes [b * blockBytes, ...) of the blocks.
 * The per-format arithmetic is in q4-0.ts, q4-1.ts and q8-0.ts.
 */
import { BLOCK_LAYOUT, type BlockDType, type Tensor } from '@sparq/core';
import { BLOCK, type BlockCodec } from './ggml-block.ts';
import { q4_0 } from './q4-0.ts';
import { q4_1 } from './q4-1.ts';
import { q8_0 } from './q8-0.ts';

const CODECS: Readonly<Record<BlockDType, BlockCodec>> = { q4_0, q4_1, q8_0 };

/** Byte index in a block tensor's storage of its element `element` (a block boundary), counted from the tensor's offset. */
function byteIndex(t: Tensor<BlockDType>, element: number): number {
  // Offsets count elements; blocks are 32 elements of BLOCK_LAYOUT bytes each.
  return ((t.offset + element) / BLOCK) * BLOCK_LAYOUT[t.dtype].bytes;
}

/** x (..., n) f32 -> out (..., n) blocks. */
export function quantize(out: Tensor<BlockDType>, x: Tensor<'f32'>): void {
  const codec = CODECS[out.dtype];
  const blocks = x.size / BLOCK;
  // One block of 32 consecutive elements at a time.
  for (let b = 0; b < blocks; b++) {
    codec.quantizeBlock(out.data, byteIndex(out, b * BLOCK), x.data, x.offset + b * BLOCK);
  }
}

/** x (..., n) blocks -> out (..., n) f32. */
export function dequantize(out: Tensor<'f32'>, x: Tensor<BlockDType>): void {
  dequantizeRun(out.data, out.offset, x, 0, x.size);
}

/**
 * Decodes `count` elements (whole blocks) of block tensor `x`, starting at its element `first`
 * (counted from x's offset), into out[outAt .. outAt+count). matvec uses it to decode one weight row.
 */
export function dequantizeRun(out: Float32Array, outAt: number, x: Tensor<BlockDType>, first: number, count: number): void {
  const codec = CODECS[x.dtype];
  // One block of 32 consecutive elements at a time.
  for (let e = 0; e < count; e += BLOCK) {
    codec.dequantizeBlock(out, outAt + e, x.data, byteIndex(x, first + e));
  }
}
