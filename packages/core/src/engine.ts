/**
 * The Engine: the one door to a backend. Each method validates its inputs
 * (validate.ts) and then calls the backend's op, so every backend rejects bad
 * input with the same error and no backend ever sees an out-of-range call.
 * Models, the CLI and tests are written against this class only.
 */
import type {
  AttentionOptions,
  AttentionStats,
  BudgetParams,
  H2OState,
  PrefillOptions,
  SparqOptions,
  SparqParams,
} from './attention.ts';
import type { Backend, BackendInfo, BackendOps, ProductPath, OpName, RopeOptions } from './backend.ts';
import { isBlockDType, type BlockDType, type DType } from './dtype.ts';
import { UnsupportedOpError } from './errors.ts';
import type { Int4Matrix } from './int4-matrix.ts';
import { kTBytesPerPosition, kvRowBytes, type KVCache } from './kv-cache.ts';
import type { Tensor } from './tensor.ts';
import * as v from './validate.ts';

/**
 * A backend behind validation: every op checks its inputs here, then runs on the backend.
 * `selectBackend()` returns one.
 */
export class Engine {
  readonly backend: Backend;
  /** The scan every finite-value check runs: the backend's (Backend.firstAbove) or validate.ts's. */
  private readonly scan: v.FiniteScan;

  constructor(backend: Backend) {
    this.backend = backend;
    this.scan = backend.firstAbove ? backend.firstAbove.bind(backend) : v.firstAbove;
  }

  /**
   * The index of the first element of x that is NaN, infinite or above maxAbs in magnitude, or -1
   * (validate.ts's firstAbove, on the backend's scan): for callers checking their own results.
   */
  firstAbove(x: Tensor<'f32'>, maxAbs = Number.MAX_VALUE): number {
    return this.scan(x.data, x.offset, x.size, maxAbs);
  }

  get name(): string {
    return this.backend.name;
  }

  info(): BackendInfo {
    return this.backend.info();
  }

  /**
   * Promises that w's data will not change from now on, as a model's weights do not: the backend
   * may then keep layouts derived from it for its products (Backend.markConstant). Writing to w
   * afterwards gives undefined products; tensors not marked are read as they are at every call.
   */
  markConstant(w: Tensor): void {
    this.backend.markConstant?.(w);
  }

  /** Makes now the copy of a constant tensor that its first blocked product would make (Backend.repackNow); true when w has one. */
  repackNow(w: Tensor): boolean {
    return this.backend.repackNow?.(w) ?? false;
  }

  /** True when the backend implements `op` (for a block `dtype`: and handles that dtype, see Backend.blockDTypes). */
  has(op: OpName, dtype?: DType): boolean {
    if (typeof this.backend[op] !== 'function') return false;
    return dtype === undefined || !isBlockDType(dtype) || this.blockDTypesOf(op).includes(dtype as BlockDType);
  }

  /** The block dtypes the backend handles in `op`. */
  private blockDTypesOf(op: OpName): readonly BlockDType[] {
    const all = this.backend.blockDTypes ?? [];
    return op === 'quantize' && this.backend.quantizeDTypes ? this.backend.quantizeDTypes : all;
  }

  /** The backend's implementation of `op` (on `dtype`, when given), or UnsupportedOpError. */
  private op<K extends OpName>(name: K, dtype?: DType): BackendOps[K] {
    const fn = this.backend[name];
    if (typeof fn !== 'function') throw new UnsupportedOpError(name, this.backend.name);
    if (!this.has(name, dtype)) throw new UnsupportedOpError(name, this.backend.name, dtype, this.blockDTypesOf(name));
    return (fn as (...args: unknown[]) => void).bind(this.backend) as BackendOps[K];
  }

  quantize(out: Tensor<BlockDType>, x: Tensor<'f32'>): void {
    v.validateQuantize('quantize', out, x, this.scan);
    this.op('quantize', out.dtype)(out, x);
  }

  dequantize(out: Tensor<'f32'>, x: Tensor<BlockDType>): void {
    v.validateDequantize('dequantize', out, x);
    this.op('dequantize', x.dtype)(out, x);
  }

  quantizeInt4(out: Int4Matrix, x: Tensor<'f32'>): void {
    v.validateQuantizeInt4('quantizeInt4', out, x, this.scan);
    this.op('quantizeInt4')(out, x);
  }

  dequantizeInt4(out: Tensor<'f32'>, w: Int4Matrix): void {
    v.validateDequantizeInt4('dequantizeInt4', out, w);
    this.op('dequantizeInt4')(out, w);
  }

  matvec(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath = 'dequant'): void {
    v.validateMatrixProduct('matvec', out, w, x, false, this.scan);
    v.validateProductPath('matvec', path);
    this.op('matvec', w.dtype)(out, w, x, path);
  }

  matmul(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath = 'dequant'): void {
    v.validateMatrixProduct('matmul', out, w, x, true, this.scan);
    v.validateProductPath('matmul', path);
    this.op('matmul', w.dtype)(out, w, x, path);
  }

  matvecInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath = 'dequant'): void {
    v.validateMatrixProduct('matvecInt4', out, w, x, false, this.scan);
    v.validateProductPath('matvecInt4', path);
    this.op('matvecInt4')(out, w, x, path);
  }

  matmulInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath = 'dequant'): void {
    v.validateMatrixProduct('matmulInt4', out, w, x, true, this.scan);
    v.validateProductPath('matmulInt4', path);
    this.op('matmulInt4')(out, w, x, path);
  }

  rmsnorm(out: Tensor<'f32'>, x: Tensor<'f32'>, weight: Tensor<'f32'>, eps = 1e-5): void {
    v.validateRmsnorm('rmsnorm', out, x, weight, eps, this.scan);
    this.op('rmsnorm')(out, x, weight, eps);
  }

  rope(x: Tensor<'f32'>, positions: Tensor<'i32'>, theta = 10000, options?: RopeOptions): void {
    v.validateRope('rope', x, positions, theta, options, this.scan);
    this.op('rope')(x, positions, theta, options);
  }

  softmax(x: Tensor<'f32'>): void {
    v.validateSoftmax('softmax', x);
    this.op('softmax')(x);
  }

  swiglu(out: Tensor<'f32'>, gate: Tensor<'f32'>, up: Tensor<'f32'>): void {
    v.validateSwiglu('swiglu', out, gate, up, this.scan);
    this.op('swiglu')(out, gate, up);
  }

  add(out: Tensor<'f32'>, a: Tensor<'f32'>, b: Tensor<'f32'>): void {
    v.validateAdd('add', out, a, b);
    this.op('add')(out, a, b);
  }

  topk(out: Tensor<'i32'>, x: Tensor<'f32'>): void {
    v.validateTopk('topk', out, x);
    this.op('topk')(out, x);
  }

  kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, vt: Tensor<'f32'>): void {
    v.validateKvAppend('kvAppend', cache, seq, k, vt, this.scan);
    this.op('kvAppend')(cache, seq, k, vt);
  }

  attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void {
    v.validateDecode('attentionDecode', out, q, cache, this.scan);
    this.counted(cache, options, 'rows', () => this.op('attentionDecode')(out, q, cache, options));
  }

  attentionPrefill(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, seq: number, options?: PrefillOptions): void {
    v.validatePrefill('attentionPrefill', out, q, cache, seq, this.scan);
    if (options?.h2o) v.validateH2OState('attentionPrefill', cache, options.h2o);
    this.counted(cache, options, 'rows', () => this.op('attentionPrefill')(out, q, cache, seq, options));
  }

  sparqDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, params: SparqParams, options?: SparqOptions): void {
    v.validateDecode('sparqDecode', out, q, cache, this.scan);
    v.validateSparq('sparqDecode', cache, params, options?.trace, q.shape[1]);
    this.counted(cache, options, 'sparq', () => this.op('sparqDecode')(out, q, cache, params, options));
  }

  topkDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    v.validateDecode('topkDecode', out, q, cache, this.scan);
    v.validateBudget('topkDecode', params);
    this.counted(cache, options, 'rows', () => this.op('topkDecode')(out, q, cache, params, options));
  }

  h2oDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    state: H2OState,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    v.validateDecode('h2oDecode', out, q, cache, this.scan);
    v.validateBudget('h2oDecode', params);
    v.validateH2OState('h2oDecode', cache, state);
    this.counted(cache, options, 'h2o', () => this.op('h2oDecode')(out, q, cache, state, params, options));
  }

  h2oSeed(state: H2OState, q: Tensor<'f32'>, cache: KVCache, seq: number): void {
    v.validatePrefill('h2oSeed', q, q, cache, seq, this.scan);
    v.validateH2OState('h2oSeed', cache, state);
    this.op('h2oSeed')(state, q, cache, seq);
  }

  lmInfiniteDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    v.validateDecode('lmInfiniteDecode', out, q, cache, this.scan);
    v.validateBudget('lmInfiniteDecode', params);
    this.counted(cache, options, 'rows', () => this.op('lmInfiniteDecode')(out, q, cache, params, options));
  }

  /** Runs an attention op; when it counts into stats, converts what it counted to bytes (countBytes). */
  private counted(
    cache: KVCache,
    options: AttentionOptions | undefined,
    reads: 'rows' | 'sparq' | 'h2o',
    run: () => void,
  ): void {
    const stats = options?.stats;
    const before = stats && elementCounts(stats);
    run();
    if (stats && before) countBytes(stats, cache, before, reads);
  }
}

/** The element counters of `stats` now, to convert what one call adds (countBytes). */
type ElementCounts = Pick<AttentionStats, 'kElements' | 'vElements' | 'auxElements' | 'ioElements'>;

function elementCounts(stats: AttentionStats): ElementCounts {
  const { kElements, vElements, auxElements, ioElements } = stats;
  return { kElements, vElements, auxElements, ioElements };
}

/**
 * Adds to stats' bytes what one attention call over `cache` counted in elements since `before`;
 * `reads` is 'rows' for dense decode and prefill, oracle top-k and LM-Infinite.
 *   K, V rows  kvRowBytes / headDim of the K or V rows' own type per element (f32 4, f16 2,
 *              q8_0 34/32, q4_0 18/32)
 *   K columns  SparQ's step 1 over K transposed ('k-twice'): kTBytesPerPosition / headDim per
 *              element (integer codes with their share of the f16 scale of each 64 positions)
 *   aux        SparQ's running V sum, f64 (8); H2O's accumulated scores, f32 (4)
 *   io         q and the output, f32 (4)
 * The kernels count K columns and K rows together. SparQ reads the same k' rows of K and of V
 * (spec.md §2 step 6), so the K row elements of a SparQ call are its V elements and the rest are
 * columns. With 'single-k' step 1 gathers from the rows, counted at the rows' bytes per element.
 */
function countBytes(
  stats: AttentionStats,
  cache: KVCache,
  before: ElementCounts,
  reads: 'rows' | 'sparq' | 'h2o',
): void {
  const d = cache.headDim;
  const kRow = kvRowBytes(cache.kDType, d) / d;
  const vRow = kvRowBytes(cache.vDType, d) / d;
  const k = stats.kElements - before.kElements;
  const v = stats.vElements - before.vElements;
  const columns = reads === 'sparq' && cache.layout === 'k-twice' ? k - v : 0;
  stats.kBytes += (k - columns) * kRow + columns * (kTBytesPerPosition(cache.kTDType, d) / d);
  stats.vBytes += v * vRow;
  stats.auxBytes += (stats.auxElements - before.auxElements) * (reads === 'sparq' ? 8 : 4);
  stats.ioBytes += (stats.ioElements - before.ioElements) * 4;
}
