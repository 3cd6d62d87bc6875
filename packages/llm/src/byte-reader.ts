/**
 * A bounds-checked little-endian cursor over one file's bytes. Every read
 * checks the bytes it needs against the file length first, and every failure
 * is a FormatError naming the field and its byte offset, so a malformed file
 * never makes a loader allocate or read past the end.
 */
import { FormatError } from '@sparq/core';

export class ByteReader {
  /** Next byte to read. */
  pos = 0;
  private readonly view: DataView;

  constructor(
    readonly bytes: Uint8Array,
    /** Name of the file, for messages. */
    readonly file: string,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get length(): number {
    return this.bytes.byteLength;
  }

  get remaining(): number {
    return this.length - this.pos;
  }

  /** A FormatError for `field` at byte offset `at`. */
  error(field: string, what: string, at = this.pos): FormatError {
    return new FormatError(`${this.file}: ${field} at byte offset ${at}: ${what}`);
  }

  /** Throws unless `count` bytes of `field` are left (count may be huge or fractional garbage from a header). */
  need(field: string, count: number, at = this.pos): void {
    if (!Number.isFinite(count) || count < 0 || at + count > this.length) {
      throw this.error(field, `needs ${count} bytes, the file has ${Math.max(0, this.length - at)} left (file is ${this.length} bytes)`, at);
    }
  }

  private take(field: string, size: number): number {
    this.need(field, size);
    const at = this.pos;
    this.pos += size;
    return at;
  }

  u8(field: string): number {
    return this.view.getUint8(this.take(field, 1));
  }
  i8(field: string): number {
    return this.view.getInt8(this.take(field, 1));
  }
  u16(field: string): number {
    return this.view.getUint16(this.take(field, 2), true);
  }
  i16(field: string): number {
    return this.view.getInt16(this.take(field, 2), true);
  }
  u32(field: string): number {
    return this.view.getUint32(this.take(field, 4), true);
  }
  i32(field: string): number {
    return this.view.getInt32(this.take(field, 4), true);
  }
  f32(field: string): number {
    return this.view.getFloat32(this.take(field, 4), true);
  }
  f64(field: string): number {
    return this.view.getFloat64(this.take(field, 8), true);
  }
  u64(field: string): bigint {
    return this.view.getBigUint64(this.take(field, 8), true);
  }
  i64(field: string): bigint {
    return this.view.getBigInt64(this.take(field, 8), true);
  }

  /** A u64 that must be a count or size no larger than `max` (so it is a safe JS number). */
  u64Count(field: string, max: number): number {
    const at = this.pos;
    const value = this.u64(field);
    if (value > BigInt(max)) throw this.error(field, `${value} is absurd, expected at most ${max}`, at);
    return Number(value);
  }

  /** `count` raw bytes (a view, not a copy). */
  raw(field: string, count: number): Uint8Array {
    const at = this.take(field, count);
    return this.bytes.subarray(at, at + count);
  }
}

/** The file's bytes at an 8-aligned address, so typed-array views of any aligned offset work. */
export function alignedBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset % 8 === 0) return bytes;
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}
