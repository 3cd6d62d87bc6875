/**
 * Element types a tensor can hold, and how each is stored.
 *
 * Plain types (f32, f16, bf16, i8, u8, i32) store one element per array slot.
 * Block types (q4_0, q4_1, q8_0: ggml's formats, SPEC section 5) store a row as
 * blocks of 32 elements, each block a fixed number of bytes; their tensors keep
 * the logical shape in elements and the bytes in a Uint8Array.
 */

export type PlainDType = 'f32' | 'f16' | 'bf16' | 'i8' | 'u8' | 'i32';
export type BlockDType = 'q4_0' | 'q4_1' | 'q8_0';
export type DType = PlainDType | BlockDType;

/** The typed array behind each plain dtype. f16 and bf16 are raw bit patterns. */
export interface StorageOf {
  f32: Float32Array;
  f16: Uint16Array;
  bf16: Uint16Array;
  i8: Int8Array;
  u8: Uint8Array;
  i32: Int32Array;
  q4_0: Uint8Array;
  q4_1: Uint8Array;
  q8_0: Uint8Array;
}

export type Storage = StorageOf[DType];

/** Layout of a ggml block: elements per block and bytes per block. */
export interface BlockLayout {
  readonly elements: number;
  readonly bytes: number;
}

/** q4_0: f16 scale + 16 bytes of nibbles; q4_1: f16 scale, f16 min + 16 bytes; q8_0: f16 scale + 32 int8. */
export const BLOCK_LAYOUT: Readonly<Record<BlockDType, BlockLayout>> = {
  q4_0: { elements: 32, bytes: 18 },
  q4_1: { elements: 32, bytes: 20 },
  q8_0: { elements: 32, bytes: 34 },
};

export const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i8', 'u8', 'i32', 'q4_0', 'q4_1', 'q8_0'];

const ARRAY_OF: Readonly<Record<PlainDType, { new (buffer: ArrayBufferLike, byteOffset: number, length: number): Storage; BYTES_PER_ELEMENT: number }>> = {
  f32: Float32Array,
  f16: Uint16Array,
  bf16: Uint16Array,
  i8: Int8Array,
  u8: Uint8Array,
  i32: Int32Array,
};

export function isBlockDType(dtype: DType): dtype is BlockDType {
  return dtype === 'q4_0' || dtype === 'q4_1' || dtype === 'q8_0';
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
  const buffer = shared ? new SharedArrayBuffer(Math.ceil(bytes / 8) * 8) : new ArrayBuffer(Math.ceil(bytes / 8) * 8);
  return storageView(dtype, buffer, 0, count);
}

/** True when `data` is the typed-array kind `dtype` is stored in. */
export function storageMatches(dtype: DType, data: Storage): boolean {
  if (isBlockDType(dtype)) return data instanceof Uint8Array;
  return data instanceof ARRAY_OF[dtype];
}
