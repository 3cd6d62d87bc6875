/**
 * GGUF v3 writer: metadata (every value type, arrays nested), tensor infos
 * with offsets aligned to `general.alignment` (default 32), then the data.
 * It lays the file out from the tensors' infos alone; model-file.ts writes
 * the pieces to disk (whole tensors, or streamed in chunks).
 * Tensors are written as they are stored (row-major (rows, cols) becomes
 * ne = [cols, rows]); the caller picks their types.
 */
import type { DType, Tensor } from '@sparq/core';
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VALUE_TYPES,
  GGUF_VERSION,
  alignUp,
  ggmlTypeOf,
  tensorByteSize,
  tensorBytes,
  type GGUFArray,
  type GGUFValue,
  type GGUFValueType,
} from './gguf-format.ts';

export interface GGUFTensorEntry {
  name: string;
  /** Contiguous, of a dtype GGUF stores (gguf-format's GGML_TYPES). */
  tensor: Tensor;
}

/** A growable little-endian byte buffer. */
class ByteWriter {
  private buf = Buffer.alloc(1024);
  length = 0;

  private room(n: number): number {
    if (this.length + n > this.buf.length) {
      const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
      this.buf.copy(next, 0, 0, this.length);
      this.buf = next;
    }
    const at = this.length;
    this.length += n;
    return at;
  }

  // room() may replace this.buf, so it runs before this.buf is read.
  u8(v: number) {
    const at = this.room(1);
    this.buf.writeUInt8(v, at);
  }
  i8(v: number) {
    const at = this.room(1);
    this.buf.writeInt8(v, at);
  }
  u16(v: number) {
    const at = this.room(2);
    this.buf.writeUInt16LE(v, at);
  }
  i16(v: number) {
    const at = this.room(2);
    this.buf.writeInt16LE(v, at);
  }
  u32(v: number) {
    const at = this.room(4);
    this.buf.writeUInt32LE(v, at);
  }
  i32(v: number) {
    const at = this.room(4);
    this.buf.writeInt32LE(v, at);
  }
  f32(v: number) {
    const at = this.room(4);
    this.buf.writeFloatLE(v, at);
  }
  f64(v: number) {
    const at = this.room(8);
    this.buf.writeDoubleLE(v, at);
  }
  u64(v: bigint | number) {
    const at = this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), at);
  }
  i64(v: bigint) {
    const at = this.room(8);
    this.buf.writeBigInt64LE(v, at);
  }
  bytes(b: Uint8Array) {
    const at = this.room(b.length);
    this.buf.set(b, at);
  }
  string(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.bytes(b);
  }
  result(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

function writeValue(w: ByteWriter, v: GGUFValue): void {
  switch (v.type) {
    case 'u8':
      return w.u8(v.value);
    case 'i8':
      return w.i8(v.value);
    case 'u16':
      return w.u16(v.value);
    case 'i16':
      return w.i16(v.value);
    case 'u32':
      return w.u32(v.value);
    case 'i32':
      return w.i32(v.value);
    case 'f32':
      return w.f32(v.value);
    case 'f64':
      return w.f64(v.value);
    case 'u64':
      return w.u64(v.value);
    case 'i64':
      return w.i64(v.value);
    case 'bool':
      return w.u8(v.value ? 1 : 0);
    case 'string':
      return w.string(v.value);
    case 'array':
      return writeArray(w, v.value);
  }
}

function writeArray(w: ByteWriter, a: GGUFArray): void {
  w.u32(GGUF_VALUE_TYPES.indexOf(a.itemType));
  w.u64(a.values.length);
  // Each item written as a scalar of the item type (arrays recurse).
  for (const item of Array.from(a.values as ArrayLike<unknown>)) {
    writeValue(w, { type: a.itemType, value: item } as GGUFValue);
  }
}

/** What the header says of a tensor: its name, type and row-major shape (the bytes come separately). */
export interface GGUFTensorSpec {
  name: string;
  dtype: DType;
  shape: readonly number[];
}

/** Where everything goes in the file: the header (through the infos) at 0, each tensor's bytes at its offset. */
export interface GGUFLayout {
  header: Uint8Array;
  /** File position of each tensor's bytes, in the order given. */
  at: number[];
  /** File size: the last tensor padded to the alignment. Gaps between the pieces are zeros. */
  size: number;
}

/** Lays out a GGUF v3 file from the tensors' infos alone (no tensor bytes needed: a writer can stream them). */
export function layoutGGUF(metadata: Iterable<[string, GGUFValue]>, tensors: readonly GGUFTensorSpec[]): GGUFLayout {
  const entries = [...metadata];
  const align = entries.find(([k]) => k === 'general.alignment')?.[1];
  const alignment = align?.type === 'u32' ? align.value : GGUF_DEFAULT_ALIGNMENT;
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  w.u64(entries.length);
  for (const [key, v] of entries) {
    w.string(key);
    w.u32(GGUF_VALUE_TYPES.indexOf(v.type as GGUFValueType));
    writeValue(w, v);
  }
  // Tensor infos: ne reversed from our row-major shape; offsets packed at the alignment.
  let offset = 0;
  const offsets: number[] = [];
  for (const { name, dtype, shape } of tensors) {
    const count = shape.reduce((a, b) => a * b, 1);
    w.string(name);
    w.u32(shape.length);
    for (let d = shape.length - 1; d >= 0; d--) w.u64(shape[d]);
    w.u32(ggmlTypeOf(dtype).id);
    w.u64(offset);
    offsets.push(offset);
    offset = alignUp(offset + tensorByteSize(dtype, count), alignment);
  }
  const header = w.result();
  const dataOffset = alignUp(header.length, alignment);
  return { header, at: offsets.map((o) => dataOffset + o), size: dataOffset + offset };
}

/** A tensor entry's info (its name, dtype and shape). */
export const tensorSpec = ({ name, tensor }: GGUFTensorEntry): GGUFTensorSpec => ({
  name,
  dtype: tensor.dtype,
  shape: tensor.shape,
});

/** The whole file as one buffer of its own (byte offset 0, so tensor views are aligned). */
export function writeGGUF(metadata: Iterable<[string, GGUFValue]>, tensors: readonly GGUFTensorEntry[]): Uint8Array {
  const { header, at, size } = layoutGGUF(metadata, tensors.map(tensorSpec));
  const out = new Uint8Array(size);
  out.set(header, 0);
  tensors.forEach(({ tensor }, i) => out.set(tensorBytes(tensor), at[i]));
  return out;
}
