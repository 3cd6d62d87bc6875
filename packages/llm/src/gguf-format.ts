/**
 * GGUF versions 2 and 3 (llama.cpp's file format; the same layout), the
 * pieces reader and writer share:
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
import { isBlockDType, isDType, type DType, type Tensor } from '@sparq/core';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
/** The version this writer produces; the reader takes 2 and 3 (the same layout, v3 allowed big-endian files, which we refuse). */
export const GGUF_VERSION = 3;
export const GGUF_READ_VERSIONS: readonly number[] = [2, 3];
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_DIMS. */
export const GGUF_MAX_DIMS = 4;

/** Value types by their id in the file (the index). */
export const GGUF_VALUE_TYPES = [
  'u8',
  'i8',
  'u16',
  'i16',
  'u32',
  'i32',
  'f32',
  'bool',
  'string',
  'array',
  'u64',
  'i64',
  'f64',
] as const;
export type GGUFValueType = (typeof GGUF_VALUE_TYPES)[number];

/** Bytes of one fixed-size value; strings and arrays give their minimum (length or header). */
export const GGUF_VALUE_BYTES: Readonly<Record<GGUFValueType, number>> = {
  u8: 1,
  i8: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  bool: 1,
  string: 8,
  array: 12,
  u64: 8,
  i64: 8,
  f64: 8,
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

/** A ggml tensor type: its name in llama.cpp, block layout, and our dtype when we compute on it. */
export interface GGMLType {
  readonly id: number;
  readonly name: string;
  /** Elements per block (1 for plain types) and bytes per block. */
  readonly elements: number;
  readonly bytes: number;
  /** Our dtype for it, or null when the engine cannot compute on this type. */
  readonly dtype: DType | null;
}

/**
 * Every ggml type id a GGUF file can hold (ids 4, 5 and 31-33, 36-38 were
 * retired by ggml) with the size of one block: facts from ggml's block
 * structs (for example Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales, 128
 * bytes of nibbles = 144 bytes per 256 elements). The dtype is ours where the
 * engine (core's DTYPES) knows the type, so a type becomes loadable as soon
 * as core computes on it.
 */
const GGML_TYPE_LIST: [id: number, name: string, elements: number, bytes: number][] = [
  [0, 'F32', 1, 4],
  [1, 'F16', 1, 2],
  [2, 'Q4_0', 32, 18],
  [3, 'Q4_1', 32, 20],
  [6, 'Q5_0', 32, 22],
  [7, 'Q5_1', 32, 24],
  [8, 'Q8_0', 32, 34],
  [9, 'Q8_1', 32, 36],
  [10, 'Q2_K', 256, 84],
  [11, 'Q3_K', 256, 110],
  [12, 'Q4_K', 256, 144],
  [13, 'Q5_K', 256, 176],
  [14, 'Q6_K', 256, 210],
  [15, 'Q8_K', 256, 292],
  [16, 'IQ2_XXS', 256, 66],
  [17, 'IQ2_XS', 256, 74],
  [18, 'IQ3_XXS', 256, 98],
  [19, 'IQ1_S', 256, 50],
  [20, 'IQ4_NL', 32, 18],
  [21, 'IQ3_S', 256, 110],
  [22, 'IQ2_S', 256, 82],
  [23, 'IQ4_XS', 256, 136],
  [24, 'I8', 1, 1],
  [25, 'I16', 1, 2],
  [26, 'I32', 1, 4],
  [27, 'I64', 1, 8],
  [28, 'F64', 1, 8],
  [29, 'IQ1_M', 256, 56],
  [30, 'BF16', 1, 2],
  [34, 'TQ1_0', 256, 54],
  [35, 'TQ2_0', 256, 66],
  [39, 'MXFP4', 32, 17],
];

/** Integer tensor types are not weights: their lowercase names (i8, i32) mean something else to us. */
const NOT_WEIGHTS = new Set(['I8', 'I16', 'I32', 'I64', 'F64']);

export const GGML_TYPES: ReadonlyMap<number, GGMLType> = new Map(
  GGML_TYPE_LIST.map(([id, name, elements, bytes]) => {
    const lower = name.toLowerCase();
    return [id, { id, name, elements, bytes, dtype: !NOT_WEIGHTS.has(name) && isDType(lower) ? lower : null }];
  }),
);

/** Names of the tensor types the engine computes on, for messages: 'F32, F16, ...'. */
export function supportedTypeNames(): string {
  return [...GGML_TYPES.values()]
    .filter((t) => t.dtype)
    .map((t) => t.name)
    .join(', ');
}

/** The ggml type of a dtype we can store. */
export function ggmlTypeOf(dtype: DType): GGMLType {
  for (const t of GGML_TYPES.values()) if (t.dtype === dtype) return t;
  throw new Error(`GGUF: dtype ${dtype} has no GGUF tensor type here (${supportedTypeNames()})`);
}

/** Bytes of a tensor of `count` elements of ggml type `t` (whole blocks). */
export function ggmlByteSize(t: GGMLType, count: number): number {
  return (count / t.elements) * t.bytes;
}

/** Bytes of a tensor of `count` elements of a storable dtype (whole blocks). */
export function tensorByteSize(dtype: DType, count: number): number {
  return ggmlByteSize(ggmlTypeOf(dtype), count);
}

/** The raw bytes of a contiguous tensor (a view, no copy). */
export function tensorBytes(t: Tensor): Uint8Array {
  const { elements, bytes } = ggmlTypeOf(t.dtype);
  const data = t.data;
  const start =
    data.byteOffset + (isBlockDType(t.dtype) ? (t.offset / elements) * bytes : t.offset * data.BYTES_PER_ELEMENT);
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
