/**
 * ggml's Q3_K super-block: 256 weights as 3-bit signed codes q in -4..3, in 16 sub-blocks of 16,
 * x = d * (sc - 32) * q. Each sub-block's scale sc is a 6-bit integer (0..63, offset by 32 so it
 * can be negative) against the one f16 super-scale d. No minimum: the codes are symmetric.
 *
 *   block (110 bytes) = hmask[32] | qs[64] | scales[12] | d f16
 *     qs:     the low two bits of q + 4, as 2-bit planes (k-quant-pack.ts: element
 *             e = 128 h + 32 k + l in byte 32 h + l, bits 2k, 2k + 1)
 *     hmask:  the third bit of q + 4, as a high-bit plane (bit e >> 5 of byte e & 31)
 *     scales: sixteen 6-bit values sc[s]: the low nibble of sc[s] is the low (s < 8) or high
 *             (s >= 8) nibble of byte s mod 8; its top two bits are bits 2 (s >> 2), +1 of byte 8 + s mod 4
 *
 * Quantizing (ggml's `quantize_row_q3_K_ref`, byte-exact):
 * 1. each sub-block: scale and codes from makeQ3Quants (nmax 4, weights x^2, coordinate descent);
 * 2. d = max / -32 for the scale of largest magnitude max, sc = clamp(nearestInt(scale * -32 / max), -32, 31) + 32;
 * 3. codes again against d * (sc - 32) as stored: q = clamp(nearestInt(x / (d (sc - 32))), -4, 3).
 * Integer view (blockCodes, ggml-block.ts): sub-blocks of 16, c = q (the stored q + 4, minus 4),
 * dl = f32(d * (sc - 32)), no minimum (m = -0).
 */
import { packCrumbs, packHighBits, unpackCrumb, unpackHighBit } from './k-quant-pack.ts';
import { makeQ3Quants, signedMax } from './k-quant-search.ts';
import { makeCodec, readF16, writeF16, type BlockCodec, type BlockCodes } from './ggml-block.ts';
import { nearestInt, toInt8 } from './round.ts';

const f32 = Math.fround;

const QK = 256;
const SUB = 16;
const HMASK = 0; // byte offsets inside the block
const QS = 32;
const SCALES = 96;
const D = 108;

const L = new Uint8Array(QK); // scratch: codes q + 4, 0..7
const fitScales = new Float32Array(QK / SUB); // scratch: the search's sub-block scales

/** Sub-block s's stored 6-bit scale (0..63) from the 12 packed bytes at bytes[at ..]. */
function unpackScale(bytes: Uint8Array, at: number, s: number): number {
  const low = s < 8 ? bytes[at + s] & 0x0f : bytes[at + s - 8] >>> 4;
  const high = (bytes[at + 8 + (s % 4)] >>> (2 * (s >>> 2))) & 3;
  return low | (high << 4);
}

function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  for (let s = 0; s < QK / SUB; s++) fitScales[s] = makeQ3Quants(SUB, 4, x, xAt + SUB * s, L, SUB * s);
  // The signed scale of largest magnitude (the first on a tie).
  const { max: maxScale } = signedMax(fitScales, 0, QK / SUB);
  bytes.fill(0, at + SCALES, at + SCALES + 12);
  if (maxScale !== 0) {
    // Like Q4_0's d = max / -8: the largest scale maps to -32, the extra negative level.
    const iscale = f32(-32 / maxScale);
    for (let s = 0; s < QK / SUB; s++) {
      // C stores nearest_int's result in an int8_t before clamping, hence toInt8.
      const sc = Math.max(-32, Math.min(31, toInt8(nearestInt(f32(iscale * fitScales[s]))))) + 32;
      bytes[at + SCALES + (s % 8)] |= s < 8 ? sc & 0x0f : (sc & 0x0f) << 4;
      bytes[at + SCALES + 8 + (s % 4)] |= (sc >>> 4) << (2 * (s >>> 2));
    }
    writeF16(bytes, at + D, f32(1 / iscale));
  } else {
    writeF16(bytes, at + D, 0);
  }
  // Codes again against the stored scales; a sub-block with scale 0 keeps the search's codes.
  const d = readF16(bytes, at + D);
  for (let s = 0; s < QK / SUB; s++) {
    const dl = f32(d * (unpackScale(bytes, at + SCALES, s) - 32));
    if (dl === 0) continue;
    for (let i = 0; i < SUB; i++) {
      const e = SUB * s + i;
      L[e] = Math.max(-4, Math.min(3, nearestInt(f32(x[xAt + e] / dl)))) + 4;
    }
  }
  packHighBits(bytes, at + HMASK, (e) => L[e] >>> 2);
  packCrumbs(bytes, at + QS, L);
}

const blockCodes: BlockCodes = (codes, scales, mins, bytes, at) => {
  const d = readF16(bytes, at + D);
  for (let s = 0; s < QK / SUB; s++) {
    scales[s] = f32(d * (unpackScale(bytes, at + SCALES, s) - 32));
    mins[s] = -0;
  }
  // The stored code is q + 4: low bits in qs, bit 2 in hmask; a clear high bit means q < 0.
  for (let e = 0; e < QK; e++)
    codes[e] = (unpackCrumb(bytes, at + QS, e) | (unpackHighBit(bytes, at + HMASK, e) << 2)) - 4;
};

export const q3_k: BlockCodec = makeCodec(QK, SUB, quantizeBlock, blockCodes);
