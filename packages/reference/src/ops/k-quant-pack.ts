/**
 * Bit packings the K-quants share (ggml-common.h's block_q2_K ... block_q6_K).
 *
 * Two-bit planes ("crumbs"; Q2_K's codes, Q3_K's low two bits, Q6_K's high two bits): a 256-element
 * super-block is two halves of 128, and element e = 128 h + 32 k + l (k = 0..3, l = 0..31) sits in
 * byte 32 h + l at bits 2k and 2k + 1. One byte holds four elements 32 apart, so a SIMD kernel
 * gets 32 consecutive codes from one 32-byte load and a shift by 2k.
 *
 * High-bit planes (Q3_K's hmask, Q5_K's qh): 32 bytes; element e's bit is bit e >> 5 of byte e & 31,
 * the same "32 apart" idea: byte l holds the bits of elements l, l + 32, ..., l + 224.
 *
 * Packed 6-bit scales and minimums of Q4_K / Q5_K (12 bytes for 8 scales sc and 8 minimums mn):
 *   bytes 0..3:  sc[j] in bits 0..5, bits 6..7 = the top two bits of sc[j + 4]
 *   bytes 4..7:  mn[j] in bits 0..5, bits 6..7 = the top two bits of mn[j + 4]
 *   bytes 8..11: the low nibbles: sc[j + 4] in bits 0..3, mn[j + 4] in bits 4..7
 * (j = 0..3; ggml's `get_scale_min_k4` reads it.) Q3_K packs its 16 6-bit scales differently (q3-k.ts).
 */

/** Element e's 2-bit code from the 64 crumb bytes at bytes[at ..]. */
export function unpackCrumb(bytes: Uint8Array, at: number, e: number): number {
  const h = e >>> 7; // which 128-element half
  const k = (e >>> 5) & 3; // which 32-element quarter of the half: the bit pair
  return (bytes[at + 32 * h + (e & 31)] >>> (2 * k)) & 3;
}

/** Packs the low two bits of codes[0 .. 256) into 64 crumb bytes at bytes[at ..]. */
export function packCrumbs(bytes: Uint8Array, at: number, codes: Uint8Array): void {
  for (let h = 0; h < 2; h++) {
    for (let l = 0; l < 32; l++) {
      const e = 128 * h + l;
      bytes[at + 32 * h + l] =
        (codes[e] & 3) | ((codes[e + 32] & 3) << 2) | ((codes[e + 64] & 3) << 4) | ((codes[e + 96] & 3) << 6);
    }
  }
}

/** Element e's bit from the 32-byte high-bit plane at bytes[at ..]. */
export function unpackHighBit(bytes: Uint8Array, at: number, e: number): number {
  return (bytes[at + (e & 31)] >>> (e >>> 5)) & 1;
}

/** Writes the 32-byte high-bit plane at bytes[at ..]: element e's bit is bit(e). */
export function packHighBits(bytes: Uint8Array, at: number, bit: (e: number) => number): void {
  for (let l = 0; l < 32; l++) {
    let byte = 0;
    for (let k = 0; k < 8; k++) byte |= bit(32 * k + l) << k;
    bytes[at + l] = byte;
  }
}

/** Sub-block j's (0..7) 6-bit scale and minimum from the 12 packed bytes at bytes[at ..] (ggml's get_scale_min_k4). */
export function unpackScaleMin(bytes: Uint8Array, at: number, j: number): { sc: number; mn: number } {
  if (j < 4) return { sc: bytes[at + j] & 63, mn: bytes[at + j + 4] & 63 };
  return {
    sc: (bytes[at + j + 4] & 0x0f) | ((bytes[at + j - 4] >>> 6) << 4),
    mn: (bytes[at + j + 4] >>> 4) | ((bytes[at + j] >>> 6) << 4),
  };
}

/** Packs 8 scales and 8 minimums (each 0..63) into the 12 bytes at bytes[at ..]. */
export function packScaleMin(bytes: Uint8Array, at: number, sc: ArrayLike<number>, mn: ArrayLike<number>): void {
  for (let j = 0; j < 4; j++) {
    bytes[at + j] = sc[j] | ((sc[j + 4] >>> 4) << 6);
    bytes[at + j + 4] = mn[j] | ((mn[j + 4] >>> 4) << 6);
    bytes[at + j + 8] = (sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4);
  }
}
