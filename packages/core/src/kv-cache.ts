/**
 * The KV cache of SPEC section 4, after Neural Speed: one set of buffers per
 * layer, allocated once for `capacity` positions and written in place.
 *
 * For each sequence b of the batch and KV head h:
 *   k    (batch, nKvHeads, capacity, headDim)   key rows, for gathering positions
 *   kT   (batch, nKvHeads, headDim, capacity)   keys transposed, for gathering components
 *                                              (the SparQ "K twice" layout; null for 'single-k')
 *   v    (batch, nKvHeads, capacity, headDim)   value rows
 *   vSum (batch, nKvHeads, headDim)             f64 running sum of valid V rows, so the
 *                                              mean value needs no pass over V
 *
 * Positions [0, nPad[b]) of sequence b are left padding: stored but masked.
 * Positions [nPad[b], nPast[b]) are valid. This class is layout only; `kvAppend`
 * of each backend writes it, after core has validated the call.
 */
import { CapacityError, SparqRangeError } from './errors.ts';

export type KVDType = 'f32' | 'f16';
/** 'k-twice' stores K as rows and transposed (SparQ's layout); 'single-k' stores rows only. */
export type KVLayout = 'k-twice' | 'single-k';
export type KVStorage = Float32Array | Uint16Array;

export interface KVCacheOptions {
  nKvHeads: number;
  headDim: number;
  capacity: number;
  /** Sequences held side by side, each with its own length. Default 1. */
  batch?: number;
  /** Element type of K and V. Default 'f32'; 'f16' halves the bytes read per step. */
  dtype?: KVDType;
  /** Default 'k-twice'. */
  layout?: KVLayout;
  /** Back the buffers with SharedArrayBuffer so workers can share the cache. */
  shared?: boolean;
}

function positiveInt(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new SparqRangeError(`KVCache: ${name} ${value}, expected an integer >= 1`);
}

export class KVCache {
  readonly batch: number;
  readonly nKvHeads: number;
  readonly headDim: number;
  readonly capacity: number;
  readonly dtype: KVDType;
  readonly layout: KVLayout;
  readonly k: KVStorage;
  readonly kT: KVStorage | null;
  readonly v: KVStorage;
  readonly vSum: Float64Array;
  /** Positions written so far, per sequence. */
  readonly nPast: Int32Array;
  /** Leading masked positions, per sequence. */
  readonly nPad: Int32Array;

  constructor(options: KVCacheOptions) {
    this.batch = options.batch ?? 1;
    this.nKvHeads = options.nKvHeads;
    this.headDim = options.headDim;
    this.capacity = options.capacity;
    this.dtype = options.dtype ?? 'f32';
    this.layout = options.layout ?? 'k-twice';
    positiveInt('batch', this.batch);
    positiveInt('nKvHeads', this.nKvHeads);
    positiveInt('headDim', this.headDim);
    positiveInt('capacity', this.capacity);
    if (this.dtype !== 'f32' && this.dtype !== 'f16') throw new SparqRangeError(`KVCache: dtype ${String(this.dtype)}, expected 'f32' or 'f16'`);
    if (this.layout !== 'k-twice' && this.layout !== 'single-k') throw new SparqRangeError(`KVCache: layout ${String(this.layout)}, expected 'k-twice' or 'single-k'`);
    const elements = this.batch * this.nKvHeads * this.capacity * this.headDim;
    const alloc = (count: number): KVStorage => {
      const bytes = count * (this.dtype === 'f32' ? 4 : 2);
      const buffer = options.shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
      return this.dtype === 'f32' ? new Float32Array(buffer) : new Uint16Array(buffer);
    };
    this.k = alloc(elements);
    this.kT = this.layout === 'k-twice' ? alloc(elements) : null;
    this.v = alloc(elements);
    const small = (bytes: number) => (options.shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
    this.vSum = new Float64Array(small(this.batch * this.nKvHeads * this.headDim * 8));
    this.nPast = new Int32Array(small(this.batch * 4));
    this.nPad = new Int32Array(small(this.batch * 4));
  }

  /** Valid (unmasked) positions of sequence `seq`. */
  nValid(seq: number): number {
    return Math.max(0, this.nPast[seq] - this.nPad[seq]);
  }

  /** Element offset of row `pos` of head `h` of sequence `seq` in `k` and `v`. */
  rowOffset(seq: number, h: number, pos: number): number {
    return ((seq * this.nKvHeads + h) * this.capacity + pos) * this.headDim;
  }

  /** Element offset of component `i` (all positions) of head `h` of sequence `seq` in `kT`. */
  columnOffset(seq: number, h: number, i: number): number {
    return ((seq * this.nKvHeads + h) * this.headDim + i) * this.capacity;
  }

  /** Writes the mean of valid V rows of (seq, h) into out[at .. at + headDim) (zeros when none are valid). */
  vMean(seq: number, h: number, out: Float32Array, at = 0): void {
    const n = this.nValid(seq);
    const base = (seq * this.nKvHeads + h) * this.headDim;
    for (let i = 0; i < this.headDim; i++) out[at + i] = n > 0 ? this.vSum[base + i] / n : 0;
  }

  /** Empties sequence `seq` and sets how many leading positions it will mask (left padding). */
  reset(seq: number, nPad = 0): void {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch) throw new SparqRangeError(`KVCache.reset: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (!Number.isInteger(nPad) || nPad < 0 || nPad > this.capacity) throw new SparqRangeError(`KVCache.reset: nPad ${nPad}, expected an integer in [0, ${this.capacity}]`);
    this.nPast[seq] = 0;
    this.nPad[seq] = nPad;
    this.vSum.fill(0, seq * this.nKvHeads * this.headDim, (seq + 1) * this.nKvHeads * this.headDim);
  }

  /** Throws CapacityError (before anything is written) if `count` more tokens do not fit in `seq`. */
  checkRoom(op: string, seq: number, count: number): void {
    if (this.nPast[seq] + count > this.capacity) {
      throw new CapacityError(`${op}: appending ${count} tokens at position ${this.nPast[seq]} of sequence ${seq} needs ${this.nPast[seq] + count} positions, capacity is ${this.capacity}`);
    }
  }

  /** Bytes held by K, K transposed and V. */
  get byteLength(): number {
    return this.k.byteLength + (this.kT?.byteLength ?? 0) + this.v.byteLength;
  }
}
