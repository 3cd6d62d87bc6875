/**
 * The KV cache of spec.md §4, after Neural Speed: one set of buffers per
 * layer, allocated once for `capacity` positions and written in place.
 *
 * For each sequence b of the batch and KV head h:
 *   k      (batch, nKvHeads, capacity, kRowStride)  key rows, for gathering positions
 *   kT     (batch, nKvHeads, headDim, columnStride) keys transposed, for gathering components
 *                                                  (the SparQ "K twice" layout; null for 'single-k')
 *   kTScale (batch, nKvHeads, headDim, kTBlocks)    f16 scale per block of KT_BLOCK positions
 *                                                  (integer kT only, else null)
 *   v      (batch, nKvHeads, capacity, vRowStride)  value rows
 *   vSum   (batch, nKvHeads, headDim)               f64 running sum of valid V rows (as decoded),
 *                                                  so the mean value needs no pass over V
 *
 * Rows (`kDType` for K, `vDType` for V, set apart as llama.cpp's -ctk / -ctv are): 'f32' and
 * 'f16' store headDim elements; 'q8_0' and 'q4_0' store headDim / 32 of ggml's blocks (dtype.ts
 * BLOCK_LAYOUT) as bytes, exactly as llama.cpp's cache holds them. `kRowStride` / `vRowStride`
 * are the storage elements per row, so no caller multiplies by headDim itself.
 *
 * K transposed (`kTDType`) only ranks positions (SparQ step 1), so it may be coarser than the
 * rows. 'f32' / 'f16' store one element per position. 'i8' / 'i4' / 'i2' store b-bit integer
 * codes c in [-qmax, qmax] (qmax = 2^(b-1) - 1) with one f16 scale per (component, block of 64
 * positions); component i at position p reads f16ToF32(scale[p >> 6]) * c[p]. Codes over
 * positions are contiguous: i8 one signed byte each; i4 two per byte (p's code + 7 in byte
 * p >> 1, even p in the low nibble); i2 four per byte (code + 1 at bits 2 * (p & 3) of byte
 * p >> 2). Each column spans whole blocks (columnStride = kTBlocks * 64 * b / 8 bytes), so a
 * block's codes are whole bytes. The block rule is in the reference's kv-append.ts.
 *
 * Positions [0, nPad[b]) of sequence b are left padding: stored but masked.
 * Positions [nPad[b], nPast[b]) are valid. This class is layout only; `kvAppend`
 * of each backend writes it, after core has validated the call.
 */
import { BLOCK_LAYOUT } from './dtype.ts';
import { f16ToF32 } from './half.ts';
import { allocAligned } from './memory.ts';
import { CapacityError, SparqRangeError } from './errors.ts';

/** Element type of the K and V rows. */
export type KVDType = 'f32' | 'f16' | 'q8_0' | 'q4_0';
/** The K rows' type and the V rows' type when they differ (llama.cpp's `-ctk q8_0 -ctv q4_0`). */
export interface KVTypes {
  k: KVDType;
  v: KVDType;
}
/** The row types of a cache: one type for K and V, or `{ k, v }`. */
export type KVTypeChoice = KVDType | KVTypes;
/** Element type of K transposed (SparQ's step-1 copy): floats, or integer codes with block scales. */
export type KTDType = 'f32' | 'f16' | 'i8' | 'i4' | 'i2';
/** 'k-twice' stores K as rows and transposed (SparQ's layout); 'single-k' stores rows only. */
export type KVLayout = 'k-twice' | 'single-k';
/** Rows: f32 values, f16 bits, or ggml blocks as bytes. */
export type KVStorage = Float32Array | Uint16Array | Uint8Array;
/** K transposed: f32 values, f16 bits, i8 codes, or packed i4 / i2 codes. */
export type KTStorage = Float32Array | Uint16Array | Int8Array | Uint8Array;

/** The KV cache's row types, the `kv` option's choices. */
export const KV_DTYPES: readonly KVDType[] = ['f32', 'f16', 'q8_0', 'q4_0'];
/** The types of SparQ's transposed K copy, the `kt` option's choices. */
export const KT_DTYPES: readonly KTDType[] = ['f32', 'f16', 'i8', 'i4', 'i2'];
/** The KV cache's layouts, the `kvLayout` option's choices: K stored twice (rows and transposed, for SparQ) or once. */
export const KV_LAYOUTS: readonly KVLayout[] = ['k-twice', 'single-k'];

/** Positions per f16 scale of an integer kT column. */
export const KT_BLOCK = 64;

/** `{ k, v }` of a choice: one type is both. */
export function kvTypes(choice: KVTypeChoice): KVTypes {
  return typeof choice === 'string' ? { k: choice, v: choice } : { k: choice.k, v: choice.v };
}

/** A choice's one type when K and V share it, else `{ k, v }` (the form `KVCache.options` returns). */
export function kvChoice(k: KVDType, v: KVDType): KVTypeChoice {
  return k === v ? k : { k, v };
}

/** A choice as the CLI spells it: 'q8_0', or 'q8_0/q4_0' (K's type, then V's). */
export function kvLabel(choice: KVTypeChoice): string {
  const { k, v } = kvTypes(choice);
  return k === v ? k : `${k}/${v}`;
}

/** The kT each K row dtype gets by default in core (the llm package picks its own by measurement, docs/kv-cache.md). */
export const DEFAULT_KT_DTYPE: Readonly<Record<KVDType, KTDType>> = { f32: 'f32', f16: 'f16', q8_0: 'i4', q4_0: 'i2' };

/** Bits per code of the integer kT types, and their largest code qmax = 2^(bits-1) - 1. */
export const KT_INT_BITS: Readonly<Record<'i8' | 'i4' | 'i2', number>> = { i8: 8, i4: 4, i2: 2 };

/** True for the kT types stored as integer codes with block scales. */
export function isIntegerKT(kT: KTDType | null): kT is 'i8' | 'i4' | 'i2' {
  return kT === 'i8' || kT === 'i4' || kT === 'i2';
}

/** True for the row types stored as ggml blocks. */
export function isBlockKV(dtype: KVDType): dtype is 'q8_0' | 'q4_0' {
  return dtype === 'q8_0' || dtype === 'q4_0';
}

/**
 * A KVCache's shape (KV heads, head dim, capacity, batch), its row and transposed-K types, its
 * layout, and whether its buffers are shared.
 */
export interface KVCacheOptions {
  nKvHeads: number;
  headDim: number;
  capacity: number;
  /** Sequences held side by side, each with its own length. Default 1. */
  batch?: number;
  /**
   * Element types of the rows: one for K and V, or `{ k, v }`. Default 'f32'; 'f16' halves the
   * bytes, 'q8_0' / 'q4_0' are ggml blocks (headDim a multiple of 32).
   */
  dtype?: KVTypeChoice;
  /** Element type of K transposed ('k-twice' only; ignored for 'single-k'). Default DEFAULT_KT_DTYPE of K's type; 'f32' only with K rows 'f32'. */
  kTDType?: KTDType | null;
  /** Default 'k-twice'. */
  layout?: KVLayout;
  /** Back the buffers with SharedArrayBuffer so workers can share the cache. */
  shared?: boolean;
}

function positiveInt(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1)
    throw new SparqRangeError(`KVCache: ${name} ${value}, expected an integer >= 1`);
}

/** Bytes of one K or V row of `dtype` (headDim a whole number of blocks for block types). */
export function kvRowBytes(dtype: KVDType, headDim: number): number {
  if (isBlockKV(dtype)) return (headDim / BLOCK_LAYOUT[dtype].elements) * BLOCK_LAYOUT[dtype].bytes;
  return headDim * (dtype === 'f32' ? 4 : 2);
}

/** Bytes of K transposed per position and KV head: codes plus their share of the block scales. */
export function kTBytesPerPosition(kT: KTDType | null, headDim: number): number {
  if (kT === null) return 0;
  if (isIntegerKT(kT)) return (headDim * KT_INT_BITS[kT]) / 8 + (headDim * 2) / KT_BLOCK;
  return headDim * (kT === 'f32' ? 4 : 2);
}

/** The shape a KVCache takes from `options`, every default filled in and every field checked. */
interface Resolved {
  batch: number;
  nKvHeads: number;
  headDim: number;
  capacity: number;
  kDType: KVDType;
  vDType: KVDType;
  layout: KVLayout;
  kTDType: KTDType | null;
}

/** A row type of `choice` ('dtype', or its 'k' / 'v' field), checked against KV_DTYPES and the head dim. */
function rowType(name: string, value: unknown, headDim: number): KVDType {
  if (!KV_DTYPES.includes(value as KVDType))
    throw new SparqRangeError(
      `KVCache: ${name} ${String(value)}, expected ${KV_DTYPES.map((t) => `'${t}'`).join(' | ')}`,
    );
  const dtype = value as KVDType;
  if (isBlockKV(dtype) && headDim % BLOCK_LAYOUT[dtype].elements !== 0) {
    throw new SparqRangeError(
      `KVCache: headDim ${headDim} with ${name} '${dtype}', expected a multiple of ${BLOCK_LAYOUT[dtype].elements} (the values in one ${dtype} block)`,
    );
  }
  return dtype;
}

function resolve(options: KVCacheOptions): Resolved {
  const batch = options.batch ?? 1;
  const dtype: unknown = options.dtype ?? 'f32';
  const layout = options.layout ?? 'k-twice';
  const { nKvHeads, headDim, capacity } = options;
  positiveInt('batch', batch);
  positiveInt('nKvHeads', nKvHeads);
  positiveInt('headDim', headDim);
  positiveInt('capacity', capacity);
  const split = typeof dtype === 'object' && dtype !== null;
  const kDType = rowType(split ? 'dtype.k' : 'dtype', split ? (dtype as KVTypes).k : dtype, headDim);
  const vDType = rowType(split ? 'dtype.v' : 'dtype', split ? (dtype as KVTypes).v : dtype, headDim);
  if (!KV_LAYOUTS.includes(layout))
    throw new SparqRangeError(`KVCache: layout ${String(layout)}, expected 'k-twice' or 'single-k'`);
  let kTDType: KTDType | null = null;
  if (layout === 'k-twice') {
    kTDType = options.kTDType ?? DEFAULT_KT_DTYPE[kDType];
    if (!KT_DTYPES.includes(kTDType))
      throw new SparqRangeError(
        `KVCache: kTDType ${String(kTDType)}, expected ${KT_DTYPES.map((t) => `'${t}'`).join(' | ')}`,
      );
    // A copy finer than the rows it is derived from would hold nothing more, at twice the bytes.
    if (kTDType === 'f32' && kDType !== 'f32')
      throw new SparqRangeError(
        `KVCache: kTDType 'f32' with K rows '${kDType}', expected kTDType 'f16' | 'i8' | 'i4' | 'i2' ('f32' only with K rows 'f32')`,
      );
  }
  return { batch, nKvHeads, headDim, capacity, kDType, vDType, layout, kTDType };
}

/** Storage elements of each buffer a cache of shape `r` holds. */
function lengths(r: Resolved) {
  const rowStride = (dtype: KVDType) => (isBlockKV(dtype) ? kvRowBytes(dtype, r.headDim) : r.headDim);
  const kTBlocks = Math.ceil(r.capacity / KT_BLOCK);
  const columnStride = isIntegerKT(r.kTDType) ? (kTBlocks * KT_BLOCK * KT_INT_BITS[r.kTDType]) / 8 : r.capacity;
  const heads = r.batch * r.nKvHeads;
  return {
    kRowStride: rowStride(r.kDType),
    vRowStride: rowStride(r.vDType),
    columnStride,
    kTBlocks,
    kRows: heads * r.capacity * rowStride(r.kDType),
    vRows: heads * r.capacity * rowStride(r.vDType),
    kT: r.kTDType === null ? 0 : heads * r.headDim * columnStride,
    kTScale: isIntegerKT(r.kTDType) ? heads * r.headDim * kTBlocks : 0,
    vSum: heads * r.headDim,
  };
}

const ROW_ARRAY = { f32: Float32Array, f16: Uint16Array, q8_0: Uint8Array, q4_0: Uint8Array } as const;
const KT_ARRAY = { f32: Float32Array, f16: Uint16Array, i8: Int8Array, i4: Uint8Array, i2: Uint8Array } as const;

/**
 * KV bytes per position of one sequence: nKvHeads * (kRowBytes + vRowBytes + kTBytes), K and V
 * rows each at its own type plus K transposed with its scales (0 for 'single-k'). A pure function
 * of the options, so memory can be checked before anything is allocated. llama.cpp's cache at the
 * same row types (-ctk / -ctv) holds nKvHeads * (kRowBytes + vRowBytes).
 */
export function kvBytesPerPosition(options: KVCacheOptions): number {
  const r = resolve(options);
  return (
    r.nKvHeads *
    (kvRowBytes(r.kDType, r.headDim) + kvRowBytes(r.vDType, r.headDim) + kTBytesPerPosition(r.kTDType, r.headDim))
  );
}

/**
 * Bytes `new KVCache(options)` allocates, every array included: about batch * capacity *
 * kvBytesPerPosition, plus the per-head vSum and the kT columns' padding to whole 64-position blocks.
 */
export function kvCacheBytes(options: KVCacheOptions): number {
  const r = resolve(options);
  const n = lengths(r);
  const kTBytes = r.kTDType === null ? 0 : n.kT * KT_ARRAY[r.kTDType].BYTES_PER_ELEMENT;
  const rowBytes = n.kRows * ROW_ARRAY[r.kDType].BYTES_PER_ELEMENT + n.vRows * ROW_ARRAY[r.vDType].BYTES_PER_ELEMENT;
  return rowBytes + kTBytes + n.kTScale * 2 + n.vSum * 8 + r.batch * 8;
}

/** The typed arrays a KVCache is made of (see the file comment for their shapes). */
export interface KVCacheBuffers {
  k: KVStorage;
  kT: KTStorage | null;
  /** Required with an integer kTDType, else null or absent. */
  kTScale?: Uint16Array | null;
  v: KVStorage;
  vSum: Float64Array;
  nPast: Int32Array;
  nPad: Int32Array;
}

/**
 * A layer's KV cache, allocated once for `capacity` positions and written in place (the layout is
 * this file's header).
 */
export class KVCache {
  readonly batch: number;
  readonly nKvHeads: number;
  readonly headDim: number;
  readonly capacity: number;
  /** Element type of the K rows. */
  readonly kDType: KVDType;
  /** Element type of the V rows. */
  readonly vDType: KVDType;
  /** Element type of kT; null for 'single-k'. */
  readonly kTDType: KTDType | null;
  readonly layout: KVLayout;
  /** Storage elements per K row: headDim for f32 / f16, bytes of headDim / 32 blocks for q8_0 / q4_0. */
  readonly kRowStride: number;
  /** Storage elements per V row, as kRowStride for vDType. */
  readonly vRowStride: number;
  /** Storage elements per kT column (one component, all positions): capacity, or whole 64-position blocks of packed codes. */
  readonly columnStride: number;
  /** Scale blocks per kT column: ceil(capacity / KT_BLOCK). */
  readonly kTBlocks: number;
  readonly k: KVStorage;
  readonly kT: KTStorage | null;
  readonly kTScale: Uint16Array | null;
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
    const r = resolve(options);
    const n = lengths(r);
    ({
      batch: this.batch,
      nKvHeads: this.nKvHeads,
      headDim: this.headDim,
      capacity: this.capacity,
      kDType: this.kDType,
      vDType: this.vDType,
      layout: this.layout,
      kTDType: this.kTDType,
    } = r);
    ({
      kRowStride: this.kRowStride,
      vRowStride: this.vRowStride,
      columnStride: this.columnStride,
      kTBlocks: this.kTBlocks,
    } = n);
    const KRow = ROW_ARRAY[this.kDType];
    const VRow = ROW_ARRAY[this.vDType];
    const Column = this.kTDType === null ? null : KT_ARRAY[this.kTDType];
    if (buffers) {
      const expect = (
        name: string,
        array: ArrayLike<number> | null | undefined,
        kind: new (length: number) => ArrayLike<number>,
        length: number,
      ) => {
        if (!(array instanceof kind) || array.length !== length) {
          throw new SparqRangeError(`KVCache: buffer ${name} must be a ${kind.name} of ${length} elements`);
        }
      };
      expect('k', buffers.k, KRow, n.kRows);
      expect('v', buffers.v, VRow, n.vRows);
      if (Column) expect('kT', buffers.kT, Column, n.kT);
      if (n.kTScale > 0) expect('kTScale', buffers.kTScale, Uint16Array, n.kTScale);
      expect('vSum', buffers.vSum, Float64Array, n.vSum);
      expect('nPast', buffers.nPast, Int32Array, this.batch);
      expect('nPad', buffers.nPad, Int32Array, this.batch);
      this.k = buffers.k;
      this.kT = Column ? buffers.kT : null;
      this.kTScale = n.kTScale > 0 ? buffers.kTScale! : null;
      this.v = buffers.v;
      this.vSum = buffers.vSum;
      this.nPast = buffers.nPast;
      this.nPad = buffers.nPad;
      return;
    }
    const alloc = <T extends ArrayBufferView>(
      Kind: { new (b: ArrayBufferLike, o: number, n: number): T; BYTES_PER_ELEMENT: number },
      count: number,
    ): T => {
      // On a cache-line boundary where the address is known: gathered rows then cost whole lines only.
      const { buffer, offset } = allocAligned(count * Kind.BYTES_PER_ELEMENT, options.shared, 'KVCache');
      return new Kind(buffer, offset, count);
    };
    this.k = alloc<KVStorage>(KRow, n.kRows);
    this.kT = Column ? alloc<KTStorage>(Column, n.kT) : null;
    this.kTScale = n.kTScale > 0 ? alloc(Uint16Array, n.kTScale) : null;
    this.v = alloc<KVStorage>(VRow, n.vRows);
    const small = (bytes: number) => (options.shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
    this.vSum = new Float64Array(small(n.vSum * 8));
    this.nPast = new Int32Array(small(this.batch * 4));
    this.nPad = new Int32Array(small(this.batch * 4));
  }

  /** The options that recreate this cache's shape (without `shared`). */
  get options(): Required<Omit<KVCacheOptions, 'shared'>> {
    const { nKvHeads, headDim, capacity, batch, kTDType, layout } = this;
    return { nKvHeads, headDim, capacity, batch, dtype: kvChoice(this.kDType, this.vDType), kTDType, layout };
  }

  /** The typed arrays behind this cache (to post to a worker, or rebuild with `new KVCache(options, buffers)`). */
  get buffers(): KVCacheBuffers {
    return {
      k: this.k,
      kT: this.kT,
      kTScale: this.kTScale,
      v: this.v,
      vSum: this.vSum,
      nPast: this.nPast,
      nPad: this.nPad,
    };
  }

  /**
   * A zero-copy cache over sequence `seq` and KV heads [kvStart, kvEnd) of this
   * one (batch 1). It shares memory, so appends and attention through the view
   * act on this cache: the unit of work a thread pool hands to one worker.
   * Both ranges are contiguous in every buffer because sequences and heads are
   * the outer dimensions.
   */
  view(seq: number, kvStart: number, kvEnd: number): KVCache {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch)
      throw new SparqRangeError(`KVCache.view: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (
      !Number.isInteger(kvStart) ||
      !Number.isInteger(kvEnd) ||
      kvStart < 0 ||
      kvEnd > this.nKvHeads ||
      kvStart >= kvEnd
    ) {
      throw new SparqRangeError(
        `KVCache.view: KV heads [${kvStart}, ${kvEnd}), expected 0 <= start < end <= ${this.nKvHeads}`,
      );
    }
    // Each buffer's slice of heads [kvStart, kvEnd) of sequence seq, from its per-head length.
    const heads = (perHead: number) =>
      [(seq * this.nKvHeads + kvStart) * perHead, (seq * this.nKvHeads + kvEnd) * perHead] as const;
    const [kFrom, kTo] = heads(this.capacity * this.kRowStride);
    const [vFrom, vTo] = heads(this.capacity * this.vRowStride);
    const [colFrom, colTo] = heads(this.headDim * this.columnStride);
    const [scaleFrom, scaleTo] = heads(this.headDim * this.kTBlocks);
    const [sumFrom, sumTo] = heads(this.headDim);
    return new KVCache(
      { ...this.options, batch: 1, nKvHeads: kvEnd - kvStart },
      {
        k: this.k.subarray(kFrom, kTo),
        kT: this.kT ? this.kT.subarray(colFrom, colTo) : null,
        kTScale: this.kTScale ? this.kTScale.subarray(scaleFrom, scaleTo) : null,
        v: this.v.subarray(vFrom, vTo),
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

  /** Storage offset of row `pos` of head `h` of sequence `seq` in `k` (bytes for block dtypes). */
  kRowOffset(seq: number, h: number, pos: number): number {
    return ((seq * this.nKvHeads + h) * this.capacity + pos) * this.kRowStride;
  }

  /** Storage offset of row `pos` of head `h` of sequence `seq` in `v` (bytes for block dtypes). */
  vRowOffset(seq: number, h: number, pos: number): number {
    return ((seq * this.nKvHeads + h) * this.capacity + pos) * this.vRowStride;
  }

  /** Storage offset of component `i` (all positions) of head `h` of sequence `seq` in `kT` (bytes for packed codes). */
  columnOffset(seq: number, h: number, i: number): number {
    return ((seq * this.nKvHeads + h) * this.headDim + i) * this.columnStride;
  }

  /** Offset in `kTScale` of component `i`'s first block scale (block p >> 6 follows it). */
  scaleOffset(seq: number, h: number, i: number): number {
    return ((seq * this.nKvHeads + h) * this.headDim + i) * this.kTBlocks;
  }

  /** Writes the mean of valid V rows of (seq, h) into out[at .. at + headDim) (zeros when none are valid). */
  vMean(seq: number, h: number, out: Float32Array, at = 0): void {
    const n = this.nValid(seq);
    const base = (seq * this.nKvHeads + h) * this.headDim;
    for (let i = 0; i < this.headDim; i++) out[at + i] = n > 0 ? this.vSum[base + i] / n : 0;
  }

  /** Empties sequence `seq` and sets how many leading positions it will mask (left padding). */
  reset(seq: number, nPad = 0): void {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch)
      throw new SparqRangeError(`KVCache.reset: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (!Number.isInteger(nPad) || nPad < 0 || nPad > this.capacity)
      throw new SparqRangeError(`KVCache.reset: nPad ${nPad}, expected an integer in [0, ${this.capacity}]`);
    this.nPast[seq] = 0;
    this.nPad[seq] = nPad;
    this.vSum.fill(0, seq * this.nKvHeads * this.headDim, (seq + 1) * this.nKvHeads * this.headDim);
  }

  /**
   * Keeps positions [0, length) of sequence `seq` and drops the rest (a prompt cache keeping a common
   * prefix). The running V sum is summed again over the kept valid rows, in position order from zero
   * as kvAppend added them, so it equals the sum that appending those rows alone gives.
   */
  truncate(seq: number, length: number, decodeRows?: (out: Float32Array, rows: Uint8Array, at: number) => void): void {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.batch)
      throw new SparqRangeError(`KVCache.truncate: sequence ${seq}, expected an integer in [0, ${this.batch - 1}]`);
    if (!Number.isInteger(length) || length < 0 || length > this.nPast[seq])
      throw new SparqRangeError(
        `KVCache.truncate: length ${length}, expected an integer in [0, ${this.nPast[seq]}] (positions written)`,
      );
    if (isBlockKV(this.vDType) && !decodeRows)
      throw new SparqRangeError(
        `KVCache.truncate: ${this.vDType} V rows need a decodeRows function (a backend's dequantize) to sum the kept values again`,
      );
    const d = this.headDim;
    const first = this.nPad[seq];
    const kept = Math.max(0, length - first);
    const rows = new Float32Array(kept * d); // (kept, headDim) one head's kept V rows as attention reads them
    for (let h = 0; h < this.nKvHeads; h++) {
      const sum = (seq * this.nKvHeads + h) * d; // vSum (batch, nKvHeads, headDim)
      this.vSum.fill(0, sum, sum + d);
      // A head's rows are contiguous: block rows are decoded in one call, f16 / f32 element by element.
      const at = this.vRowOffset(seq, h, first);
      if (kept === 0) continue;
      if (decodeRows && this.v instanceof Uint8Array) decodeRows(rows, this.v, at);
      else
        for (let e = 0; e < kept * d; e++) rows[e] = this.vDType === 'f16' ? f16ToF32(this.v[at + e]) : this.v[at + e];
      // Each kept valid row, in order.
      for (let j = 0; j < kept; j++) for (let i = 0; i < d; i++) this.vSum[sum + i] += rows[j * d + i];
    }
    // An integer kT block holding truncated positions is derived again from the rows at the next append, before anything reads it.
    this.nPast[seq] = length;
  }

  /** Throws CapacityError (before anything is written) if `count` more tokens do not fit in `seq`. */
  checkRoom(op: string, seq: number, count: number): void {
    if (this.nPast[seq] + count > this.capacity) {
      throw new CapacityError(
        `${op}: appending ${count} tokens at position ${this.nPast[seq]} of sequence ${seq} needs ${this.nPast[seq] + count} positions, capacity is ${this.capacity}`,
      );
    }
  }

  /** Bytes held by K, K transposed (with its scales) and V. */
  get byteLength(): number {
    return this.k.byteLength + (this.kT?.byteLength ?? 0) + (this.kTScale?.byteLength ?? 0) + this.v.byteLength;
  }
}
