/**
 * The Backend interface: every op the engine needs, declared once with its
 * shape contract. A backend implements the ops it can and leaves the rest
 * undefined (declared absent, never faked); calling an absent op through the
 * Engine throws UnsupportedOpError.
 *
 * Conventions (llama2.c's): the output comes first; shapes are in elements,
 * row-major; `w (rows, cols) @ x (cols) -> out (rows)`. Backends may assume
 * their inputs were validated by core (see validate.ts): shapes, dtypes,
 * ranges and capacity are already checked. Tensors passed to ops are
 * contiguous unless an op says otherwise.
 */
import type {
  AttentionOptions,
  BudgetParams,
  H2OState,
  PrefillOptions,
  SparqOptions,
  SparqParams,
} from './attention.ts';
import type { BlockDType } from './dtype.ts';
import type { Int4Matrix } from './int4-matrix.ts';
import type { KVCache } from './kv-cache.ts';
import type { Tensor } from './tensor.ts';

/**
 * How a product with quantized weights (ggml blocks or group-wise INT4) is computed:
 * - 'dequant': decode the weights to f32 and take f32 dot products;
 * - 'int8': quantize each activation row to int8 in the activation blocks ggml pairs with the
 *   weight type (Q8_0, Q8_1 or Q8_K; per group for INT4), take integer dot products against the
 *   weights' integer codes, and scale per block (spec.md §5; ggml's and Neural Speed's compute path;
 *   docs/int8-products.md). Integer sums are exact, so backends agree on them bit for bit.
 * f32 weights have no integer codes: both paths give their f32 product; on 'int8', f16 and bf16
 * weights take the activations rounded to f16 and bf16 first, as ggml does.
 */
export type ProductPath = 'dequant' | 'int8';

/**
 * How rope turns a head (see BackendOps.rope). The defaults are llama2.c's rope;
 * context-extension schemes (linear, YaRN, Llama 3 frequency factors) are all a
 * per-pair frequency table plus a magnitude scale.
 */
export interface RopeOptions {
  /** (headDim / 2) f32, finite and >= 0: pair i turns by pos * freqs[i] radians. */
  freqs?: Tensor<'f32'>;
  /** Multiplies cos and sin (YaRN's magnitude correction); finite, > 0. Default 1. */
  scale?: number;
  /** 'adjacent': pair i is (2i, 2i+1) (llama2.c, ggml NORM); 'halves': (i, i + headDim/2) (GPT-NeoX, ggml NEOX). */
  pairs?: RopePairs;
}

export type RopePairs = 'adjacent' | 'halves';

/** Weight dtypes the f32 matvec/matmul ops accept. */
export type MatrixDType = 'f32' | 'f16' | 'bf16' | BlockDType;

/** What a backend reports about itself (shown by `backendReport()` and the CLI). */
export interface BackendInfo {
  name: string;
  /** The kernel path in use, e.g. 'scalar', 'avx2', 'avx512-vnni'. */
  kernel: string;
  threads: number;
  /** Anything else worth showing (CPU features, build flags). */
  details?: Record<string, string>;
}

export interface BackendOps {
  /** Quantize f32 rows to a ggml block format. x (..., n) f32 -> out (..., n) any block dtype; n whole blocks; x finite. Byte-exact with ggml's reference quantizers. */
  quantize(out: Tensor<BlockDType>, x: Tensor<'f32'>): void;
  /** Dequantize ggml blocks. x (..., n) any block dtype -> out (..., n) f32. */
  dequantize(out: Tensor<'f32'>, x: Tensor<BlockDType>): void;
  /** Group-wise INT4 quantization. x (rows, cols) f32, finite -> out Int4Matrix (rows, cols). */
  quantizeInt4(out: Int4Matrix, x: Tensor<'f32'>): void;
  /** w Int4Matrix (rows, cols) -> out (rows, cols) f32. */
  dequantizeInt4(out: Tensor<'f32'>, w: Int4Matrix): void;

  /** w (rows, cols) f32 | f16 | bf16 | any block dtype @ x (cols) f32 -> out (rows) f32, by the chosen path. */
  matvec(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath): void;
  /** x (n, cols) f32 @ w^T, w (rows, cols) -> out (n, rows) f32: n matvecs sharing one read of w. */
  matmul(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath): void;
  /** w Int4Matrix (rows, cols) @ x (cols) f32 -> out (rows) f32, by the chosen path. */
  matvecInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath): void;
  /** x (n, cols) f32 @ w^T, w Int4Matrix (rows, cols) -> out (n, rows) f32. */
  matmulInt4(out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, path: ProductPath): void;

  /** out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight. x, out (n, dim); weight (dim). out may be x. */
  rmsnorm(out: Tensor<'f32'>, x: Tensor<'f32'>, weight: Tensor<'f32'>, eps: number): void;
  /**
   * Rotary position embedding in place: within each head, pair i rotates by
   * pos * freq_i, freq_i = theta^(-2i / headDim) unless `options.freqs` gives
   * them, and cos and sin are multiplied by `options.scale` (default 1).
   * Pair i is (2i, 2i+1) (llama2.c's layout, the default) or (i, i + headDim/2)
   * with `pairs: 'halves'`. x (n, nHeads, headDim), headDim even; positions (n) i32 >= 0.
   */
  rope(x: Tensor<'f32'>, positions: Tensor<'i32'>, theta: number, options?: RopeOptions): void;
  /** Softmax of each row in place (max subtracted first). x (n, len). */
  softmax(x: Tensor<'f32'>): void;
  /** SwiGLU's product, out[i] = silu(gate[i]) * up[i] with silu(v) = v / (1 + e^-v). Equal shapes; out may be gate or up. */
  swiglu(out: Tensor<'f32'>, gate: Tensor<'f32'>, up: Tensor<'f32'>): void;
  /** out[i] = a[i] + b[i] in f32 (the residual connection). Equal shapes; out may be a or b. */
  add(out: Tensor<'f32'>, a: Tensor<'f32'>, b: Tensor<'f32'>): void;
  /** Indices of the k largest of each row, largest first, ties to the lowest index. x (n, len) f32 -> out (n, k) i32; 1 <= k <= len. */
  topk(out: Tensor<'i32'>, x: Tensor<'f32'>): void;

  /**
   * Append N tokens to sequence `seq` at cache.nPast[seq] and advance it; also
   * updates K transposed and the running V sum. k, v (N, nKvHeads, headDim) f32,
   * converted to the cache dtype. Capacity was checked by core.
   */
  kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void;
  /**
   * Dense decode attention (spec.md §1) for every sequence of the cache over its
   * valid positions. q, out (batch, nHeads, headDim) f32; nHeads a multiple of nKvHeads.
   */
  attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void;
  /**
   * Causal prefill attention for the N newest positions of sequence `seq`
   * (already appended): token i sees valid positions <= nPast - N + i.
   * q, out (N, nHeads, headDim) f32.
   */
  attentionPrefill(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, seq: number, options?: PrefillOptions): void;
  /** SparQ decode attention (spec.md §2). q, out (batch, nHeads, headDim) f32. */
  sparqDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, params: SparqParams, options?: SparqOptions): void;
  /** Oracle top-k / FlexGen (spec.md §3): exact scores, keep the top k' per KV head, softmax over them. */
  topkDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void;
  /** H2O (spec.md §3): heavy hitters plus a recent window of k/4, evicting for good; updates `state`. */
  h2oDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    state: H2OState,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void;
  /**
   * H2O's scores from a prefill of the N newest positions of sequence `seq` (q (N, nHeads, headDim),
   * the prefill's queries): adds to state.acc, per KV head and valid position, the causal softmax
   * weights summed over the N rows and averaged over the group's heads. Evicts nothing.
   */
  h2oSeed(state: H2OState, q: Tensor<'f32'>, cache: KVCache, seq: number): void;
  /** LM-Infinite / StreamingLLM (spec.md §3): the first 16 valid positions plus the most recent k - 16. */
  lmInfiniteDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void;
}

/** The name of an op of the Backend interface (`attentionSparq`, `matvec`, ...). */
export type OpName = keyof BackendOps;

export const OP_NAMES: readonly OpName[] = [
  'quantize',
  'dequantize',
  'quantizeInt4',
  'dequantizeInt4',
  'matvec',
  'matmul',
  'matvecInt4',
  'matmulInt4',
  'rmsnorm',
  'rope',
  'softmax',
  'swiglu',
  'add',
  'topk',
  'kvAppend',
  'attentionDecode',
  'attentionPrefill',
  'sparqDecode',
  'topkDecode',
  'h2oDecode',
  'h2oSeed',
  'lmInfiniteDecode',
];

/** A backend: a name, what it reports about itself, and the ops it implements. */
export interface Backend extends Partial<BackendOps> {
  readonly name: string;
  /**
   * The block dtypes its quantize, dequantize, matvec and matmul handle (absent: none). The Engine
   * throws UnsupportedOpError for the others, before the backend sees them.
   */
  readonly blockDTypes?: readonly BlockDType[];
  /** The block dtypes its quantize handles, when fewer than blockDTypes (absent: all of blockDTypes). */
  readonly quantizeDTypes?: readonly BlockDType[];
  info(): BackendInfo;
  /**
   * Bytes of the second copy of a weight matrix (rows, cols) that the backend lays out for its
   * blocked products at the first one and keeps beside the matrix (absent or 0: none). Memory plans
   * count it, so a context that fits only without it is refused before loading.
   */
  repackedBytes?(dtype: MatrixDType, rows: number, cols: number): number;
  /**
   * A promise that w's data does not change from now on (a model's weights): the backend may keep
   * layouts derived from it (repackedBytes) for as long as w lives. Only such tensors get them, so
   * a tensor written again after a product is never read through a stale copy.
   */
  markConstant?(w: Tensor): void;
  /**
   * Makes at once, for a tensor marked constant, the copy (repackedBytes) that its first blocked
   * product would make; true when w has one now. A server calls it at start, so that its memory is
   * fixed there and no request waits for the copies.
   */
  repackNow?(w: Tensor): boolean;
  /**
   * validate.ts's firstAbove, faster (SIMD, several threads): the index from `offset` of the first
   * of `size` elements that is NaN, infinite or above maxAbs in magnitude, or -1. The same answer
   * on every input; the Engine's validation scans with it, so a prefill's checks of millions of
   * activations do not run at JavaScript's speed on one thread.
   */
  firstAbove?(data: Float32Array, offset: number, size: number, maxAbs: number): number;
  /** Releases threads or native resources (optional). */
  dispose?(): void | Promise<void>;
}
