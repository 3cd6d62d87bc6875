/**
 * ggml's Q4_1 block (SPEC 5): 32 weights as 4-bit codes q in 0..15 with an f16 scale d and an
 * f16 minimum m, so a block whose values are all positive (or all negative) still uses all 16 levels.
 *
 *   block (20 bytes) = d f16 | m f16 | qs[16] (byte j: element j low nibble, j + 16 high)
 *   d = (max - min) / 15, m = min
 *   q = min(15, trunc((x - min) * (1/d) + 0.5))   x ~ q * d + m
 *
 * Byte-exact with ggml's `quantize_row_q4_1_ref` / `dequantize_row_q4_1`: f32 arithmetic at
 * every step (Math.fround), `id = 1/d` multiplied rather than SPEC's `/ d` (ggml's choice; they
 * can round differently), quantization with the f32 d and min, storage and dequantization with
 * their f16 roundings. Note the f16 m can be off by up to 2^-11 |min|, which for a block far from
 * zero may exceed half a step; that is the format's, not ours.
 */
import { BLOCK, packNibbles, readF16, unpackNibble, writeF16, type BlockCodec } from './ggml-block.ts';

const f32 = Math.fround;

/** Byte offset of the 16 nibble bytes inside a block (after d and m). */
const QS = 4;

/** x[xAt .. xAt+32) f32 -> one 20-byte block at bytes[at]. */
function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  // ggml starts from +-FLT_MAX, so its first comparison picks x[0]; we start there directly.
  // Plain `<` / `>` as in ggml, not Math.min/max: on a 0 / -0 tie the first one seen stays, which
  // decides the sign bit of the stored f16 m.
  let min = x[xAt];
  let max = x[xAt];
  for (let j = 1; j < BLOCK; j++) {
    const v = x[xAt + j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const d = f32(f32(max - min) / 15);
  // A constant block has d = 0: every code is 0 and the block decodes to m.
  const id = d !== 0 ? f32(1 / d) : 0;
  writeF16(bytes, at, d);
  writeF16(bytes, at + 2, min);
  // (x - min) * id lies in 0..15; +0.5 then truncation rounds to nearest (C's (int8_t) cast).
  packNibbles(bytes, at + QS, (j) => Math.min(15, Math.trunc(f32(f32(f32(x[xAt + j] - min) * id) + 0.5))));
}

/** One 20-byte block at bytes[at] -> out[outAt .. outAt+32) f32, x = q * d + m with the f16 d and m. */
function dequantizeBlock(out: Float32Array, outAt: number, bytes: Uint8Array, at: number): void {
  const d = readF16(bytes, at);
  const m = readF16(bytes, at + 2);
  for (let j = 0; j < BLOCK; j++) {
    // q * d is exact in f32 (4-bit times 11-bit significand), so only the + m rounds.
    out[outAt + j] = f32(unpackNibble(bytes, at + QS, j) * d + m);
  }
}

export const q4_1: BlockCodec = { quantizeBlock, dequantizeBlock };
