/**
 * Element types a tensor can hold, and how each is stored.
 *
 * Plain types (f32, f16, bf16, i8, u8, i32) store one element per array slot.
 * Block types (ggml's quantized formats, spec.md §5, and the ones GGUF files from
 * model hubs use) store a row as blocks of a fixed number of elements, each block a fixed
 * number of bytes; their tensors keep the logical shape in elements and the bytes in a
 * Uint8Array. BLOCK_LAYOUT below is the one list of them.
 */
import { allocBuffer } from './memory.ts';

/** Layout of a ggml block: elements per block and bytes per block. */
export interface BlockLayout {
  readonly elements: number;
  readonly bytes: number;
}

/**
 * Every block dtype with its layout, as ggml stores it (ggml-common.h's block_* structs; d, dmin
 * and m are f16). The bytes add up as:
 *   q4_0   32 el:  d | qs[16] nibbles                                     2 + 16           =  18
 *   q4_1   32 el:  d | m | qs[16]                                         4 + 16           =  20
 *   q5_0   32 el:  d | qh[4] (5th bits) | qs[16]                          2 + 4 + 16       =  22
 *   q5_1   32 el:  d | m | qh[4] | qs[16]                                 4 + 4 + 16       =  24
 *   q8_0   32 el:  d | qs[32] int8                                        2 + 32           =  34
 *   q2_k  256 el:  scales[16] (4-bit scale, 4-bit min) | qs[64] | d | dmin  16 + 64 + 4    =  84
 *   q3_k  256 el:  hmask[32] | qs[64] | scales[12] (6-bit) | d             32 + 64 + 12 + 2 = 110
 *   q4_k  256 el:  d | dmin | scales[12] (6-bit scales, mins) | qs[128]    4 + 12 + 128     = 144
 *   q5_k  256 el:  d | dmin | scales[12] | qh[32] | qs[128]                4 + 12 + 32 + 128 = 176
 *   q6_k  256 el:  ql[128] | qh[64] | scales[16] int8 | d                  128 + 64 + 16 + 2 = 210
 *   iq4_nl 32 el:  d | qs[16] (indices into a 16-value non-linear table)   2 + 16           =  18
 *   iq4_xs 256 el: d | scales_h u16 | scales_l[4] | qs[128]                2 + 2 + 4 + 128  = 136
 * The reference dequantizers (packages/reference/src/ops) draw each layout bit by bit.
 */
export const BLOCK_LAYOUT = {
  q4_0: { elements: 32, bytes: 18 },
  q4_1: { elements: 32, bytes: 20 },
  q5_0: { elements: 32, bytes: 22 },
  q5_1: { elements: 32, bytes: 24 },
  q8_0: { elements: 32, bytes: 34 },
  q2_k: { elements: 256, bytes: 84 },
  q3_k: { elements: 256, bytes: 110 },
  q4_k: { elements: 256, bytes: 144 },
  q5_k: { elements: 256, bytes: 176 },
  q6_k: { elements: 256, bytes: 210 },
  iq4_nl: { elements: 32, bytes: 18 },
  iq4_xs: { elements: 256, bytes: 136 },
} as const satisfies Record<string, BlockLayout>;

export type PlainDType = 'f32' | 'f16' | 'bf16' | 'i8' | 'u8' | 'i32';
/** A block-quantized element type (q4_0, q8_0, q4_K, ...): the keys of BLOCK_LAYOUT. */
export type BlockDType = keyof typeof BLOCK_LAYOUT;
/** A tensor's element type: a plain one (f32, f16, bf16, i8, u8, i32) or a block-quantized one. */
export type DType = PlainDType | BlockDType;

/** The block dtypes, in BLOCK_LAYOUT's order. */
export const BLOCK_DTYPES = Object.keys(BLOCK_LAYOUT) as readonly BlockDType[];

/** The typed array behind each dtype. f16 and bf16 are raw bit patterns; block types are bytes. */
export type StorageOf = {
  f32: Float32Array;
  f16: Uint16Array;
  bf16: Uint16Array;
  i8: Int8Array;
  u8: Uint8Array;
  i32: Int32Array;
} & { [K in BlockDType]: Uint8Array };

export type Storage = StorageOf[DType];

export const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i8', 'u8', 'i32', ...BLOCK_DTYPES];

const ARRAY_OF: Readonly<
  Record<
    PlainDType,
    { new (buffer: ArrayBufferLike, byteOffset: number, length: number): Storage; BYTES_PER_ELEMENT: number }
  >
> = {
  f32: Float32Array,
  f16: Uint16Array,
  bf16: Uint16Array,
  i8: Int8Array,
  u8: Uint8Array,
  i32: Int32Array,
};

export function isBlockDType(dtype: DType): dtype is BlockDType {
  return Object.hasOwn(BLOCK_LAYOUT, dtype);
}

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && (DTYPES as readonly string[]).includes(value);
}

/** Bytes needed to store `count` elements of `dtype` (count must be whole blocks for block types). */
export function byteSize(dtype: DType, count: number): number {
  if (isBlockDType(dtype)) {
    const { elements, bytes } = BLOCK_LAYOUT[dtype];
    return (count / elements) * bytes;
  }
  return count * ARRAY_OF[dtype].BYTES_PER_ELEMENT;
}

/** A typed array of the right kind for `dtype`, viewing `buffer` from `byteOffset`, holding `count` elements. */
export function storageView(dtype: DType, buffer: ArrayBufferLike, byteOffset: number, count: number): Storage {
  if (isBlockDType(dtype)) return new Uint8Array(buffer, byteOffset, byteSize(dtype, count));
  return new ARRAY_OF[dtype](buffer, byteOffset, count);
}

/** Allocates zeroed storage for `count` elements; `shared` puts it in a SharedArrayBuffer for workers. */
export function allocStorage(dtype: DType, count: number, shared = false): Storage {
  const bytes = byteSize(dtype, count);
  // Round up to 8 bytes so every typed-array view of the buffer is aligned.
  const rounded = Math.ceil(bytes / 8) * 8;
  return storageView(dtype, allocBuffer(rounded, shared, `allocStorage: ${count} ${dtype} elements`), 0, count);
}

/** True when `data` is the typed-array kind `dtype` is stored in. */
export function storageMatches(dtype: DType, data: Storage): boolean {
  if (isBlockDType(dtype)) return data instanceof Uint8Array;
  return data instanceof ARRAY_OF[dtype];
}
