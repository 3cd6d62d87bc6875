/**
 * GGUF version 3 (llama.cpp's file format), the pieces reader and writer share:
 *
 *   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
 *   kv_count x (string key | u32 value_type | value)
 *   tensor_count x (string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset)
 *   zero padding to `general.alignment` (default 32) | tensor data, each at its offset
 *
 * A string is u64 length + UTF-8 bytes (no NUL); an array is u32 item type +
 * u64 count + items. ne[0] is the innermost (fastest-varying) dimension, so a
 * row-major (rows, cols) matrix has ne = [cols, rows]. Offsets are relative
 * to the start of the data section and multiples of the alignment.
 */
import { BLOCK_LAYOUT, isBlockDType, type DType, type Tensor } from '@sparq/core';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_DIMS. */
export const GGUF_MAX_DIMS = 4;

/** Value types by their id in the file (the index). */
export const GGUF_VALUE_TYPES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;
export type GGUFValueType = (typeof GGUF_VALUE_TYPES)[number];

/** Bytes of one fixed-size value; strings and arrays give their minimum (length or header). */
export const GGUF_VALUE_BYTES: Readonly<Record<GGUFValueType, number>> = {
  u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, string: 8, array: 12, u64: 8, i64: 8, f64: 8,
};

/** How array items are held in memory, per item type. */
export interface GGUFArrayItems {
  u8: Uint8Array;
  i8: Int8Array;
  u16: Uint16Array;
  i16: Int16Array;
  u32: Uint32Array;
  i32: Int32Array;
  f32: Float32Array;
  bool: boolean[];
  string: string[];
  array: GGUFArray[];
  u64: BigUint64Array;
  i64: BigInt64Array;
  f64: Float64Array;
}

export type GGUFArray = { [T in GGUFValueType]: { itemType: T; values: GGUFArrayItems[T] } }[GGUFValueType];

export type GGUFNumberType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64';

/** A metadata value, tagged with its GGUF type so it writes back as it was read. */
export type GGUFValue =
  | { type: GGUFNumberType; value: number }
  | { type: 'u64' | 'i64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; value: GGUFArray };

/** Tensor types this engine reads and writes: ggml type id -> name and our dtype. */
export const GGML_TYPES: ReadonlyMap<number, { name: string; dtype: DType }> = new Map([
  [0, { name: 'F32', dtype: 'f32' as DType }],
  [1, { name: 'F16', dtype: 'f16' as DType }],
  [2, { name: 'Q4_0', dtype: 'q4_0' as DType }],
  [3, { name: 'Q4_1', dtype: 'q4_1' as DType }],
  [8, { name: 'Q8_0', dtype: 'q8_0' as DType }],
]);

/** ggml type id of a dtype we can store. */
export function ggmlTypeOf(dtype: DType): number {
  for (const [id, t] of GGML_TYPES) if (t.dtype === dtype) return id;
  throw new Error(`GGUF: dtype ${dtype} has no GGUF tensor type here (F32, F16, Q4_0, Q4_1, Q8_0)`);
}

/** Elements per block and bytes per block of a storable dtype (1 element for plain types). */
export function blockOf(dtype: DType): { elements: number; bytes: number } {
  if (isBlockDType(dtype)) return BLOCK_LAYOUT[dtype];
  return { elements: 1, bytes: dtype === 'f32' ? 4 : 2 };
}

/** Bytes of a tensor of `count` elements (whole blocks). */
export function tensorByteSize(dtype: DType, count: number): number {
  const { elements, bytes } = blockOf(dtype);
  return (count / elements) * bytes;
}

/** The raw bytes of a contiguous tensor (a view, no copy). */
export function tensorBytes(t: Tensor): Uint8Array {
  const { elements, bytes } = blockOf(t.dtype);
  const data = t.data;
  const perElement = isBlockDType(t.dtype) ? 1 : data.BYTES_PER_ELEMENT;
  const start = data.byteOffset + (isBlockDType(t.dtype) ? (t.offset / elements) * bytes : t.offset * perElement);
  return new Uint8Array(data.buffer, start, tensorByteSize(t.dtype, t.size));
}

/** `n` rounded up to a multiple of `alignment`. */
export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/** Convenience constructors for metadata values. */
export const gguf = {
  u32: (value: number): GGUFValue => ({ type: 'u32', value }),
  i32: (value: number): GGUFValue => ({ type: 'i32', value }),
  f32: (value: number): GGUFValue => ({ type: 'f32', value }),
  bool: (value: boolean): GGUFValue => ({ type: 'bool', value }),
  string: (value: string): GGUFValue => ({ type: 'string', value }),
  array: (value: GGUFArray): GGUFValue => ({ type: 'array', value }),
};
