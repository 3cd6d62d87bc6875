/**
 * How parsers see a file: a ByteSource (random access to its bytes, so a
 * file of any size is read piece by piece and never held whole) and a
 * bounds-checked little-endian cursor over it. Every read checks the bytes it
 * needs against the file size first, and every failure is a FormatError
 * naming the field and its byte offset, so a malformed file never makes a
 * loader allocate or read past the end. Nothing here touches a file system:
 * node's files come in through model-file.ts, a browser's File through its own
 * source.
 */
import { FormatError } from '@sparq/core';

/** Random access to the bytes of one file. */
export interface ByteSource {
  /** The file's name, for messages. */
  readonly name: string;
  /** Its size in bytes (may pass 2^32; below 2^53). */
  readonly size: number;
  /**
   * `length` bytes from `offset` (the caller has checked the range). Either a
   * fresh buffer at byte offset 0 of its own ArrayBuffer, or a view into
   * bytes already in memory; the caller may keep it.
   */
  read(offset: number, length: number): Uint8Array;
}

/** A source over bytes already in memory: reads are views, no copies. */
export function bytesSource(bytes: Uint8Array, name: string): ByteSource {
  return { name, size: bytes.byteLength, read: (offset, length) => bytes.subarray(offset, offset + length) };
}

/** Bytes the cursor fetches at a time while parsing headers. */
const WINDOW = 1 << 20;

export class ByteReader {
  /** Next byte to read. */
  pos: number;
  readonly source: ByteSource;
  /** The bytes of [windowAt, windowAt + window.length), fetched from the source. */
  private window: Uint8Array = new Uint8Array(0);
  private windowAt = 0;
  private view = new DataView(this.window.buffer);

  /** A cursor at `pos` over `source` (or over bytes in memory named `file`). */
  constructor(source: ByteSource | Uint8Array, file?: string, pos = 0) {
    this.source = source instanceof Uint8Array ? bytesSource(source, file ?? 'bytes') : source;
    this.pos = pos;
  }

  /** Name of the file, for messages. */
  get file(): string {
    return this.source.name;
  }

  get length(): number {
    return this.source.size;
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
      throw this.error(
        field,
        `needs ${count} bytes, the file has ${Math.max(0, this.length - at)} left (file is ${this.length} bytes)`,
        at,
      );
    }
  }

  /** Checks and consumes `size` bytes of `field`; their offset in the window. */
  private take(field: string, size: number): number {
    this.need(field, size);
    const at = this.pos;
    this.pos += size;
    if (at < this.windowAt || at + size > this.windowAt + this.window.length) {
      this.window = this.source.read(at, Math.min(Math.max(size, WINDOW), this.length - at));
      this.windowAt = at;
      this.view = new DataView(this.window.buffer, this.window.byteOffset, this.window.byteLength);
    }
    return at - this.windowAt;
  }

  // Each getter takes its bytes before reading this.view: take() may move the window.
  u8(field: string): number {
    const at = this.take(field, 1);
    return this.view.getUint8(at);
  }
  i8(field: string): number {
    const at = this.take(field, 1);
    return this.view.getInt8(at);
  }
  u16(field: string): number {
    const at = this.take(field, 2);
    return this.view.getUint16(at, true);
  }
  i16(field: string): number {
    const at = this.take(field, 2);
    return this.view.getInt16(at, true);
  }
  u32(field: string): number {
    const at = this.take(field, 4);
    return this.view.getUint32(at, true);
  }
  i32(field: string): number {
    const at = this.take(field, 4);
    return this.view.getInt32(at, true);
  }
  f32(field: string): number {
    const at = this.take(field, 4);
    return this.view.getFloat32(at, true);
  }
  f64(field: string): number {
    const at = this.take(field, 8);
    return this.view.getFloat64(at, true);
  }
  u64(field: string): bigint {
    const at = this.take(field, 8);
    return this.view.getBigUint64(at, true);
  }
  i64(field: string): bigint {
    const at = this.take(field, 8);
    return this.view.getBigInt64(at, true);
  }

  /** A u64 that must be a count or size no larger than `max` (so it is a safe JS number). */
  u64Count(field: string, max: number): number {
    const at = this.pos;
    const value = this.u64(field);
    if (value > BigInt(max)) throw this.error(field, `${value} is absurd, expected at most ${max}`, at);
    return Number(value);
  }

  /** `count` raw bytes (a view of the window when they are in it). */
  raw(field: string, count: number): Uint8Array {
    const at = this.take(field, count);
    return this.window.subarray(at, at + count);
  }
}
