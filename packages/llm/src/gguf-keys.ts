/**
 * Typed reads of GGUF metadata values, failing with FormatErrors that name
 * the key and its byte offset (or where a missing key would be).
 */
import { ByteReader } from './byte-reader.ts';
import type { GGUFValue } from './gguf-format.ts';
import type { GGUFFile } from './gguf-read.ts';

/** Reads metadata values with FormatErrors that name the key and its byte offset. */
export class GGUFKeys {
  private readonly r: ByteReader;
  private readonly f: GGUFFile;
  constructor(f: GGUFFile, file: string) {
    this.f = f;
    this.r = new ByteReader(f.source, file);
  }
  fail(key: string, what: string): never {
    throw this.r.error(key, what, this.f.keyOffsets.get(key) ?? this.f.metadataEnd);
  }
  get(key: string): GGUFValue | undefined {
    return this.f.metadata.get(key);
  }
  int(key: string, fallback?: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback ?? this.fail(key, 'missing');
    const n = typeof v.value === 'bigint' ? Number(v.value) : v.value;
    if (typeof n !== 'number' || !Number.isInteger(n) || v.type === 'f32' || v.type === 'f64')
      this.fail(key, `${String(v.value)} (${v.type}), expected an integer`);
    return n;
  }
  float(key: string, fallback: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback;
    if (typeof v.value !== 'number') this.fail(key, `${String(v.value)} (${v.type}), expected a number`);
    return v.value;
  }
  string(key: string): string | undefined {
    const v = this.get(key);
    if (v !== undefined && v.type !== 'string') this.fail(key, `a ${v.type}, expected a string`);
    return v?.value as string | undefined;
  }
}
