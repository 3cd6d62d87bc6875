/**
 * GGUF reader (versions 2 and 3). Parses the header, every metadata value (all
 * 13 types, arrays nested up to GGUF_MAX_NESTING), and the tensor infos, then
 * checks every tensor's data lies inside the file and overlaps no other.
 *
 * Limits come from the file before anything is allocated: a count or length
 * must fit in the bytes left (at the smallest size its items can take), a
 * tensor's extent in the data section. So a 1 MB file claiming 2^40 tensors,
 * a 2^50-item array or a 2^40-row matrix fails at once with a FormatError
 * naming the field and its byte offset.
 *
 * The reader works on a ByteSource and reads only the header; tensor data is
 * read per tensor, on request (ggufTensor), into a buffer of its own. A model
 * split over several files (llama.cpp's gguf-split: `split.no`, `split.count`,
 * `split.tensors.count`) is read part by part and joined (joinGGUFParts).
 */
import { FormatError, Tensor, type DType, type StorageOf } from '@sparq/core';
import { ByteReader, type ByteSource } from './byte-reader.ts';
import {
  GGML_TYPES,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_MAX_DIMS,
  GGUF_READ_VERSIONS,
  GGUF_VALUE_BYTES,
  GGUF_VALUE_TYPES,
  alignUp,
  ggmlByteSize,
  supportedTypeNames,
  type GGMLType,
  type GGUFArray,
  type GGUFValue,
  type GGUFValueType,
} from './gguf-format.ts';

/** Deepest nesting of arrays in arrays accepted in metadata (real files use 1; llama.cpp reads no nesting at all). */
export const GGUF_MAX_NESTING = 8;

export interface GGUFTensorInfo {
  name: string;
  /** ggml's ne: ne[0] innermost. */
  ne: number[];
  /** The ggml type (id, name, block layout, our dtype or null when we cannot compute on it). */
  type: GGMLType;
  /** The file holding the data (a part of a split model), and the part's index. */
  source: ByteSource;
  part: number;
  /** Byte offset in that file (data section start + the tensor's offset). */
  fileOffset: number;
  /** Byte offset of the tensor's info record (its name), for messages. */
  infoOffset: number;
  byteSize: number;
}

/** A parsed GGUF v3 file: its metadata and its tensors' descriptors and data. */
export interface GGUFFile {
  version: number;
  alignment: number;
  /** Metadata of the file (of the first part for a split model). */
  metadata: Map<string, GGUFValue>;
  /** Byte offset of each metadata key, for messages. */
  keyOffsets: Map<string, number>;
  /** Byte offset where the metadata ends (where a missing key would be). */
  metadataEnd: number;
  /** Every tensor, of every part. */
  tensors: GGUFTensorInfo[];
  /** Byte offset of the data section (of the first part). */
  dataOffset: number;
  /** The file (the first part), and every part in order. */
  source: ByteSource;
  parts: ByteSource[];
}

const TYPED_ARRAYS = {
  u8: Uint8Array,
  i8: Int8Array,
  u16: Uint16Array,
  i16: Int16Array,
  u32: Uint32Array,
  i32: Int32Array,
  f32: Float32Array,
  u64: BigUint64Array,
  i64: BigInt64Array,
  f64: Float64Array,
} as const;

const utf8 = new TextDecoder('utf-8');

/** Parses the header of one GGUF file (v2 or v3) from `source`, or from bytes in memory named `file`. */
export function readGGUF(source: ByteSource | Uint8Array, file?: string, part = 0): GGUFFile {
  const r = new ByteReader(source, file);
  const magic = r.u32('magic');
  if (magic !== GGUF_MAGIC)
    throw r.error(
      'magic',
      `0x${magic.toString(16).padStart(8, '0')}, expected "GGUF" (0x${GGUF_MAGIC.toString(16)})`,
      0,
    );
  const version = r.u32('version');
  if (!GGUF_READ_VERSIONS.includes(version)) {
    // A big-endian file (allowed since v3) shows its version byte-swapped: 0x03000000.
    const what =
      version > 0xffff && (version & 0xffff) === 0
        ? `${version} is a byte-swapped ${version >>> 24}: big-endian GGUF files are not supported`
        : `${version}`;
    throw r.error(
      'version',
      `${what}, expected GGUF version ${GGUF_READ_VERSIONS.join(' or ')}${version === 1 ? ' (version 1 used 32-bit counts; convert the file with a current llama.cpp)' : ''}`,
      4,
    );
  }
  // Minimum bytes per tensor info: name length 8, n_dims 4, ne[0] 8, type 4, offset 8; per kv: key 8, type 4, value 1.
  const tensorCount = count(r, 'tensor_count', 32);
  const kvCount = count(r, 'metadata_kv_count', 13);

  const metadata = new Map<string, GGUFValue>();
  const keyOffsets = new Map<string, number>();
  for (let i = 0; i < kvCount; i++) {
    const at = r.pos;
    const key = string(r, `metadata key ${i}`);
    if (metadata.has(key)) throw r.error(`metadata key ${i}`, `duplicate key "${key}"`, at);
    keyOffsets.set(key, at);
    metadata.set(key, value(r, key, valueType(r, `"${key}" value type`), 0));
  }
  const metadataEnd = r.pos;

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const align = metadata.get('general.alignment');
  if (align) {
    if (align.type !== 'u32' || align.value < 1 || (align.value & (align.value - 1)) !== 0) {
      throw r.error(
        'general.alignment',
        `${String(align.value)} (${align.type}), expected a u32 power of two`,
        keyOffsets.get('general.alignment'),
      );
    }
    alignment = align.value;
  }

  const infos: (Omit<GGUFTensorInfo, 'fileOffset' | 'source' | 'part'> & { offset: number; offsetAt: number })[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const at = r.pos;
    const name = string(r, `tensor ${i} name`);
    if (names.has(name)) throw r.error(`tensor ${i} name`, `duplicate tensor "${name}"`, at);
    names.add(name);
    const dimsAt = r.pos;
    const nDims = r.u32(`tensor "${name}" n_dims`);
    if (nDims < 1 || nDims > GGUF_MAX_DIMS)
      throw r.error(`tensor "${name}" n_dims`, `${nDims}, expected 1..${GGUF_MAX_DIMS}`, dimsAt);
    const ne: number[] = [];
    let elements = 1;
    for (let d = 0; d < nDims; d++) {
      const neAt = r.pos;
      const n = r.u64Count(`tensor "${name}" ne[${d}]`, Number.MAX_SAFE_INTEGER);
      if (n < 1) throw r.error(`tensor "${name}" ne[${d}]`, `${n}, expected >= 1`, neAt);
      elements *= n;
      // At least one byte per 8 elements (the densest ggml type): more elements than that cannot be in the file.
      if (elements > r.length * 8)
        throw r.error(
          `tensor "${name}" ne[${d}]`,
          `${n} makes ${elements} elements, more than a ${r.length}-byte file can hold`,
          neAt,
        );
      ne.push(n);
    }
    const typeAt = r.pos;
    const id = r.u32(`tensor "${name}" type`);
    const type = GGML_TYPES.get(id);
    if (!type)
      throw r.error(`tensor "${name}" type`, `ggml type ${id} is unknown; supported: ${supportedTypeNames()}`, typeAt);
    if (ne[0] % type.elements !== 0)
      throw r.error(
        `tensor "${name}" ne[0]`,
        `${ne[0]} is not a multiple of the ${type.name} block of ${type.elements}`,
        dimsAt + 4,
      );
    const offsetAt = r.pos;
    const offset = r.u64Count(`tensor "${name}" offset`, Number.MAX_SAFE_INTEGER);
    if (offset % alignment !== 0)
      throw r.error(`tensor "${name}" offset`, `${offset} is not a multiple of the alignment ${alignment}`, offsetAt);
    infos.push({ name, ne, type, byteSize: ggmlByteSize(type, elements), offset, offsetAt, infoOffset: at });
  }

  // Data section: after the infos, padded to the alignment; every tensor inside the file, none overlapping.
  const dataOffset = alignUp(r.pos, alignment);
  const tensors = infos.map(({ offset, offsetAt, ...info }) => {
    r.need(`tensor "${info.name}" data (offset field at byte ${offsetAt})`, info.byteSize, dataOffset + offset);
    return { ...info, source: r.source, part, fileOffset: dataOffset + offset };
  });
  const byOffset = [...tensors].sort((a, b) => a.fileOffset - b.fileOffset);
  for (let i = 1; i < byOffset.length; i++) {
    const [a, b] = [byOffset[i - 1], byOffset[i]];
    if (a.fileOffset + a.byteSize > b.fileOffset) {
      throw r.error(
        `tensor "${b.name}" offset`,
        `its data [${b.fileOffset}, ${b.fileOffset + b.byteSize}) overlaps tensor "${a.name}" [${a.fileOffset}, ${a.fileOffset + a.byteSize})`,
        b.infoOffset,
      );
    }
  }
  return {
    version,
    alignment,
    metadata,
    keyOffsets,
    metadataEnd,
    tensors,
    dataOffset,
    source: r.source,
    parts: [r.source],
  };
}

/** The parts' file names for a split model: `<prefix>-00001-of-0000N.gguf` (llama.cpp's naming), or null when `name` is not one. */
export function splitPartNames(name: string): string[] | null {
  const m = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/.exec(name);
  if (!m) return null;
  const n = Number(m[3]);
  if (n < 1) return null;
  return Array.from({ length: n }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, '0')}-of-${m[3]}.gguf`);
}

/**
 * One model from the parts of a split file, in order: metadata from the first
 * part, tensors from all. Each part must say it is part `i` of `parts.length`,
 * and the tensors must add up to `split.tensors.count`, with no name twice.
 * A file without split keys is a single part of one.
 */
export function joinGGUFParts(parts: readonly GGUFFile[]): GGUFFile {
  const first = parts[0];
  const total = splitKey(first, 'split.tensors.count', first.tensors.length);
  const names = new Map<string, number>();
  for (const [i, part] of parts.entries()) {
    const no = splitKey(part, 'split.no', 0);
    const count = splitKey(part, 'split.count', 1);
    if (count !== parts.length)
      throw splitError(
        part,
        'split.count',
        `${count}, but ${parts.length} part${parts.length === 1 ? ' was' : 's were'} given`,
      );
    if (no !== i)
      throw splitError(part, 'split.no', `${no}, expected ${i}: the parts are out of order or one is missing`);
    for (const t of part.tensors) {
      const other = names.get(t.name);
      if (other !== undefined)
        throw new FormatError(
          `${part.source.name}: tensor "${t.name}" at byte offset ${t.infoOffset}: also in part ${other + 1} (${parts[other].source.name})`,
        );
      names.set(t.name, i);
    }
  }
  if (names.size !== total)
    throw splitError(
      first,
      'split.tensors.count',
      `${total}, but the ${parts.length} part(s) hold ${names.size} tensors`,
    );
  if (parts.length === 1) return first;
  return { ...first, tensors: parts.flatMap((p) => p.tensors), parts: parts.map((p) => p.source) };
}

/** An integer split.* key (llama.cpp writes u16 and i32; any integer type is taken), or `fallback` when absent. */
function splitKey(f: GGUFFile, key: string, fallback: number): number {
  const v = f.metadata.get(key);
  if (v === undefined) return fallback;
  const n = typeof v.value === 'bigint' ? Number(v.value) : v.value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || v.type === 'f32' || v.type === 'f64')
    throw splitError(f, key, `${String(v.value)} (${v.type}), expected a non-negative integer`);
  return n;
}

function splitError(f: GGUFFile, key: string, what: string): FormatError {
  return new FormatError(`${f.source.name}: ${key} at byte offset ${f.keyOffsets.get(key) ?? f.metadataEnd}: ${what}`);
}

/** Tensor `info` read from its file into a buffer of its own, as a row-major tensor (shape = ne reversed). */
export function ggufTensor(info: GGUFTensorInfo): Tensor {
  const dtype = info.type.dtype;
  if (!dtype) {
    throw new FormatError(
      `${info.source.name}: tensor "${info.name}" type at byte offset ${info.infoOffset}: ${info.type.name} (ggml type ${info.type.id}) is not supported; supported: ${supportedTypeNames()}`,
    );
  }
  const shape = [...info.ne].reverse();
  let bytes = info.source.read(info.fileOffset, info.byteSize);
  // A view into bytes in memory may be unaligned (general.alignment 1 or 2, or a pooled Buffer): copy it then.
  if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
  return new Tensor(dtype, storage(dtype, bytes, info.byteSize), shape);
}

/** The typed array `dtype` is stored in, over `bytes`. */
function storage(dtype: DType, bytes: Uint8Array, byteSize: number): StorageOf[DType] {
  if (dtype === 'f32') return new Float32Array(bytes.buffer, bytes.byteOffset, byteSize / 4);
  if (dtype === 'f16' || dtype === 'bf16') return new Uint16Array(bytes.buffer, bytes.byteOffset, byteSize / 2);
  return bytes;
}

/** A u64 count, each item taking at least `minBytes`: it must fit in what is left of the file. */
function count(r: ByteReader, field: string, minBytes: number): number {
  const at = r.pos;
  const n = r.u64(field);
  const fits = BigInt(Math.floor(r.remaining / minBytes));
  if (n > fits)
    throw r.error(
      field,
      `${n} is absurd: at ${minBytes} bytes each at least, the ${r.remaining} bytes left hold at most ${fits}`,
      at,
    );
  return Number(n);
}

function valueType(r: ByteReader, field: string): GGUFValueType {
  const at = r.pos;
  const id = r.u32(field);
  const type = GGUF_VALUE_TYPES[id];
  if (type === undefined)
    throw r.error(field, `${id} is not a GGUF value type (0..${GGUF_VALUE_TYPES.length - 1})`, at);
  return type;
}

function string(r: ByteReader, field: string): string {
  const at = r.pos;
  // Field names are built only on the way to an error: a vocabulary has 10^5 strings.
  if (r.remaining < 8) r.need(`${field} length`, 8);
  const big = r.u64(field);
  const len = Number(big);
  if (len > r.remaining)
    throw r.error(`${field} length`, `${big} is absurd: ${r.remaining} bytes are left in the file`, at);
  return decodeUTF8(r.raw(field, len));
}

/** UTF-8 bytes as a string; short ASCII (most tokens) without the decoder's per-call cost. */
function decodeUTF8(bytes: Uint8Array): string {
  if (bytes.length > 32) return utf8.decode(bytes);
  let s = '';
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] >= 0x80) return utf8.decode(bytes);
    s += String.fromCharCode(bytes[i]);
  }
  return s;
}

/** One value of `type`; `depth` counts the arrays it sits in. */
function value(r: ByteReader, key: string, type: GGUFValueType, depth: number): GGUFValue {
  const field = `"${key}"`;
  switch (type) {
    case 'u8':
      return { type, value: r.u8(field) };
    case 'i8':
      return { type, value: r.i8(field) };
    case 'u16':
      return { type, value: r.u16(field) };
    case 'i16':
      return { type, value: r.i16(field) };
    case 'u32':
      return { type, value: r.u32(field) };
    case 'i32':
      return { type, value: r.i32(field) };
    case 'f32':
      return { type, value: r.f32(field) };
    case 'f64':
      return { type, value: r.f64(field) };
    case 'u64':
      return { type, value: r.u64(field) };
    case 'i64':
      return { type, value: r.i64(field) };
    case 'string':
      return { type, value: string(r, field) };
    case 'array':
      return { type, value: array(r, key, depth + 1) };
    case 'bool': {
      const at = r.pos;
      const b = r.u8(field);
      if (b > 1) throw r.error(field, `bool ${b}, expected 0 or 1`, at);
      return { type, value: b === 1 };
    }
  }
}

function array(r: ByteReader, key: string, depth: number): GGUFArray {
  const at = r.pos;
  if (depth > GGUF_MAX_NESTING)
    throw r.error(
      `"${key}" array`,
      `nested ${depth} deep, at most ${GGUF_MAX_NESTING} levels of arrays in arrays are accepted`,
      at,
    );
  const itemType = valueType(r, `"${key}" array item type`);
  const n = count(r, `"${key}" array length`, GGUF_VALUE_BYTES[itemType]);
  if (itemType === 'string') {
    // Vocabularies hold 10^5 strings: one field name for all (the byte offset tells which item failed).
    const values: string[] = [];
    const field = `"${key}" item`;
    for (let i = 0; i < n; i++) values.push(string(r, field));
    return { itemType, values };
  }
  if (itemType === 'array' || itemType === 'bool') {
    const items: GGUFValue[] = [];
    for (let i = 0; i < n; i++) items.push(value(r, `${key}[${i}]`, itemType, depth));
    return { itemType, values: items.map((v) => v.value) } as GGUFArray;
  }
  // Fixed-size numbers: copy the bytes once into a typed array (copy: the file offset may be unaligned).
  const Ctor = TYPED_ARRAYS[itemType];
  const raw = r.raw(`"${key}" array items`, n * GGUF_VALUE_BYTES[itemType]);
  const values = new Ctor(n);
  new Uint8Array(values.buffer).set(raw);
  return { itemType, values } as GGUFArray;
}
