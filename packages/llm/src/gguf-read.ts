/**
 * GGUF v3 reader. Parses the header, every metadata value (all 13 types,
 * arrays nested to any depth), and the tensor infos, then checks each tensor's
 * data lies inside the file. Counts and lengths are checked against the bytes
 * left before anything is allocated for them, so a header claiming 2^40
 * tensors fails at once. Tensors are views into the file's bytes.
 */
import { Tensor, type DType, type StorageOf } from '@sparq/core';
import { ByteReader } from './byte-reader.ts';
import {
  GGML_TYPES,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_MAX_DIMS,
  GGUF_VALUE_BYTES,
  GGUF_VALUE_TYPES,
  GGUF_VERSION,
  alignUp,
  blockOf,
  tensorByteSize,
  type GGUFArray,
  type GGUFValue,
  type GGUFValueType,
} from './gguf-format.ts';

export interface GGUFTensorInfo {
  name: string;
  /** ggml's ne: ne[0] innermost. */
  ne: number[];
  /** ggml type id. */
  type: number;
  dtype: DType;
  /** Byte offset in the file (data section start + the tensor's offset). */
  fileOffset: number;
  /** Byte offset of the tensor's info record (its name), for messages. */
  infoOffset: number;
  byteSize: number;
}

export interface GGUFFile {
  version: number;
  alignment: number;
  metadata: Map<string, GGUFValue>;
  /** Byte offset of each metadata key, for messages. */
  keyOffsets: Map<string, number>;
  /** Byte offset where the metadata ends (where a missing key would be). */
  metadataEnd: number;
  tensors: GGUFTensorInfo[];
  /** Byte offset of the data section. */
  dataOffset: number;
  bytes: Uint8Array;
}

const TYPED_ARRAYS = {
  u8: Uint8Array, i8: Int8Array, u16: Uint16Array, i16: Int16Array, u32: Uint32Array,
  i32: Int32Array, f32: Float32Array, u64: BigUint64Array, i64: BigInt64Array, f64: Float64Array,
} as const;

/** Parses GGUF v3 from `bytes` (8-byte aligned for the tensor views). */
export function readGGUF(bytes: Uint8Array, file: string): GGUFFile {
  const r = new ByteReader(bytes, file);
  const magic = r.u32('magic');
  if (magic !== GGUF_MAGIC) throw r.error('magic', `0x${magic.toString(16).padStart(8, '0')}, expected "GGUF" (0x${GGUF_MAGIC.toString(16)})`, 0);
  const version = r.u32('version');
  if (version !== GGUF_VERSION) throw r.error('version', `${version}, only GGUF version ${GGUF_VERSION} is supported`, 4);
  // Minimum bytes per tensor info: name length 8, n_dims 4, type 4, offset 8; per kv: key 8, type 4, value 1.
  const tensorCount = count(r, 'tensor_count', 24);
  const kvCount = count(r, 'metadata_kv_count', 13);

  const metadata = new Map<string, GGUFValue>();
  const keyOffsets = new Map<string, number>();
  for (let i = 0; i < kvCount; i++) {
    const at = r.pos;
    const key = string(r, `metadata key ${i}`);
    if (metadata.has(key)) throw r.error(`metadata key ${i}`, `duplicate key "${key}"`, at);
    keyOffsets.set(key, at);
    metadata.set(key, value(r, key, valueType(r, `"${key}" value type`)));
  }
  const metadataEnd = r.pos;

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const align = metadata.get('general.alignment');
  if (align) {
    if (align.type !== 'u32' || align.value < 1 || (align.value & (align.value - 1)) !== 0) {
      throw r.error('general.alignment', `${String(align.value)} (${align.type}), expected a u32 power of two`, keyOffsets.get('general.alignment'));
    }
    alignment = align.value;
  }

  const infos: (Omit<GGUFTensorInfo, 'fileOffset'> & { offset: number; at: number })[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const at = r.pos;
    const name = string(r, `tensor ${i} name`);
    if (names.has(name)) throw r.error(`tensor ${i} name`, `duplicate tensor "${name}"`, at);
    names.add(name);
    const dimsAt = r.pos;
    const nDims = r.u32(`tensor "${name}" n_dims`);
    if (nDims < 1 || nDims > GGUF_MAX_DIMS) throw r.error(`tensor "${name}" n_dims`, `${nDims}, expected 1..${GGUF_MAX_DIMS}`, dimsAt);
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) {
      const neAt = r.pos;
      const n = r.u64Count(`tensor "${name}" ne[${d}]`, Number.MAX_SAFE_INTEGER);
      if (n < 1) throw r.error(`tensor "${name}" ne[${d}]`, `${n}, expected >= 1`, neAt);
      ne.push(n);
    }
    const typeAt = r.pos;
    const type = r.u32(`tensor "${name}" type`);
    const known = GGML_TYPES.get(type);
    if (!known) throw r.error(`tensor "${name}" type`, `ggml type ${type} is not supported (F32=0, F16=1, Q4_0=2, Q4_1=3, Q8_0=8)`, typeAt);
    const { elements } = blockOf(known.dtype);
    if (ne[0] % elements !== 0) throw r.error(`tensor "${name}" ne[0]`, `${ne[0]} is not a multiple of the ${known.name} block of ${elements}`, dimsAt + 4);
    const offsetAt = r.pos;
    const offset = r.u64Count(`tensor "${name}" offset`, Number.MAX_SAFE_INTEGER);
    if (offset % alignment !== 0) throw r.error(`tensor "${name}" offset`, `${offset} is not a multiple of the alignment ${alignment}`, offsetAt);
    const size = ne.reduce((a, b) => a * b, 1);
    infos.push({ name, ne, type, dtype: known.dtype, byteSize: tensorByteSize(known.dtype, size), offset, at: offsetAt, infoOffset: at });
  }

  // Data section: after the infos, padded to the alignment; every tensor must fit in the file.
  const dataOffset = alignUp(r.pos, alignment);
  const tensors = infos.map(({ offset, at, ...info }) => {
    r.need(`tensor "${info.name}" data (offset field at byte ${at})`, info.byteSize, dataOffset + offset);
    return { ...info, fileOffset: dataOffset + offset };
  });
  return { version, alignment, metadata, keyOffsets, metadataEnd, tensors, dataOffset, bytes };
}

/** A row-major view of tensor `info` (shape = ne reversed). */
export function ggufTensor(file: GGUFFile, info: GGUFTensorInfo): Tensor {
  const shape = [...info.ne].reverse();
  let bytes = file.bytes.subarray(info.fileOffset, info.fileOffset + info.byteSize);
  // An alignment below 4 (general.alignment 1 or 2) can leave f32 data unaligned: copy it then.
  if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
  let data: StorageOf[DType];
  if (info.dtype === 'f32') data = new Float32Array(bytes.buffer, bytes.byteOffset, info.byteSize / 4);
  else if (info.dtype === 'f16') data = new Uint16Array(bytes.buffer, bytes.byteOffset, info.byteSize / 2);
  else data = bytes;
  return new Tensor(info.dtype, data, shape);
}

/** A u64 count, each item taking at least `minBytes`: it must fit in what is left of the file. */
function count(r: ByteReader, field: string, minBytes: number): number {
  const at = r.pos;
  const n = r.u64(field);
  const fits = BigInt(Math.floor(r.remaining / minBytes));
  if (n > fits) throw r.error(field, `${n} is absurd: at ${minBytes} bytes each at least, the ${r.remaining} bytes left hold at most ${fits}`, at);
  return Number(n);
}

function valueType(r: ByteReader, field: string): GGUFValueType {
  const at = r.pos;
  const id = r.u32(field);
  const type = GGUF_VALUE_TYPES[id];
  if (type === undefined) throw r.error(field, `${id} is not a GGUF value type (0..${GGUF_VALUE_TYPES.length - 1})`, at);
  return type;
}

function string(r: ByteReader, field: string): string {
  const at = r.pos;
  const len = r.u64(`${field} length`);
  if (len > BigInt(r.remaining)) throw r.error(`${field} length`, `${len} is absurd: ${r.remaining} bytes are left in the file`, at);
  const raw = r.raw(field, Number(len));
  return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
}

function value(r: ByteReader, key: string, type: GGUFValueType): GGUFValue {
  const field = `"${key}"`;
  switch (type) {
    case 'u8': return { type, value: r.u8(field) };
    case 'i8': return { type, value: r.i8(field) };
    case 'u16': return { type, value: r.u16(field) };
    case 'i16': return { type, value: r.i16(field) };
    case 'u32': return { type, value: r.u32(field) };
    case 'i32': return { type, value: r.i32(field) };
    case 'f32': return { type, value: r.f32(field) };
    case 'f64': return { type, value: r.f64(field) };
    case 'u64': return { type, value: r.u64(field) };
    case 'i64': return { type, value: r.i64(field) };
    case 'string': return { type, value: string(r, field) };
    case 'array': return { type, value: array(r, key) };
    case 'bool': {
      const at = r.pos;
      const b = r.u8(field);
      if (b > 1) throw r.error(field, `bool ${b}, expected 0 or 1`, at);
      return { type, value: b === 1 };
    }
  }
}

function array(r: ByteReader, key: string): GGUFArray {
  const itemType = valueType(r, `"${key}" array item type`);
  const n = count(r, `"${key}" array length`, GGUF_VALUE_BYTES[itemType]);
  if (itemType === 'string' || itemType === 'array' || itemType === 'bool') {
    const items: GGUFValue[] = [];
    for (let i = 0; i < n; i++) items.push(value(r, `${key}[${i}]`, itemType));
    return { itemType, values: items.map((v) => v.value) } as GGUFArray;
  }
  // Fixed-size numbers: copy the bytes once into a typed array (copy: the file offset may be unaligned).
  const Ctor = TYPED_ARRAYS[itemType];
  const raw = r.raw(`"${key}" array items`, n * GGUF_VALUE_BYTES[itemType]);
  const values = new Ctor(n);
  new Uint8Array(values.buffer).set(raw);
  return { itemType, values } as GGUFArray;
}
