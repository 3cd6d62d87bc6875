/**
 * What ggml's block formats share. Every block opens or closes with little-endian f16 numbers
 * (scales, minimums) and packs small integer codes into bytes; the layouts are drawn in each
 * family's file:
 *
 *   qx-0.ts    Q4_0, Q5_0         32 elements, x = d * (q - 2^(bits-1))
 *   qx-1.ts    Q4_1, Q5_1         32 elements, x = d * q + m
 *   q8-0.ts    Q8_0               32 elements, x = d * q, q int8
 *   q2-k.ts, q3-k.ts, qx-k.ts (Q4_K, Q5_K), q6-k.ts: 256-element super-blocks of 16 or 32-element
 *              sub-blocks whose scales are themselves quantized against an f16 super-scale
 *   iq4.ts     IQ4_NL, IQ4_XS     codes index a 16-entry non-linear table
 *
 * The 32-nibble packing (ggml's, not the engine's INT4 one), used by Q4_0, Q4_1, the low nibbles
 * of Q5_0 / Q5_1, and each 32-element sub-block of IQ4_NL / IQ4_XS: byte j of 16 holds element j
 * in its low nibble and element j + 16 in its high nibble, j = 0..15. So the first half of the
 * 32 sits in the low nibbles and the second half in the high ones.
 *
 * Each format provides a `BlockCodec`: how to turn one block of f32 values into bytes and back,
 * and its integer view (`blockCodes`: the codes c_j and, per sub-block, the f32 scale dl and
 * minimum m with x_j = dl * c_j + m), which the 'int8' product (block-int8-matvec.ts) multiplies
 * and from which `makeCodec` derives the dequantizer, so each family unpacks its bits in one place.
 * quantize.ts walks the blocks.
 */
import { f16ToF32, f32ToF16 } from '@sparq/core';

const f32 = Math.fround;

/** Elements of a nibble group, and of every legacy block and IQ4_NL block (ggml's QK4_0 = ... = 32). */
export const BLOCK = 32;

/**
 * One block as integers: codes[0 .. elements) the integer codes c_j, and per sub-block
 * s < elements / subBlock (element j is in sub-block floor(j / subBlock)) its f32 scale
 * scales[s] = dl_s and minimum mins[s] = m_s, such that element j's value is dl_s * c_j + m_s.
 * A type without a minimum gives m_s = -0: x + -0 = x for every f32 x, signed zeros included, so
 * one formula (makeCodec) dequantizes every type as ggml does.
 */
export type BlockCodes = (
  codes: Int32Array,
  scales: Float32Array,
  mins: Float32Array,
  bytes: Uint8Array,
  at: number,
) => void;

/** One format's block conversion. `x` and `out` are flat arrays; `xAt`/`at` index the block's first element/byte. */
export interface BlockCodec {
  /** Elements per block (32 or 256) and per sub-block (16 or 32: the run sharing one dl and m in blockCodes). */
  readonly elements: number;
  readonly subBlock: number;
  /** x[xAt .. xAt+elements) f32 -> bytes[at .. at+blockBytes) */
  quantizeBlock(bytes: Uint8Array, at: number, x: Float32Array, xAt: number): void;
  /** bytes[at .. at+blockBytes) -> out[outAt .. outAt+elements) f32 */
  dequantizeBlock(out: Float32Array, outAt: number, bytes: Uint8Array, at: number): void;
  /** bytes[at .. at+blockBytes) -> its integer view (BlockCodes) */
  blockCodes: BlockCodes;
}

/**
 * A family's codec from its quantizer and integer view: dequantizeBlock is
 *   x_j = f32(f32(dl_s * c_j) + m_s)
 * which is ggml's `dequantize_row_*` bit for bit: ggml computes d * q (or dl * q) in f32 and then
 * adds the minimum (or subtracts dmin * mn, i.e. adds m = -(dmin * mn): x - y is x + (-y) in IEEE
 * arithmetic), and for types without a minimum m = -0 leaves f32(dl * c_j) as it is, -0 included.
 * (In JavaScript dl * c_j is an exact double product of an f32 and a small integer, rounded once by f32.)
 */
export function makeCodec(
  elements: number,
  subBlock: number,
  quantizeBlock: BlockCodec['quantizeBlock'],
  blockCodes: BlockCodes,
): BlockCodec {
  const codes = new Int32Array(elements); // scratch: (elements) one block's codes
  const scales = new Float32Array(elements / subBlock); // (sub-blocks) dl_s
  const mins = new Float32Array(elements / subBlock); // (sub-blocks) m_s
  return {
    elements,
    subBlock,
    quantizeBlock,
    blockCodes,
    dequantizeBlock(out, outAt, bytes, at) {
      blockCodes(codes, scales, mins, bytes, at);
      // Sub-block s covers elements [s * subBlock, (s + 1) * subBlock).
      for (let s = 0; s < scales.length; s++) {
        for (let j = s * subBlock; j < (s + 1) * subBlock; j++)
          out[outAt + j] = f32(f32(scales[s] * codes[j]) + mins[s]);
      }
    },
  };
}

/** Reads the f16 at bytes[at], bytes[at+1] (little-endian) as its exact f32 value. */
export function readF16(bytes: Uint8Array, at: number): number {
  return f16ToF32(bytes[at] | (bytes[at + 1] << 8));
}

/** Stores v as f16 (round to nearest even, as F16C does) at bytes[at], bytes[at+1], little-endian. */
export function writeF16(bytes: Uint8Array, at: number, v: number): void {
  const bits = f32ToF16(v);
  bytes[at] = bits & 0xff;
  bytes[at + 1] = bits >>> 8;
}

/**
 * Packs 32 nibbles into qs = bytes[at .. at+16): `nibble(j)` gives element j's code; only its
 * low 4 bits are kept (Q5's fifth bit goes elsewhere). Byte j = element j (low) | element j + 16 (high).
 */
export function packNibbles(bytes: Uint8Array, at: number, nibble: (j: number) => number): void {
  for (let j = 0; j < BLOCK / 2; j++) {
    bytes[at + j] = (nibble(j) & 0x0f) | ((nibble(j + BLOCK / 2) & 0x0f) << 4);
  }
}

/** The 4-bit code (0..15) of element j (0..31) of the qs bytes starting at bytes[at]. */
export function unpackNibble(bytes: Uint8Array, at: number, j: number): number {
  // Elements 0..15 are the low nibbles of bytes 0..15, elements 16..31 their high nibbles.
  return j < BLOCK / 2 ? bytes[at + j] & 0x0f : bytes[at + j - BLOCK / 2] >>> 4;
}

/** The little-endian uint32 at bytes[at .. at+4) (Q5's qh: bit j is element j's fifth bit). */
export function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)) >>> 0;
}

/** Writes `n` bits, bit i = bit(i), as a little-endian bit string at bytes[at ..] (n a multiple of 8). */
export function packBits(bytes: Uint8Array, at: number, n: number, bit: (i: number) => number): void {
  for (let b = 0; b < n / 8; b++) {
    let byte = 0;
    for (let k = 0; k < 8; k++) byte |= bit(8 * b + k) << k;
    bytes[at + b] = byte;
  }
}
