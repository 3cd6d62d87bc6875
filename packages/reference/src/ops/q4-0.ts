/**
 * ggml's Q4_0 block (SPEC 5): 32 weights as 4-bit codes q in 0..15 sharing one f16 scale d.
 *
 *   block (18 bytes) = d f16 little-endian | qs[16] (byte j: element j low nibble, j + 16 high)
 *   d = max / -8, where max is the signed value of largest magnitude (the first one on a tie)
 *   q = min(15, trunc(x * (1/d) + 8.5))          x ~ (q - 8) * d
 *
 * Byte-exact with ggml's `quantize_row_q4_0_ref` / `dequantize_row_q4_0`, which is the point of
 * the format (GGUF files interoperate). Two details follow ggml rather than SPEC's shorthand:
 * - SPEC writes `x / d`; ggml computes `id = 1/d` once and multiplies, in f32. The two round
 *   differently for some x, so we multiply as ggml does.
 * - Every step is f32 arithmetic (Math.fround after each operation), and the quantization uses
 *   the f32 d; only the stored (and dequantizing) d is rounded to f16.
 * Why `max / -8`: the extreme value maps exactly to code 0 (value -8 * d = max), using the
 * signed range's extra negative level; the opposite extreme -max would need +8, so it clamps
 * to 7 (code 15) and is the one element that can be a whole step off.
 */
import { BLOCK, packNibbles, readF16, unpackNibble, writeF16, type BlockCodec } from './ggml-block.ts';

const f32 = Math.fround;

/** Byte offset of the 16 nibble bytes inside a block (after the f16 d). */
const QS = 2;

/** x[xAt .. xAt+32) f32 -> one 18-byte block at bytes[at]. */
function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  // The signed value of largest magnitude; strict `<` keeps the first one, as ggml does.
  let amax = 0;
  let max = 0;
  for (let j = 0; j < BLOCK; j++) {
    const v = x[xAt + j];
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  const d = f32(max / -8);
  // An all-zero block has d = 0: every code becomes trunc(8.5) = 8, i.e. the value 0.
  const id = d !== 0 ? f32(1 / d) : 0;
  writeF16(bytes, at, d);
  // Shift to 0..16.5 and truncate (C's (int8_t) cast): rounds to nearest since the shift has +0.5.
  packNibbles(bytes, at + QS, (j) => Math.min(15, Math.trunc(f32(f32(x[xAt + j] * id) + 8.5))));
}

/** One 18-byte block at bytes[at] -> out[outAt .. outAt+32) f32, x = (q - 8) * d with the f16 d. */
function dequantizeBlock(out: Float32Array, outAt: number, bytes: Uint8Array, at: number): void {
  const d = readF16(bytes, at);
  for (let j = 0; j < BLOCK; j++) {
    // Exact in f32: a 4-bit integer times an f16 (11-bit significand) needs at most 15 bits.
    out[outAt + j] = (unpackNibble(bytes, at + QS, j) - 8) * d;
  }
}

export const q4_0: BlockCodec = { quantizeBlock, dequantizeBlock };
