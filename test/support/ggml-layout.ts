/**
 * The tests' own reading of ggml's block layouts (ggml-common.h's block_* structs), written from
 * the layouts, not from the reference backend: for element e of the block at bytes[at], its
 * stored code and the f32 value each code would decode to (in the f32 operation order of ggml's
 * dequantize_row_*). Conformance suites check every backend's dequantize against it and measure
 * round-trip errors against the grid of values a block can represent. Also the element's integer
 * view, as the 'int8' product reads it (packages/reference/src/ops/block-int8-matvec.ts: value =
 * dl * c + m with c the signed code or IQ4 level), for the conformance of that product.
 */
import { f16ToF32, type BlockDType } from '@sparq/core';

const f32 = Math.fround;

/** IQ4_NL / IQ4_XS: the 16 int8 levels a 4-bit code indexes (ggml's kvalues_iq4nl). */
export const IQ4_LEVELS = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/** Where each dtype keeps its f16 fields (byte offsets in a block): random blocks give them finite values. */
export const F16_FIELDS: Record<BlockDType, number[]> = {
  q4_0: [0],
  q5_0: [0],
  q4_1: [0, 2],
  q5_1: [0, 2],
  q8_0: [0],
  q2_k: [80, 82],
  q3_k: [108],
  q4_k: [0, 2],
  q5_k: [0, 2],
  q6_k: [208],
  iq4_nl: [0],
  iq4_xs: [0],
};

/**
 * Round-trip NMSE bound on uniform data. A grid of L evenly spaced levels over the data's range
 * leaves noise of step^2 / 12 with step = range / (L - 1), against the data's variance range^2 / 12:
 * NMSE = 1 / (L - 1)^2. IQ4's uneven levels: sum over the gaps g of g^3 / 12, over the span
 * (the integral of the squared error), against span^2 / 12. Twice that, since the grid is fitted to
 * 16 or 32 samples with f16/6-bit scales rather than to the exact range.
 */
export function nmseBound(dtype: BlockDType): number {
  if (dtype === 'iq4_nl' || dtype === 'iq4_xs') {
    const span = IQ4_LEVELS[15] - IQ4_LEVELS[0];
    let integral = 0;
    for (let i = 1; i < 16; i++) integral += (IQ4_LEVELS[i] - IQ4_LEVELS[i - 1]) ** 3 / 12;
    return (2 * (integral / span)) / (span ** 2 / 12);
  }
  const bits: Record<string, number> = {
    q2_k: 2,
    q3_k: 3,
    q4_0: 4,
    q4_1: 4,
    q4_k: 4,
    q5_0: 5,
    q5_1: 5,
    q5_k: 5,
    q6_k: 6,
    q8_0: 8,
  };
  return 2 / (2 ** bits[dtype] - 1) ** 2;
}

/** Element e's code and the decode of any code, for one block. `codes` is how many codes exist. */
export interface ElementGrid {
  code: number;
  codes: number;
  value: (code: number) => number;
  /** The f16 fields the value is built from (for the f16-rounding slack of round trips). */
  halves: number[];
  /** The 'int8' product's view of this element: integer c, its sub-block's f32 scale dl and minimum m (0 if none); value(code) = f32(f32(dl c) + m). */
  int8: { c: number; dl: number; m: number };
}

const h = (b: Uint8Array, at: number) => f16ToF32(b[at] | (b[at + 1] << 8));
/** Low nibble of byte j for element j < 16 of a 32-run, high nibble of byte j - 16 otherwise. */
const nibble32 = (b: Uint8Array, qs: number, j: number) => (j < 16 ? b[qs + j] & 15 : b[qs + j - 16] >> 4);
/** Bit i of a little-endian bit string. */
const bit = (b: Uint8Array, at: number, i: number) => (b[at + Math.floor(i / 8)] >> (i % 8)) & 1;
/** 2-bit planes: element e = 128 h + 32 k + l in byte 32 h + l, bits 2k..2k+1. */
const crumb = (b: Uint8Array, at: number, e: number) =>
  (b[at + 32 * Math.floor(e / 128) + (e % 32)] >> (2 * (Math.floor(e / 32) % 4))) & 3;
/** High-bit planes: element e's bit is bit floor(e / 32) of byte e mod 32. */
const highBit = (b: Uint8Array, at: number, e: number) => (b[at + (e % 32)] >> Math.floor(e / 32)) & 1;
/** Q4_K / Q5_K 6-bit scale and min of sub-block j from the 12 bytes at `at`. */
function scaleMin(b: Uint8Array, at: number, j: number): [number, number] {
  if (j < 4) return [b[at + j] & 63, b[at + j + 4] & 63];
  return [(b[at + j + 4] & 15) | ((b[at + j - 4] >> 6) << 4), (b[at + j + 4] >> 4) | ((b[at + j] >> 6) << 4)];
}
/** Q4_K / Q5_K nibble of element e: byte 32 * floor(e / 64) + e mod 32, high nibble in the second 32 of each 64. */
const kNibble = (b: Uint8Array, qs: number, e: number) => {
  const byte = b[qs + 32 * Math.floor(e / 64) + (e % 32)];
  return Math.floor(e / 32) % 2 === 0 ? byte & 15 : byte >> 4;
};

export function elementGrid(dtype: BlockDType, b: Uint8Array, at: number, e: number): ElementGrid {
  switch (dtype) {
    case 'q4_0':
    case 'q5_0': {
      const d = h(b, at);
      const five = dtype === 'q5_0';
      const code = nibble32(b, at + (five ? 6 : 2), e) | (five ? bit(b, at + 2, e) << 4 : 0);
      const half = five ? 16 : 8;
      return {
        code,
        codes: 2 * half,
        value: (q) => (q - half) * d,
        halves: [d],
        int8: { c: code - half, dl: d, m: 0 },
      };
    }
    case 'q4_1':
    case 'q5_1': {
      const [d, m] = [h(b, at), h(b, at + 2)];
      const five = dtype === 'q5_1';
      const code = nibble32(b, at + (five ? 8 : 4), e) | (five ? bit(b, at + 4, e) << 4 : 0);
      return { code, codes: five ? 32 : 16, value: (q) => f32(q * d + m), halves: [d, m], int8: { c: code, dl: d, m } };
    }
    case 'q8_0': {
      const d = h(b, at);
      const byte = b[at + 2 + e];
      // Codes 0..255 stand for the int8 values -128..127.
      const c = byte < 128 ? byte : byte - 256;
      return { code: c + 128, codes: 256, value: (q) => (q - 128) * d, halves: [d], int8: { c, dl: d, m: 0 } };
    }
    case 'q2_k': {
      const packed = b[at + Math.floor(e / 16)];
      const [d, dmin] = [h(b, at + 80), h(b, at + 82)];
      const dl = f32(d * (packed & 15));
      const ml = f32(dmin * (packed >> 4));
      const code = crumb(b, at + 16, e);
      return { code, codes: 4, value: (q) => f32(dl * q - ml), halves: [d, dmin], int8: { c: code, dl, m: -ml } };
    }
    case 'q3_k': {
      const s = Math.floor(e / 16);
      const low = s < 8 ? b[at + 96 + s] & 15 : b[at + 96 + s - 8] >> 4;
      const top = (b[at + 96 + 8 + (s % 4)] >> (2 * Math.floor(s / 4))) & 3;
      const d = h(b, at + 108);
      const dl = f32(d * ((low | (top << 4)) - 32));
      const code = crumb(b, at + 32, e) | (highBit(b, at, e) << 2); // q + 4
      return { code, codes: 8, value: (q) => f32(dl * (q - 4)), halves: [d], int8: { c: code - 4, dl, m: 0 } };
    }
    case 'q4_k':
    case 'q5_k': {
      const five = dtype === 'q5_k';
      const [sc, mn] = scaleMin(b, at + 4, Math.floor(e / 32));
      const [d, dmin] = [h(b, at), h(b, at + 2)];
      const dl = f32(d * sc);
      const ml = f32(dmin * mn);
      const code = kNibble(b, at + (five ? 48 : 16), e) | (five ? highBit(b, at + 16, e) << 4 : 0);
      return {
        code,
        codes: five ? 32 : 16,
        value: (q) => f32(dl * q - ml),
        halves: [d, dmin],
        int8: { c: code, dl, m: -ml },
      };
    }
    case 'q6_k': {
      const half = Math.floor(e / 128);
      const k = Math.floor(e / 32) % 4;
      const qlByte = b[at + 64 * half + 32 * (k % 2) + (e % 32)];
      const low = k < 2 ? qlByte & 15 : qlByte >> 4;
      const code = low | (crumb(b, at + 128, e) << 4); // q + 32
      const scale = b[at + 192 + Math.floor(e / 16)];
      const d = h(b, at + 208);
      const dl = f32(d * (scale < 128 ? scale : scale - 256));
      return { code, codes: 64, value: (q) => f32(dl * (q - 32)), halves: [d], int8: { c: code - 32, dl, m: 0 } };
    }
    case 'iq4_nl': {
      const d = h(b, at);
      const code = nibble32(b, at + 2, e);
      return {
        code,
        codes: 16,
        value: (q) => d * IQ4_LEVELS[q],
        halves: [d],
        int8: { c: IQ4_LEVELS[code], dl: d, m: 0 },
      };
    }
    case 'iq4_xs': {
      const s = Math.floor(e / 32);
      const low = (b[at + 4 + Math.floor(s / 2)] >> (4 * (s % 2))) & 15;
      const high = ((b[at + 2] | (b[at + 3] << 8)) >> (2 * s)) & 3;
      const d = h(b, at);
      const dl = f32(d * ((low | (high << 4)) - 32));
      const code = nibble32(b, at + 8 + 16 * s, e % 32);
      return {
        code,
        codes: 16,
        value: (q) => f32(dl * IQ4_LEVELS[q]),
        halves: [d],
        int8: { c: IQ4_LEVELS[code], dl, m: 0 },
      };
    }
  }
}
