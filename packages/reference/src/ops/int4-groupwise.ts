/**
 * The engine's own group-wise INT4 (spec.md §5, Neural Speed's `weight_dtype int4`): the `quantizeInt4`
 * and `dequantizeInt4` ops. Each row of a (rows, cols) matrix is cut into groups of `groupSize`
 * consecutive elements (32, 64, 128 or the whole row); a group has an f32 scale and an integer zero
 * point (0 when symmetric), and each element a signed 4-bit q in [-8, 7]:
 *
 *   w = (q - zero) * scale
 *   symmetric:  scale = amax / 7,               zero = 0,
 *               q = clamp(round(x / scale), -8, 7)
 *   asymmetric: scale = (hi - lo) / 15,         zero = clamp(round(-8 - lo / scale), -8, 7),
 *               q = clamp(round(x / scale) + zero, -8, 7)
 *   round = halves away from zero (C's roundf)
 *
 * Packing (Int4Matrix, core/int4-matrix.ts): element c of row r is nibble c of the row, byte
 * r * cols/2 + floor(c / 2), low nibble for even c, high for odd, as 4-bit two's complement.
 *
 * Guarantee (spec.md §5 acceptance): |dequant(quant(x)) - x| <= scale / 2 per element, up to f32
 * rounding of x / scale and of (q - zero) * scale (a few ulps; the conformance test's bound is
 * scale * (1/2 + 2^-19)). Three choices keep it for every finite input:
 * 1. Asymmetric groups use lo = min(min x, 0), hi = max(max x, 0). The zero point must be an integer
 *    in [-8, 7], which means the value 0 lies on the group's grid of 16 levels; a group in [100, 101]
 *    cannot be covered by such a grid, but the range [0, 101] can. (GPTQ's quantizer widens its
 *    range to include 0 for the same reason.) It also gives constant groups a non-zero range.
 * 2. The scale is at least 2^-126, the smallest normal f32. All-zero groups would otherwise get
 *    scale 0 (x / 0 is NaN), and tiny groups a subnormal scale so coarse that amax / scale can
 *    exceed 7.5 and clamp. 2^-126 still covers any such group (amax < 7 * 2^-126) within half a
 *    step, divides exactly, and an all-zero group decodes to exactly 0.
 * 3. The asymmetric range hi - lo is taken in f64, rounded to f32 once after dividing by 15,
 *    so it cannot overflow f32 (hi = 3e38, lo = -3e38). A C++ twin writes
 *    (float)(((double)hi - (double)lo) / 15.0).
 */
import type { Int4Matrix, Tensor } from '@sparq/core';
import { clamp, roundHalfAway } from './round.ts';

const f32 = Math.fround;

/** The smallest normal f32, 2^-126: the floor on every scale (see choice 2 above). */
export const MIN_SCALE = 2 ** -126;

/** The signed 4-bit value of nibble `e` in `packed` (element e of the flattened (rows, cols) matrix). */
export function readInt4(packed: Uint8Array, e: number): number {
  const byte = packed[e >> 1];
  const nibble = e % 2 === 0 ? byte & 0x0f : byte >>> 4;
  // Two's complement on 4 bits: codes 8..15 are -8..-1.
  return nibble >= 8 ? nibble - 16 : nibble;
}

/** x (rows, cols) f32 -> out Int4Matrix (rows, cols). */
export function quantizeInt4(out: Int4Matrix, x: Tensor<'f32'>): void {
  const { rows, cols, groupSize, groupsPerRow } = out;
  for (let r = 0; r < rows; r++) {
    // One group of `groupSize` consecutive elements of row r at a time.
    for (let g = 0; g < groupsPerRow; g++) {
      const first = r * cols + g * groupSize; // element index of the group's first element
      const xAt = x.offset + first;
      let scale: number;
      let zero = 0;
      if (out.symmetric) {
        let amax = 0;
        for (let i = 0; i < groupSize; i++) amax = Math.max(amax, Math.abs(x.data[xAt + i]));
        scale = Math.max(f32(amax / 7), MIN_SCALE);
      } else {
        // The range always includes 0 (choice 1 above).
        let lo = 0;
        let hi = 0;
        for (let i = 0; i < groupSize; i++) {
          lo = Math.min(lo, x.data[xAt + i]);
          hi = Math.max(hi, x.data[xAt + i]);
        }
        scale = Math.max(f32((hi - lo) / 15), MIN_SCALE);
        zero = clamp(roundHalfAway(f32(-8 - f32(lo / scale))), -8, 7);
      }
      out.scales[r * groupsPerRow + g] = scale;
      out.zeros[r * groupsPerRow + g] = zero;
      // Two elements (one byte) at a time; groups have even sizes, so a byte never straddles two.
      for (let i = 0; i < groupSize; i += 2) {
        const q0 = clamp(roundHalfAway(f32(x.data[xAt + i] / scale)) + zero, -8, 7);
        const q1 = clamp(roundHalfAway(f32(x.data[xAt + i + 1] / scale)) + zero, -8, 7);
        // `& 0x0f` keeps the 4-bit two's complement (-1 -> 0xf).
        out.packed[(first + i) >> 1] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
      }
    }
  }
}

/**
 * Row r of w decoded to f32 into out[outAt .. outAt+cols): w = (q - zero) * scale, rounded to f32.
 * matvecInt4's 'dequant' path uses it.
 */
export function dequantizeInt4Row(out: Float32Array, outAt: number, w: Int4Matrix, r: number): void {
  const { cols, groupSize, groupsPerRow } = w;
  for (let c = 0; c < cols; c++) {
    const g = r * groupsPerRow + Math.floor(c / groupSize); // the group of element (r, c)
    out[outAt + c] = f32((readInt4(w.packed, r * cols + c) - w.zeros[g]) * w.scales[g]);
  }
}

/** w Int4Matrix (rows, cols) -> out (rows, cols) f32. */
export function dequantizeInt4(out: Tensor<'f32'>, w: Int4Matrix): void {
  // One row at a time; out is contiguous, so row r starts cols elements after row r - 1.
  for (let r = 0; r < w.rows; r++) dequantizeInt4Row(out.data, out.offset + r * w.cols, w, r);
}
