/**
 * ggml's Q4_K and Q5_K super-blocks: 256 weights as `bits`-bit codes q in 0..top (top = 15 or 31),
 * in 8 sub-blocks of 32, x = d * sc * q - dmin * mn. Each sub-block's scale sc and minimum mn are
 * 6-bit integers against the two f16 super-scales d and dmin.
 *
 *   Q4_K block (144 bytes) = d f16 | dmin f16 | scales[12] | qs[128]
 *   Q5_K block (176 bytes) = d f16 | dmin f16 | scales[12] | qh[32] | qs[128]
 *     scales: the 8 scales and 8 minimums, 6 bits each, packed as drawn in k-quant-pack.ts
 *     qs:     the low four bits of each code; the 256 elements are 4 chunks of 64, and element
 *             e = 64 c + 32 t + l (t = 0, 1; l = 0..31) sits in byte 32 c + l, low nibble for t = 0,
 *             high for t = 1 (so sub-blocks 2c and 2c + 1 share 32 bytes)
 *     qh:     Q5_K's fifth bits as a high-bit plane (bit e >> 5 of byte e & 31)
 *
 * Quantizing (ggml's `quantize_row_q4_K_ref` / `_q5_K_ref`, byte-exact):
 * 1. each sub-block: weights w = sqrt(mean x^2) + |x| (the sub-block's RMS keeps small values from
 *    being ignored), then scale and minimum from makeQkx2Quants (squared error; trial inverse
 *    scales (rmin + 0.1 k + top) / range, Q4_K: rmin -1, k = 0..20; Q5_K: rmin -0.5, k = 0..15);
 * 2. d = max scale / 63, sc = min(63, nearestInt(63 / max scale * scale)); dmin and mn the same way;
 * 3. the codes again against the stored d * sc and dmin * mn: q = clamp(nearestInt((x + dmin mn) / (d sc)), 0, top).
 * Integer view (blockCodes, ggml-block.ts): sub-blocks of 32, c = q, dl = f32(d * sc) (exact: 11-bit
 * d times 6-bit sc), m = -f32(dmin * mn).
 */
import { packHighBits, packScaleMin, unpackHighBit, unpackScaleMin } from './k-quant-pack.ts';
import { fitSubBlocks } from './k-quant-search.ts';
import { makeCodec, readF16, writeF16, type BlockCodec } from './ggml-block.ts';
import { nearestInt } from './round.ts';

const f32 = Math.fround;

const QK = 256;
const SUB = 32;
const D = 0; // byte offsets inside the block
const DMIN = 2;
const SCALES = 4;
const QH = 16; // Q5_K only

/** Byte of the nibble holding element e (of a qs run) and whether it is the high nibble. */
function nibbleOf(e: number): { byte: number; high: boolean } {
  return { byte: 32 * (e >>> 6) + (e & 31), high: (e & 32) !== 0 };
}

function scaleAndMinK(bits: 4 | 5, rmin: number, nstep: number): BlockCodec {
  const top = 2 ** bits - 1;
  const QS = bits === 5 ? QH + 32 : 16;
  const L = new Uint8Array(QK); // scratch: one super-block's codes
  const search = { nmax: top, rmin, nstep, useMad: false };
  const fitScales = new Float32Array(QK / SUB); // scratch: the search's sub-block scales and minimums
  const fitMins = new Float32Array(QK / SUB);
  const sc = new Uint8Array(QK / SUB);
  const mn = new Uint8Array(QK / SUB);

  return makeCodec(
    QK,
    SUB,
    (bytes, at, x, xAt) => {
      // Weights sqrt(mean x^2) + |x|: the sub-block's RMS keeps small values from being ignored.
      const weigh = (at: number, weights: Float32Array) => {
        let sumX2 = 0;
        for (let i = 0; i < SUB; i++) sumX2 = f32(sumX2 + f32(x[at + i] * x[at + i]));
        // sqrtf is correctly rounded, and so is the f64 Math.sqrt of an f32 rounded back to f32.
        const rms = f32(Math.sqrt(f32(sumX2 / SUB)));
        for (let i = 0; i < SUB; i++) weights[i] = f32(rms + Math.abs(x[at + i]));
      };
      const { maxScale, maxMin } = fitSubBlocks(x, xAt, SUB, QK / SUB, weigh, search, {
        L,
        scales: fitScales,
        mins: fitMins,
      });
      const inverseScale = maxScale > 0 ? f32(63 / maxScale) : 0;
      const inverseMin = maxMin > 0 ? f32(63 / maxMin) : 0;
      for (let s = 0; s < QK / SUB; s++) {
        // `& 0xff` is C's store to uint8_t, before its MIN(63, ...).
        sc[s] = Math.min(63, nearestInt(f32(inverseScale * fitScales[s])) & 0xff);
        mn[s] = Math.min(63, nearestInt(f32(inverseMin * fitMins[s])) & 0xff);
      }
      packScaleMin(bytes, at + SCALES, sc, mn);
      writeF16(bytes, at + D, f32(maxScale / 63));
      writeF16(bytes, at + DMIN, f32(maxMin / 63));
      // Codes again against the stored scales; a sub-block with scale 0 keeps the search's codes.
      const d = readF16(bytes, at + D);
      const dmin = readF16(bytes, at + DMIN);
      for (let s = 0; s < QK / SUB; s++) {
        const { sc: scale, mn: min } = unpackScaleMin(bytes, at + SCALES, s);
        const dl = f32(d * scale);
        if (dl === 0) continue;
        const ml = f32(dmin * min);
        for (let i = 0; i < SUB; i++) {
          const e = SUB * s + i;
          L[e] = Math.max(0, Math.min(top, nearestInt(f32(f32(x[xAt + e] + ml) / dl))));
        }
      }
      for (let e = 0; e < QK; e++) {
        const { byte, high } = nibbleOf(e);
        const nibble = L[e] & 0x0f;
        bytes[at + QS + byte] = high ? (bytes[at + QS + byte] & 0x0f) | (nibble << 4) : nibble;
      }
      if (bits === 5) packHighBits(bytes, at + QH, (e) => L[e] >>> 4);
    },
    (codes, scales, mins, bytes, at) => {
      const d = readF16(bytes, at + D);
      const dmin = readF16(bytes, at + DMIN);
      for (let s = 0; s < QK / SUB; s++) {
        const { sc: scale, mn: min } = unpackScaleMin(bytes, at + SCALES, s);
        // dl * q is exact (6-bit scale times 11-bit d, times a 5-bit code: 22 bits), so dequantizing rounds once, at the minimum.
        scales[s] = f32(d * scale);
        mins[s] = -f32(dmin * min);
      }
      for (let e = 0; e < QK; e++) {
        const { byte, high } = nibbleOf(e);
        const low = high ? bytes[at + QS + byte] >>> 4 : bytes[at + QS + byte] & 0x0f;
        codes[e] = bits === 5 ? low | (unpackHighBit(bytes, at + QH, e) << 4) : low;
      }
    },
  );
}

export const q4_k = scaleAndMinK(4, -1, 20);
export const q5_k = scaleAndMinK(5, -0.5, 15);
