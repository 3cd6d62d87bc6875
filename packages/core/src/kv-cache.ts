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
import { f16ToF32 } from './half.ts';
import { allocAligned } from './memory.ts';
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

/** The typed arrays a KVCache is made of (see the class comment for their shapes). */
export interface KVCacheBuffers {
  k: KVStorage;
  kT: KVStorage | null;
  v: KVStorage;
  vSum: Float64Array;
  nPast: Int32Array;
  nPad: Int32Array;
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

  /**
   * Allocates the buffers, or adopts `buffers` (views of existing memory, e.g.
   * SharedArrayBuffers posted to a worker, or a slice made by `view`).
   */
  constructor(options: KVCacheOptions, buffers?: KVCacheBuffers) {
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
    const rowsPerBatch = this.batch * this.nKvHeads * this.headDim;
    if (buffers) {
      const Kind = this.dtype === 'f32' ? Float32Array : Uint16Array;
      const expect = (name: string, array: ArrayLike<number> | null, kind: Function, length: number) => {
        if (!(array instanceof kind) || array.length !== length) {
          throw new SparqRangeError(`KVCache: buffer ${name} must be a ${kind.name} of ${length} elements`);
        }
      };
      expect('k', buffers.k, Kind, elements);
      expect('v', buffers.v, Kind, elements);
      if (this.layout === 'k-twice') expect('kT', buffers.kT, Kind, elements);
      expect('vSum', buffers.vSum, Float64Array, rowsPerBatch);
      expect('nPast', buffers.nPast, Int32Array, this.batch);
      expect('nPad', buffers.nPad, Int32Array, this.batch);
      this.k = buffers.k;
      this.kT = this.layout === 'k-twice' ? buffers.kT : null;
      this.v = buffers.v;
      this.vSum = buffers.vSum;
      this.nPast = buffers.nPast;
      this.nPad = buffers.nPad;
      return;
    }
    const alloc = (count: number): KVStorage => {
      const bytes = count * (this.dtype === 'f32' ? 4 : 2);
      // On a cache-line boundary where the address is known: gathered rows then cost whole lines only.
      const { buffer, offset } = allocAligned(bytes, options.shared, 'KVCache');
      return this.dtype === 'f32' ? new Float32Array(buffer, offset, count) : new Uint16Array(buffer, offset, count);
    };
    this.k = alloc(elements);
    this.kT = this.layout === 'k-twice' ? alloc(elements) : null;
    this.v = alloc(elements);
    const small = (bytes: number) => (options.shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
    this.vSum = new Float64Array(small(rowsPerBatch * 8));
    this.nPast = new Int32Array(small(this.batch * 4));
    this.nPad = new Int32Array(small(this.batch * 4));
  }

  /** The options that recreate this cache's shape (without `shared`). */
  get options(): Required<Omit<KVCacheOptions, 'shared'>> {
    const { nKvHeads, headDim, capacity, batch, dtype, layout } = this;
    return { nKvHeads, headDim, capacity, batch, dtype, layout };
  }

  /** The typed arrays behind this cache (to post to a worker, or rebuild with `new KVCache(options, buffers)`). */
  get buffers(): KVCacheBuffers {
    return { k: this.k, kT: this.kT, v: this.v, vSum: this.vSum, nPast: this.nPast, nPad: this.nPad };
  }

  /**
   * A zero-copy cache over sequence `seq` and KV heads [kvStart, kvEnd) of this
   * one (batch 1). It shares memory, so appends and attention through the view
   * act on this cache: the unit of work a thread pool hands to one worker.
   * Both ranges are contiguous in every buffer because sequences and heads are
   * the outer dimensions.
   */
  view(seq: number, kvStart: number, kvEnd: number): KVCache {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch) throw new SparqRangeError(`KVCache.view: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (!Number.isInteger(kvStart) || !Number.isInteger(kvEnd) || kvStart < 0 || kvEnd > this.nKvHeads || kvStart >= kvEnd) {
      throw new SparqRangeError(`KVCache.view: KV heads [${kvStart}, ${kvEnd}), expected 0 <= start < end <= ${this.nKvHeads}`);
    }
    const perHead = this.capacity * this.headDim;
    const from = (seq * this.nKvHeads + kvStart) * perHead;
    const to = (seq * this.nKvHeads + kvEnd) * perHead;
    const sumFrom = (seq * this.nKvHeads + kvStart) * this.headDim;
    const sumTo = (seq * this.nKvHeads + kvEnd) * this.headDim;
    return new KVCache(
      { ...this.options, batch: 1, nKvHeads: kvEnd - kvStart },
      {
        k: this.k.subarray(from, to),
        kT: this.kT ? this.kT.subarray(from, to) : null,
        v: this.v.subarray(from, to),
        vSum: this.vSum.subarray(sumFrom, sumTo),
        nPast: this.nPast.subarray(seq, seq + 1),
        nPad: this.nPad.subarray(seq, seq + 1),
      },
    );
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

  /**
   * Keeps positions [0, length) of sequence `seq` and drops the rest (a prompt cache keeping a common
   * prefix). The running V sum is summed again over the kept valid rows, in position order from zero
   * as kvAppend added them, so it equals the sum that appending those rows alone gives.
   */
  truncate(seq: number, length: number): void {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch) throw new SparqRangeError(`KVCache.truncate: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (!Number.isInteger(length) || length < 0 || length > this.nPast[seq]) throw new SparqRangeError(`KVCache.truncate: length ${length}, expected an integer in [0, ${this.nPast[seq]}] (positions written)`);
    const d = this.headDim;
    for (let h = 0; h < this.nKvHeads; h++) {
      const sum = (seq * this.nKvHeads + h) * d; // vSum (batch, nKvHeads, headDim)
      this.vSum.fill(0, sum, sum + d);
      // Each kept valid row, in order.
      for (let pos = this.nPad[seq]; pos < length; pos++) {
        const row = this.rowOffset(seq, h, pos);
        for (let i = 0; i < d; i++) this.vSum[sum + i] += this.dtype === 'f16' ? f16ToF32(this.v[row + i]) : this.v[row + i];
      }
    }
    this.nPast[seq] = length;
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
