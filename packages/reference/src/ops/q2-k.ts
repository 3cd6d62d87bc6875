/**
 * ggml's Q2_K super-block: 256 weights as 2-bit codes q in 0..3, in 16 sub-blocks of 16, each
 * sub-block with its own scale and minimum, x = d * sc * q - dmin * mn. The sub-block scales sc
 * and minimums mn are themselves 4-bit integers against the two f16 super-scales d and dmin.
 *
 *   block (84 bytes) = scales[16] | qs[64] | d f16 | dmin f16
 *     scales[s]: sub-block s's 4-bit scale sc in the low nibble, its 4-bit minimum mn in the high
 *     qs: four 2-bit codes per byte; the 256 elements are two halves of 128, and element
 *         e = 128 h + 32 k + l (k = 0..3, l = 0..31) sits in byte 32 h + l at bits 2k, 2k + 1
 *         (so one byte holds elements 32 apart: a SIMD kernel shifts a 32-byte row by 2k)
 *
 * Quantizing (ggml's `quantize_row_q2_K_ref`, byte-exact):
 * 1. each sub-block: scale and minimum from makeQkx2Quants (nmax 3, weights |x|, absolute error,
 *    trial inverse scales (-0.5 + 0.1 k + 3) / range, k = 0..15);
 * 2. d = max scale / 15 and sc = nearestInt(15 / max scale * scale); the same for the minimums;
 * 3. the codes again against the stored (f16, 4-bit) values: q = clamp(nearestInt((x + dmin mn) / (d sc)), 0, 3),
 *    so dequantization sees the codes that best fit what it will actually use.
 * Integer view (blockCodes, ggml-block.ts): sub-blocks of 16, c = q, dl = f32(d * sc), m = -f32(dmin * mn).
 */
import { packCrumbs, unpackCrumb } from './k-quant-pack.ts';
import { fitSubBlocks } from './k-quant-search.ts';
import { makeCodec, readF16, writeF16, type BlockCodec, type BlockCodes } from './ggml-block.ts';
import { nearestInt } from './round.ts';

const f32 = Math.fround;

const QK = 256; // elements per super-block
const SUB = 16; // elements per sub-block
const SCALES = 0; // byte offsets inside the block
const QS = 16;
const D = 80;
const DMIN = 82;

const L = new Uint8Array(QK); // scratch: one super-block's codes
/** The scale search: codes 0..3, trial inverse scales (-0.5 + 0.1 k + 3) / range for k = 0..15, absolute error. */
const SEARCH = { nmax: 3, rmin: f32(-0.5), nstep: 15, useMad: true };
const fitScales = new Float32Array(QK / SUB); // scratch: the search's sub-block scales and minimums
const fitMins = new Float32Array(QK / SUB);

function quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void {
  // Weights |x|: large values matter most.
  const weigh = (at: number, weights: Float32Array) => {
    for (let i = 0; i < SUB; i++) weights[i] = Math.abs(x[at + i]);
  };
  const { maxScale, maxMin } = fitSubBlocks(x, xAt, SUB, QK / SUB, weigh, SEARCH, {
    L,
    scales: fitScales,
    mins: fitMins,
  });
  // Sub-block scales to 4 bits against d = maxScale / 15 (nibble 0 when the whole block has none).
  const inverseScale = maxScale > 0 ? f32(15 / maxScale) : 0;
  const inverseMin = maxMin > 0 ? f32(15 / maxMin) : 0;
  for (let s = 0; s < QK / SUB; s++) {
    // nearestInt gives 0..15 here; `& 0xff` is C's store to uint8_t.
    const sc = maxScale > 0 ? nearestInt(f32(inverseScale * fitScales[s])) & 0xff : 0;
    const mn = maxMin > 0 ? nearestInt(f32(inverseMin * fitMins[s])) & 0xff : 0;
    bytes[at + SCALES + s] = (sc | (mn << 4)) & 0xff;
  }
  writeF16(bytes, at + D, maxScale > 0 ? f32(maxScale / 15) : 0);
  writeF16(bytes, at + DMIN, maxMin > 0 ? f32(maxMin / 15) : 0);
  // Codes again against the stored scales; a sub-block with scale 0 keeps the search's codes.
  const d = readF16(bytes, at + D);
  const dmin = readF16(bytes, at + DMIN);
  for (let s = 0; s < QK / SUB; s++) {
    const dl = f32(d * (bytes[at + SCALES + s] & 0x0f));
    if (dl === 0) continue;
    const ml = f32(dmin * (bytes[at + SCALES + s] >>> 4));
    for (let i = 0; i < SUB; i++) {
      const e = SUB * s + i;
      L[e] = Math.max(0, Math.min(3, nearestInt(f32(f32(x[xAt + e] + ml) / dl))));
    }
  }
  packCrumbs(bytes, at + QS, L);
}

const blockCodes: BlockCodes = (codes, scales, mins, bytes, at) => {
  const d = readF16(bytes, at + D);
  const dmin = readF16(bytes, at + DMIN);
  for (let s = 0; s < QK / SUB; s++) {
    const packed = bytes[at + SCALES + s];
    // dl * q is exact (2-bit code), so dequantizing rounds once, at the minimum, as in ggml.
    scales[s] = f32(d * (packed & 0x0f));
    mins[s] = -f32(dmin * (packed >>> 4));
  }
  for (let e = 0; e < QK; e++) codes[e] = unpackCrumb(bytes, at + QS, e);
};

export const q2_k: BlockCodec = makeCodec(QK, SUB, quantizeBlock, blockCodes);
