/**
 * ggml's Q4_1 and Q5_1 blocks (spec.md §5): 32 weights as `bits`-bit codes q in 0..top (top = 15 or
 * 31) with an f16 scale d and an f16 minimum m, so a block whose values are all positive (or all
 * negative) still uses every level.
 *
 *   Q4_1 block (20 bytes) = d f16 | m f16 | qs[16]
 *   Q5_1 block (24 bytes) = d f16 | m f16 | qh[4] | qs[16]
 *     qs: the low 4 bits of each code, byte j: element j low nibble, j + 16 high (ggml-block.ts)
 *     qh: Q5_1's fifth bits as one little-endian uint32, bit j = bit 4 of element j's code
 *
 *   d = (max - min) / top, m = min
 *   q = min(top, trunc((x - min) * (1/d) + 0.5))   x ~ q * d + m
 *
 * Integer view (blockCodes, ggml-block.ts): c = q in 0..top, dl = d, m = m.
 *
 * Byte-exact with ggml's `quantize_row_q4_1_ref` / `quantize_row_q5_1_ref` and the matching
 * `dequantize_row_*`: f32 arithmetic at every step (Math.fround), `id = 1/d` multiplied as
 * ggml does (dividing by d can round differently), quantization with the f32 d and
 * min, storage and dequantization with their f16 roundings. (ggml's Q5_1 has no `min(31, ...)`:
 * (x - min) * id is at most top times (1 + a few ulps), so + 0.5 never truncates past top and the
 * clamp never changes a code; it is there so the reader need not prove that.)
 * Note the f16 m can be off by up to 2^-11 |min|, which for a block far from zero may exceed half
 * a step; that is the format's, not ours.
 */
import { toInt8, truncToByte } from './round.ts';
import {
  BLOCK,
  makeCodec,
  packBits,
  packNibbles,
  readF16,
  readU32,
  unpackNibble,
  writeF16,
  type BlockCodec,
} from './ggml-block.ts';

const f32 = Math.fround;

/** The codec for `bits` = 4 (Q4_1) or 5 (Q5_1). */
function scaleAndMin(bits: 4 | 5): BlockCodec {
  const top = 2 ** bits - 1; // the largest code
  const QH = 4; // Q5_1's fifth bits follow d and m
  const QS = bits === 5 ? QH + 4 : 4; // the nibbles follow d and m (and qh)
  const stored = new Uint8Array(BLOCK); // scratch: one block's stored codes

  return makeCodec(
    BLOCK,
    BLOCK,
    (bytes, at, x, xAt) => {
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
      const d = f32(f32(max - min) / top);
      // A constant block has d = 0: every code is 0 and the block decodes to m.
      const id = d !== 0 ? f32(1 / d) : 0;
      writeF16(bytes, at, d);
      writeF16(bytes, at + 2, min);
      // (x - min) * id lies in 0..top; +0.5 then truncation rounds to nearest (C's (int8_t) cast for
      // Q4_1, (uint8_t) for Q5_1: the same byte here, since the value is 0..top or not finite).
      for (let j = 0; j < BLOCK; j++)
        stored[j] = Math.min(top, toInt8(truncToByte(f32(f32(f32(x[xAt + j] - min) * id) + 0.5))));
      packNibbles(bytes, at + QS, (j) => stored[j]);
      if (bits === 5) packBits(bytes, at + QH, BLOCK, (j) => stored[j] >>> 4);
    },
    (codes, scales, mins, bytes, at) => {
      scales[0] = readF16(bytes, at);
      mins[0] = readF16(bytes, at + 2);
      const qh = bits === 5 ? readU32(bytes, at + QH) : 0; // bit j: element j's fifth bit
      // q * d is exact in f32 (5-bit times 11-bit significand), so dequantizing rounds only at the + m.
      for (let j = 0; j < BLOCK; j++) codes[j] = unpackNibble(bytes, at + QS, j) | (((qh >>> j) & 1) << 4);
    },
  );
}

export const q4_1 = scaleAndMin(4);
export const q5_1 = scaleAndMin(5);
