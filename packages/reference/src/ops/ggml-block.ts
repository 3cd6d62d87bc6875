/**
 * What the three ggml block formats (SPEC 5: Q4_0, Q4_1, Q8_0) share: a block of 32 elements
 * opens with little-endian f16 numbers (the scale d, and for Q4_1 the minimum m), followed by
 * the quantized values; and the two 4-bit formats pack their 32 nibbles the same way.
 *
 *   Q4_0 block (18 bytes): d f16 | qs[16]
 *   Q4_1 block (20 bytes): d f16 | m f16 | qs[16]
 *   Q8_0 block (34 bytes): d f16 | qs[32] int8
 *
 * 4-bit packing (ggml's, not the engine's INT4 one): byte j of qs holds element j in its low
 * nibble and element j + 16 in its high nibble, j = 0..15. So the first half of the block sits in
 * the low nibbles and the second half in the high ones.
 *
 * Each format file (q4-0.ts, q4-1.ts, q8-0.ts) provides a `BlockCodec`: how to turn 32 f32
 * values into one block and back. quantize.ts walks the blocks.
 */
import { f16ToF32, f32ToF16 } from '@sparq/core';

/** Elements per block, for all three formats (ggml's QK4_0 = QK4_1 = QK8_0 = 32). */
export const BLOCK = 32;

/** One format's block conversion. `x` and `out` are flat arrays; `xAt`/`at` index the block's first element/byte. */
export interface BlockCodec {
  /** x[xAt .. xAt+32) f32 -> bytes[at .. at+blockBytes) */
  quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void;
  /** bytes[at .. at+blockBytes) -> out[outAt .. outAt+32) f32 */
  dequantizeBlock(out: Float32Array, outAt: number, bytes: Uint8Array, at: number): void;
}

/** Reads the f16 at bytes[at], bytes[at+1] (little-endian) as its exact f32 value. */
export function readF16(bytes: Uint8Array, at: number): number {
  return f16ToF32(bytes[at] | (bytes[at + 1] << 8));
}

/** Stores v as f16 (round to nearest even, as F16C does) at bytes[at], bytes[at+1], little-endian. */
export function writeF16(bytes: Uint8Array, at: number, v: number): void {
  const bits = f32ToF16(v);
  bytes[at] = bits & 0xff;
  bytes[at + 1] = bits >>> 8;
}

/**
 * Packs 32 nibbles into qs = bytes[at .. at+16): `nibble(j)` gives element j's 4-bit code (0..15).
 * Byte j = element j (low) | element j + 16 (high).
 */
export function packNibbles(bytes: Uint8Array, at: number, nibble: (j: number) => number): void {
  for (let j = 0; j < BLOCK / 2; j++) {
    bytes[at + j] = nibble(j) | (nibble(j + BLOCK / 2) << 4);
  }
}

/** The 4-bit code (0..15) of element j (0..31) of the qs bytes starting at bytes[at]. */
export function unpackNibble(bytes: Uint8Array, at: number, j: number): number {
  // Elements 0..15 are the low nibbles of bytes 0..15, elements 16..31 their high nibbles.
  return j < BLOCK / 2 ? bytes[at + j] & 0x0f : bytes[at + j - BLOCK / 2] >>> 4;
}
