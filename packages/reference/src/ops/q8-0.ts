/**
 * ggml's Q8_0 block (spec.md §5; ggml uses it for activations and weights): 32 values as int8 codes
 * sharing one f16 scale d.
 *
 *   block (34 bytes) = d f16 little-endian | qs[32] int8 (two's complement)
 *   d = amax / 127, amax = max |x|
 *   q = roundf(x * (1/d))  (halves away from zero)    x ~ q * d
 *
 * Byte-exact with ggml's `quantize_row_q8_0_ref` / `dequantize_row_q8_0`: f32 arithmetic at every
 * step (Math.fround), `id = 1/d` multiplied as ggml does (dividing can round differently), C's roundf
 * (not Math.round, which differs on negative halves), quantization with the f32 d and
 * dequantization with the f16 d. |q| <= 127 always, so -128 is never used.
 * Integer view (blockCodes, ggml-block.ts): c = q, dl = d, no minimum (m = -0).
 */
import { BLOCK, makeCodec, readF16, writeF16, type BlockCodec, type BlockCodes } from './ggml-block.ts';
import { roundHalfAway, toInt8 } from './round.ts';

const f32 = Math.fround;

/** Byte offset of the 32 int8 codes inside a block (after the f16 d). */
const QS = 2;

/** x[xAt .. xAt+32) f32 -> one 34-byte block at bytes[at]. */
function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  let amax = 0;
  for (let j = 0; j < BLOCK; j++) amax = Math.max(amax, Math.abs(x[xAt + j]));
  const d = f32(amax / 127);
  // An all-zero block has d = 0: every code is 0.
  const id = d !== 0 ? f32(1 / d) : 0;
  writeF16(bytes, at, d);
  for (let j = 0; j < BLOCK; j++) {
    // `& 0xff` stores the int8 as its two's-complement byte (-1 -> 0xff).
    bytes[at + QS + j] = roundHalfAway(f32(x[xAt + j] * id)) & 0xff;
  }
}

/** One 34-byte block at bytes[at] -> its codes q and the f16 d (x = q * d, exact in f32: 8 bits times 11). */
const blockCodes: BlockCodes = (codes, scales, mins, bytes, at) => {
  scales[0] = readF16(bytes, at);
  mins[0] = -0;
  // Byte back to int8: values 128..255 are the negatives -128..-1.
  for (let j = 0; j < BLOCK; j++) codes[j] = toInt8(bytes[at + QS + j]);
};

export const q8_0: BlockCodec = makeCodec(BLOCK, BLOCK, quantizeBlock, blockCodes);
