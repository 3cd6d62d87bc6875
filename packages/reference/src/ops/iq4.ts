/**
 * ggml's IQ4_NL and IQ4_XS: 4-bit codes that index a fixed non-linear table of 16 int8 levels
 * rather than standing for evenly spaced values; the levels crowd near zero, where trained weights
 * crowd, so 4 bits buy the accuracy of about 4.5:
 *
 *   LEVELS = -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113
 *
 *   IQ4_NL block (18 bytes, 32 elements)  = d f16 | qs[16]                       x = d * LEVELS[q]
 *   IQ4_XS block (136 bytes, 256 elements) = d f16 | scales_h u16 | scales_l[4] | qs[128]
 *     8 sub-blocks of 32, x = d * (ls - 32) * LEVELS[q], ls a 6-bit sub-block scale:
 *     scales_l[s >> 1]: its low nibble (low for even s, high for odd); scales_h bits 2s, 2s + 1: its top two bits
 *   qs: every 32 elements (the block, or one sub-block at 16 s) pack like Q4_0 (ggml-block.ts)
 *
 * Quantizing, byte-exact with ggml's `quantize_iq4_nl` / `quantize_iq4_xs` without an importance
 * matrix (the path llama-quantize takes; `quantize_row_iq4_nl_ref` is a cheaper variant that skips
 * the search below, so llama-quantize's files are the ones to match), per 32 elements with weights x^2:
 * 1. start from d = max / 127 (max the signed value of largest magnitude) and map each x / d to
 *    the nearest level, then refit d by weighted least squares, d = sum w l x / sum w l^2;
 * 2. try the inverse scales (k - 127) / max, k = -7..7, the same way, keeping the d with the
 *    largest (sum w l x)^2 / sum w l^2, i.e. the smallest weighted squared error;
 * 3. IQ4_NL stores that d in f16 and maps x / d to levels again. IQ4_XS quantizes the 8 sub-block
 *    d's against D = max d / -32: ls = clamp(nearestInt(d / D), -32, 31) + 32, stores D, and maps
 *    x / (D (ls - 32)) to levels.
 * Integer view (blockCodes, ggml-block.ts): c = LEVELS[q] (the int8 level, not its index), no
 * minimum (m = -0); IQ4_NL: dl = d for its 32 elements; IQ4_XS: sub-blocks of 32, dl = f32(D * (ls - 32)).
 */
import { BLOCK, makeCodec, packNibbles, readF16, unpackNibble, writeF16, type BlockCodec } from './ggml-block.ts';
import { GROUP_MAX_EPS } from './k-quant-search.ts';
import { nearestInt } from './round.ts';

const f32 = Math.fround;

const LEVELS = Int8Array.of(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

/** How many inverse scales around -127 / max the search tries on each side (ggml's ntry). */
const TRIES = 7;

/** The index of the level nearest v (ties to the upper one), by bisection (ggml's best_index_int8). */
function nearestLevel(v: number): number {
  if (v <= LEVELS[0]) return 0;
  if (v >= LEVELS[15]) return 15;
  let lo = 0;
  let hi = 15;
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (v < LEVELS[mid]) hi = mid;
    else lo = mid;
  }
  // Both differences in f32, as the C compares them.
  return f32(v - LEVELS[hi - 1]) < f32(LEVELS[hi] - v) ? hi - 1 : hi;
}

const weights = new Float32Array(BLOCK);
const fitScales = new Float32Array(8); // scratch: IQ4_XS's sub-block scales from the search

/** Sum w l x and sum w l^2 over x[at .. at+32), l the levels nearest id * x. */
function fit(x: Float32Array, at: number, id: number): { sumqx: number; sumq2: number } {
  let sumqx = 0;
  let sumq2 = 0;
  for (let j = 0; j < BLOCK; j++) {
    const q = LEVELS[nearestLevel(f32(id * x[at + j]))];
    const w = weights[j];
    sumqx = f32(sumqx + f32(f32(w * q) * x[at + j]));
    sumq2 = f32(sumq2 + f32(f32(w * q) * q));
  }
  return { sumqx, sumq2 };
}

/** The least-squares scale of x[at .. at+32) over the search of steps 1-2 (0 for an all-zero run). */
function bestScale(x: Float32Array, at: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < BLOCK; j++) {
    const v = x[at + j];
    weights[j] = f32(v * v);
    if (Math.abs(v) > amax) {
      amax = Math.abs(v);
      max = v;
    }
  }
  if (amax < GROUP_MAX_EPS) return 0;
  const d0 = f32(-max / LEVELS[0]);
  let { sumqx, sumq2 } = fit(x, at, f32(1 / d0));
  let d = f32(sumqx / sumq2);
  let best = f32(d * sumqx);
  for (let k = -TRIES; k <= TRIES; k++) {
    ({ sumqx, sumq2 } = fit(x, at, f32((k + LEVELS[0]) / max)));
    if (sumq2 > 0 && f32(sumqx * sumqx) > f32(best * sumq2)) {
      d = f32(sumqx / sumq2);
      best = f32(d * sumqx);
    }
  }
  return d;
}

/** Maps x[at .. at+32) to levels at scale d (index 8, the level 1, stands in for 0 when d is 0) and packs them. */
function packLevels(bytes: Uint8Array, qsAt: number, x: Float32Array, at: number, d: number): void {
  const id = d !== 0 ? f32(1 / d) : 0;
  packNibbles(bytes, qsAt, (j) => nearestLevel(f32(id * x[at + j])));
}

export const iq4_nl: BlockCodec = makeCodec(
  BLOCK,
  BLOCK,
  (bytes, at, x, xAt) => {
    const d = bestScale(x, xAt);
    writeF16(bytes, at, d);
    // Levels again for the final d (ggml does this with the f32 d, not the f16 one).
    packLevels(bytes, at + 2, x, xAt, d);
  },
  (codes, scales, mins, bytes, at) => {
    // d * level is exact: an f16 times an int8 needs at most 18 bits.
    scales[0] = readF16(bytes, at);
    mins[0] = -0;
    for (let j = 0; j < BLOCK; j++) codes[j] = LEVELS[unpackNibble(bytes, at + 2, j)];
  },
);

const XS_SCALES_H = 2; // byte offsets inside an IQ4_XS block
const XS_SCALES_L = 4;
const XS_QS = 8;

/** Sub-block s's 6-bit scale (0..63) of the IQ4_XS block at bytes[at]. */
function xsScale(bytes: Uint8Array, at: number, s: number): number {
  const low = (bytes[at + XS_SCALES_L + (s >>> 1)] >>> (4 * (s & 1))) & 0x0f;
  const scalesH = bytes[at + XS_SCALES_H] | (bytes[at + XS_SCALES_H + 1] << 8);
  return low | (((scalesH >>> (2 * s)) & 3) << 4);
}

export const iq4_xs: BlockCodec = makeCodec(
  8 * BLOCK,
  BLOCK,
  (bytes, at, x, xAt) => {
    let maxScale = 0;
    let amax = 0;
    for (let s = 0; s < 8; s++) {
      fitScales[s] = bestScale(x, xAt + BLOCK * s);
      if (Math.abs(fitScales[s]) > amax) {
        amax = Math.abs(fitScales[s]);
        maxScale = fitScales[s];
      }
    }
    // -0 when every sub-block is zero: f16 0x8000, as ggml stores it.
    const d = f32(-maxScale / 32);
    writeF16(bytes, at, d);
    const id = d !== 0 ? f32(1 / d) : 0;
    let scalesH = 0;
    bytes.fill(0, at + XS_SCALES_L, at + XS_SCALES_L + 4);
    for (let s = 0; s < 8; s++) {
      const l = Math.max(-32, Math.min(31, nearestInt(f32(id * fitScales[s]))));
      packLevels(bytes, at + XS_QS + 16 * s, x, xAt + BLOCK * s, f32(d * l));
      const ls = l + 32;
      bytes[at + XS_SCALES_L + (s >>> 1)] |= (ls & 0x0f) << (4 * (s & 1));
      scalesH |= (ls >>> 4) << (2 * s);
    }
    bytes[at + XS_SCALES_H] = scalesH & 0xff;
    bytes[at + XS_SCALES_H + 1] = scalesH >>> 8;
  },
  (codes, scales, mins, bytes, at) => {
    const d = readF16(bytes, at);
    for (let s = 0; s < 8; s++) {
      // dl * level is exact in f32: 11-bit d times |ls - 32| <= 32 times |level| <= 127 needs at most 24 bits.
      scales[s] = f32(d * (xsScale(bytes, at, s) - 32));
      mins[s] = -0;
      for (let j = 0; j < BLOCK; j++) codes[BLOCK * s + j] = LEVELS[unpackNibble(bytes, at + XS_QS + 16 * s, j)];
    }
  },
);
