/**
 * ggml's Q4_0 and Q5_0 blocks (spec.md §5): 32 weights as `bits`-bit codes q sharing one f16 scale d,
 * the value being q shifted to a signed range. With H = 2^(bits-1) (8 or 16) and top = 2H - 1:
 *
 *   Q4_0 block (18 bytes) = d f16 | qs[16]
 *   Q5_0 block (22 bytes) = d f16 | qh[4] | qs[16]
 *     qs: the low 4 bits of each code, byte j: element j low nibble, j + 16 high (ggml-block.ts)
 *     qh: Q5_0's fifth bits as one little-endian uint32, bit j = bit 4 of element j's code
 *
 *   d = max / -H, where max is the signed value of largest magnitude (the first one on a tie)
 *   q = min(top, trunc(x * (1/d) + H + 0.5))          x ~ (q - H) * d
 *
 * Integer view (blockCodes, ggml-block.ts): c = q - H in -H..H-1, dl = d, no minimum (m = -0).
 *
 * Byte-exact with ggml's `quantize_row_q4_0_ref` / `quantize_row_q5_0_ref` (what llama-quantize
 * writes without an importance matrix) and `dequantize_row_q4_0` / `_q5_0`. Details that follow
 * ggml to the bit:
 * - ggml computes `id = 1/d` once and multiplies, in f32, as spec.md §5 writes it; dividing by d
 *   rounds differently for some x.
 * - Every step is f32 arithmetic (Math.fround after each operation), and the quantization uses
 *   the f32 d; only the stored (and dequantizing) d is rounded to f16.
 * Why `max / -H`: the extreme value maps exactly to code 0 (value -H * d = max), using the
 * signed range's extra negative level; the opposite extreme -max would need +H, so it clamps
 * to H - 1 (code top) and is the one element that can be a whole step off.
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

/** The codec for `bits` = 4 (Q4_0) or 5 (Q5_0). */
function scaleOnly(bits: 4 | 5): BlockCodec {
  const half = 2 ** (bits - 1); // H: the code of the value 0
  const top = 2 * half - 1; // the largest code
  const QH = 2; // Q5_0's fifth bits follow d
  const QS = bits === 5 ? QH + 4 : 2; // the nibbles follow d (and qh)
  const stored = new Uint8Array(BLOCK); // scratch: one block's stored codes

  return makeCodec(
    BLOCK,
    BLOCK,
    (bytes, at, x, xAt) => {
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
      const d = f32(max / -half);
      // An all-zero block has d = 0: every code becomes trunc(H + 0.5) = H, i.e. the value 0.
      const id = d !== 0 ? f32(1 / d) : 0;
      writeF16(bytes, at, d);
      // Shift to 0..2H+0.5 and truncate (C's (int8_t) cast): rounds to nearest since the shift has +0.5.
      for (let j = 0; j < BLOCK; j++)
        stored[j] = Math.min(top, toInt8(truncToByte(f32(f32(x[xAt + j] * id) + (half + 0.5)))));
      packNibbles(bytes, at + QS, (j) => stored[j]);
      if (bits === 5) packBits(bytes, at + QH, BLOCK, (j) => stored[j] >>> 4);
    },
    (codes, scales, mins, bytes, at) => {
      scales[0] = readF16(bytes, at);
      mins[0] = -0;
      const qh = bits === 5 ? readU32(bytes, at + QH) : 0; // bit j: element j's fifth bit
      // d * c is exact in f32: a 5-bit integer times an f16 (11-bit significand) needs at most 16 bits.
      for (let j = 0; j < BLOCK; j++) codes[j] = (unpackNibble(bytes, at + QS, j) | (((qh >>> j) & 1) << 4)) - half;
    },
  );
}

export const q4_0 = scaleOnly(4);
export const q5_0 = scaleOnly(5);
