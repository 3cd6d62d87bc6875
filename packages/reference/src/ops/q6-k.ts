/**
 * ggml's Q6_K super-block: 256 weights as 6-bit signed codes q in -32..31, in 16 sub-blocks of 16,
 * x = d * sc * q. Each sub-block's scale sc is an int8 against the one f16 super-scale d.
 *
 *   block (210 bytes) = ql[128] | qh[64] | scales[16] int8 | d f16
 *     the stored code is q + 32 (0..63): its low four bits in ql, its top two bits in qh.
 *     The 256 elements are two halves of 128; element e = 128 h + 32 k + l (k = 0..3, l = 0..31):
 *       ql: byte 64 h + 32 (k & 1) + l, low nibble for k < 2, high nibble for k >= 2
 *       qh: byte 32 h + l, bits 2k and 2k + 1 (the 2-bit planes of k-quant-pack.ts)
 *     scales[s]: sub-block s = e >> 4 (two's complement)
 *
 * Quantizing (ggml's `quantize_row_q6_K_ref`, byte-exact):
 * 1. each sub-block: scale and codes from makeQxQuants (nmax 32, weights x^2);
 * 2. d = max / -128 for the scale of largest magnitude max, sc = min(127, nearestInt(scale * -128 / max));
 *    a super-block whose scales are all below GROUP_MAX_EPS is stored as all zero bytes;
 * 3. codes again against d * sc as stored: q = clamp(nearestInt(x / (d sc)), -32, 31).
 * Integer view (blockCodes, ggml-block.ts): sub-blocks of 16, c = q (the stored q + 32, minus 32),
 * dl = f32(d * sc), no minimum (m = -0).
 */
import { packCrumbs, unpackCrumb } from './k-quant-pack.ts';
import { GROUP_MAX_EPS, makeQxQuants, signedMax } from './k-quant-search.ts';
import { makeCodec, readF16, writeF16, type BlockCodec, type BlockCodes } from './ggml-block.ts';
import { nearestInt, toInt8 } from './round.ts';

const f32 = Math.fround;

const QK = 256;
const SUB = 16;
const BYTES = 210;
const QL = 0; // byte offsets inside the block
const QH = 128;
const SCALES = 192;
const D = 208;

const L = new Uint8Array(QK); // scratch: codes q + 32, 0..63
const highBits = new Uint8Array(QK); // scratch: their top two bits, for packCrumbs
const fitScales = new Float32Array(QK / SUB); // scratch: the search's sub-block scales

/** Byte of ql holding element e's low four bits, and whether it is the high nibble. */
function lowNibbleOf(e: number): { byte: number; high: boolean } {
  const k = (e >>> 5) & 3;
  return { byte: 64 * (e >>> 7) + 32 * (k & 1) + (e & 31), high: k >= 2 };
}

function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  for (let s = 0; s < QK / SUB; s++) fitScales[s] = makeQxQuants(SUB, 32, x, xAt + SUB * s, L, SUB * s);
  // The signed scale of largest magnitude (the first on a tie).
  const { max: maxScale, amax } = signedMax(fitScales, 0, QK / SUB);
  if (amax < GROUP_MAX_EPS) {
    bytes.fill(0, at, at + BYTES); // d = 0 (f16 +0 is all zero bits too)
    return;
  }
  // Like Q4_0's d = max / -8: the largest scale maps to -128, int8's extra negative level.
  const iscale = f32(-128 / maxScale);
  writeF16(bytes, at + D, f32(1 / iscale));
  for (let s = 0; s < QK / SUB; s++) {
    bytes[at + SCALES + s] = toInt8(Math.min(127, nearestInt(f32(iscale * fitScales[s])))) & 0xff;
  }
  // Codes again against the stored scales; a sub-block with scale 0 keeps the search's codes.
  const d = readF16(bytes, at + D);
  for (let s = 0; s < QK / SUB; s++) {
    const dl = f32(d * toInt8(bytes[at + SCALES + s]));
    if (dl === 0) continue;
    for (let i = 0; i < SUB; i++) {
      const e = SUB * s + i;
      L[e] = Math.max(-32, Math.min(31, nearestInt(f32(x[xAt + e] / dl)))) + 32;
    }
  }
  for (let e = 0; e < QK; e++) {
    const { byte, high } = lowNibbleOf(e);
    const nibble = L[e] & 0x0f;
    bytes[at + QL + byte] = high ? (bytes[at + QL + byte] & 0x0f) | (nibble << 4) : nibble;
    highBits[e] = L[e] >>> 4;
  }
  packCrumbs(bytes, at + QH, highBits);
}

const blockCodes: BlockCodes = (codes, scales, mins, bytes, at) => {
  const d = readF16(bytes, at + D);
  for (let s = 0; s < QK / SUB; s++) {
    // ggml multiplies d * sc first, then the code, each rounding to f32: d * sc is exact (11-bit
    // significand times 8 bits), times a 6-bit code can need 25 bits and then rounds.
    scales[s] = f32(d * toInt8(bytes[at + SCALES + s]));
    mins[s] = -0;
  }
  for (let e = 0; e < QK; e++) {
    const { byte, high } = lowNibbleOf(e);
    const low = high ? bytes[at + QL + byte] >>> 4 : bytes[at + QL + byte] & 0x0f;
    codes[e] = (low | (unpackCrumb(bytes, at + QH, e) << 4)) - 32;
  }
};

export const q6_k: BlockCodec = makeCodec(QK, SUB, quantizeBlock, blockCodes);
