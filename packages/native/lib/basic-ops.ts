/**
 * The basic ops bound to the addon (src/bindings/bind_basic.cc): ggml block quantization,
 * group-wise INT4, matvec/matmul, rmsnorm, rope, softmax, swiglu, top-k.
 *
 * Zero-copy: every call passes the tensors' typed arrays with their element
 * offsets and sizes; the addon re-checks lengths and reads them in place. Core
 * has validated shapes, dtypes and contiguity before any of these runs.
 */
import {
  firstAbove,
  isBlockDType,
  type BackendOps,
  type Backend,
  type BlockDType,
  type Int4Matrix,
  type ProductPath,
  type Storage,
  type Tensor,
} from '@sparq/core';
import type { NativeAddon } from './addon.ts';

/** The dtype codes of bind_basic.cc (WeightType in src/common/block_traits.h). */
export const DTYPE_CODE: Readonly<Record<string, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  q4_0: 3,
  q4_1: 4,
  q8_0: 5,
  q5_0: 6,
  q5_1: 7,
  q2_k: 8,
  q3_k: 9,
  q4_k: 10,
  q5_k: 11,
  q6_k: 12,
  iq4_nl: 13,
  iq4_xs: 14,
};

/** The block dtypes the addon dequantizes and multiplies by: every one core knows. */
export const NATIVE_BLOCK_DTYPES: readonly BlockDType[] = [
  'q4_0',
  'q4_1',
  'q5_0',
  'q5_1',
  'q8_0',
  'q2_k',
  'q3_k',
  'q4_k',
  'q5_k',
  'q6_k',
  'iq4_nl',
  'iq4_xs',
];
/** The ones it also quantizes (the K-quants' and iq4's scale searches live in the reference only). */
export const NATIVE_QUANTIZE_DTYPES: readonly BlockDType[] = ['q4_0', 'q4_1', 'q8_0'];

/** An Int4Matrix as the argument run the INT4 functions take (int4Args). */
export type Int4Args = [
  packed: Uint8Array,
  scales: Float32Array,
  zeros: Int8Array,
  rows: number,
  cols: number,
  groupSize: number,
  symmetric: boolean,
];

/** The kernel q8BlockSums reports: the one matmul's 'int8' product runs for that dtype and n on the current path. */
export type Q8KernelName =
  'ref' | 'avx2' | 'avx2-gemm' | 'avx2-packed' | 'avx512' | 'vnni' | 'vnni-packed' | 'neon' | 'neon-dotprod';

/**
 * The basic-op functions of the addon (bind_basic.cc), one per op. Tensors go as their typed array
 * and element offset; dtypes as DTYPE_CODE's codes; sizes are element counts. The addon checks
 * every length against the sizes and throws a RangeError or TypeError before any kernel runs.
 */
export interface BasicAddon {
  /** x (count f32) -> out (count elements of the block dtype `dtypeCode`, whole blocks). */
  quantize(
    dtypeCode: number,
    out: Uint8Array,
    outOffset: number,
    x: Float32Array,
    xOffset: number,
    count: number,
  ): void;
  /** x (count elements of a block dtype, whole blocks) -> out (count f32). */
  dequantize(
    dtypeCode: number,
    out: Float32Array,
    outOffset: number,
    x: Uint8Array,
    xOffset: number,
    count: number,
  ): void;
  /** x (rows, cols) f32 -> the Int4Matrix `w` (group-wise INT4). */
  quantizeInt4(...args: [...w: Int4Args, x: Float32Array, xOffset: number]): void;
  /** The Int4Matrix `w` -> out (rows, cols) f32. */
  dequantizeInt4(out: Float32Array, outOffset: number, ...w: Int4Args): void;
  /**
   * out (n, rows) = x (n, cols) @ w^T for w of any dtype (its storage: f32, f16 / bf16 bits, block
   * bytes); int8: the 'int8' product for block dtypes (matvec_q8.h), else the f32-activation one.
   */
  matmul(
    dtypeCode: number,
    out: Float32Array,
    outOffset: number,
    w: Storage,
    wOffset: number,
    x: Float32Array,
    xOffset: number,
    n: number,
    rows: number,
    cols: number,
    int8: boolean,
    packed?: Uint8Array,
  ): void;
  /**
   * Bytes of w (rows, cols) of a dtype (by code) repacked for matmul's blocked 'int8' product on the
   * current path (src/ops/gemm_q8.h's packed panels: q4_k), 0 if that path does not repack the dtype.
   */
  q8PackedBytes(dtypeCode: number, rows: number, cols: number): number;
  /** Repacks w (rows, cols) into packed (q8PackedBytes), which matmul's `packed` then reads instead of decoding w. */
  q8Repack(dtypeCode: number, packed: Uint8Array, w: Uint8Array, wOffset: number, rows: number, cols: number): void;
  /** out (n, rows) = x (n, cols) @ w^T for an Int4Matrix w; int8: the 'int8' path. */
  matmulInt4(
    out: Float32Array,
    outOffset: number,
    ...rest: [...w: Int4Args, x: Float32Array, xOffset: number, n: number, int8: boolean]
  ): void;
  /** Tests: the int32 sums (n, rows, groups) of matmulInt4's 'int8' product, as its kernel on the current path computes them. */
  int4GroupSums(sums: Int32Array, ...rest: [...w: Int4Args, x: Float32Array, xOffset: number, n: number]): void;
  /** Whether matmulInt4 'int8' runs on AMX tiles now (opt-in: SPARQ_NATIVE_AMX=1 on a CPU with AMX-INT8). */
  amxEnabled(): boolean;
  /** Tests and benchmarks: turns the AMX opt-in on / off, null restores the environment's; returns amxEnabled(). */
  setAmx(on: boolean | null): boolean;
  /**
   * Tests: writes the int32 sub-block sums sum_j c_j q_j (n, rows, cols / sub-block) of matmul's 'int8'
   * product for a block dtype (src/ops/matvec_q8.h; sub-blocks of 16 elements for q2_k, q3_k, q6_k,
   * else 32) as the kernel matmul runs for that dtype and n on the current kernel path computes them,
   * and returns that kernel's name: 'ref' (the scalar twin), 'avx2' (per row), 'avx2-gemm' (AVX2,
   * blocked), 'avx512' (VNNI, per row), 'vnni' (VNNI, blocked), 'neon' or 'neon-dotprod' (arm64, per row);
   * with `packed`, a dtype the path repacks takes the blocked kernels over w repacked ('avx2-packed', 'vnni-packed').
   */
  q8BlockSums(
    dtypeCode: number,
    sums: Int32Array,
    w: Uint8Array,
    wOffset: number,
    x: Float32Array,
    xOffset: number,
    n: number,
    rows: number,
    cols: number,
    packed?: boolean,
  ): Q8KernelName;
  /**
   * The activation rows from which matmul's 'int8' product of a block dtype (by code) takes the blocked
   * kernel on the current path: over weights repacked by q8Repack if `packed` (and the path repacks the
   * dtype), else over the file's layout.
   */
  q8GemmMinN(dtypeCode: number, packed?: boolean): number;
  /** Tests and benchmarks: every block dtype takes the blocked kernels from n rows on; null restores the measured crossovers. */
  forceQ8GemmMinN(n: number | null): void;
  /**
   * Tests: how many of matmul's 'int8' products of block weights since the addon loaded ran the per-row
   * kernel, the blocked one over the file's layout, and the blocked one over repacked weights.
   */
  q8Routes(): { rows: number; blocked: number; packed: number };
  /** out (n, dim) = x (n, dim) / rms(x) * weight (dim); out may be x. */
  rmsnorm(
    out: Float32Array,
    outOffset: number,
    x: Float32Array,
    xOffset: number,
    weight: Float32Array,
    weightOffset: number,
    n: number,
    dim: number,
    eps: number,
  ): void;
  /** x (n, nHeads, headDim) rotated in place at positions (n); freqs replaces theta's frequencies; halves pairs i, i + headDim / 2. */
  rope(
    x: Float32Array,
    xOffset: number,
    positions: Int32Array,
    positionsOffset: number,
    n: number,
    nHeads: number,
    headDim: number,
    theta: number,
    freqs: Float32Array | null,
    freqsOffset: number,
    scale: number,
    halves: boolean,
  ): void;
  /** Each row of x (n, len) in place. */
  softmax(x: Float32Array, xOffset: number, n: number, len: number): void;
  /** out (count) = silu(gate) * up; out may be gate or up. */
  swiglu(
    out: Float32Array,
    outOffset: number,
    gate: Float32Array,
    gateOffset: number,
    up: Float32Array,
    upOffset: number,
    count: number,
  ): void;
  /** out (count) = a + b in f32; out may be a or b. */
  add(
    out: Float32Array,
    outOffset: number,
    a: Float32Array,
    aOffset: number,
    b: Float32Array,
    bOffset: number,
    count: number,
  ): void;
  /** The index from xOffset of the first of count elements that is NaN, infinite or above maxAbs in magnitude, or -1. */
  firstAbove(x: Float32Array, xOffset: number, count: number, maxAbs: number): number;
  /** out (n, k): the indices of the k largest of each row of x (n, len), NaN first, ties to the lowest index. */
  topk(out: Int32Array, outOffset: number, x: Float32Array, xOffset: number, n: number, len: number, k: number): void;
}

/** The addon's basic-op functions (NativeAddon has them all; kept for callers that want only these). */
export function basicAddon(addon: NativeAddon): BasicAddon {
  return addon;
}

/** The (packed, scales, zeros, rows, cols, groupSize, symmetric) argument run of an Int4Matrix. */
export function int4Args(w: Int4Matrix): Int4Args {
  return [w.packed, w.scales, w.zeros, w.rows, w.cols, w.groupSize, w.symmetric];
}

/**
 * Below this many elements validation scans in JavaScript (core's firstAbove): a call into the
 * addon costs about 0.1 us, what JavaScript takes for 300 elements (Node 20, Zen 5: 256 elements
 * 86 ns in JavaScript, 108 ns in the addon; 512: 170 / 116 ns; 4096: 1.56 / 0.27 us).
 */
const NATIVE_SCAN_MIN = 512;

/** Quantization, matvec/matmul, rmsnorm, rope, softmax, swiglu, add, top-k and validation's scan, bound to the addon. */
export function basicOps(
  addon: NativeAddon,
  env: Record<string, string | undefined> = process.env,
): Partial<BackendOps> & Pick<Backend, 'repackedBytes' | 'markConstant' | 'repackNow' | 'firstAbove'> {
  const a = basicAddon(addon);
  // Block weights repacked for the blocked 'int8' product (q8Repack), made at a weight's first such
  // product and kept as long as its tensor: from then on no product decodes it. Only tensors marked
  // constant (markConstant: a model's weights) get a copy, so one written again after a product is
  // never read through a stale one. SPARQ_NATIVE_REPACK=0 keeps only the file's bytes.
  const repack = env.SPARQ_NATIVE_REPACK !== '0';
  const constants = new WeakSet<Tensor>();
  const packedWeights = new WeakMap<Tensor, Uint8Array>();
  const packedFor = (w: Tensor, n: number, path: ProductPath): Uint8Array | undefined => {
    const code = DTYPE_CODE[w.dtype];
    if (!repack || !constants.has(w) || path !== 'int8' || n < a.q8GemmMinN(code, true)) return undefined;
    let packed = packedWeights.get(w);
    if (packed === undefined) {
      const [rows, cols] = w.shape;
      const bytes = a.q8PackedBytes(code, rows, cols);
      if (bytes === 0) return undefined;
      packed = new Uint8Array(bytes);
      a.q8Repack(code, packed, w.data as Uint8Array, w.offset, rows, cols);
      packedWeights.set(w, packed);
    }
    return packed;
  };
  const product = (out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, n: number, path: ProductPath) => {
    const [rows, cols] = w.shape;
    a.matmul(
      DTYPE_CODE[w.dtype],
      out.data,
      out.offset,
      w.data,
      w.offset,
      x.data,
      x.offset,
      n,
      rows,
      cols,
      path === 'int8',
      n > 1 && isBlockDType(w.dtype) ? packedFor(w, n, path) : undefined,
    );
  };
  const productInt4 = (out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, n: number, path: ProductPath) => {
    a.matmulInt4(out.data, out.offset, ...int4Args(w), x.data, x.offset, n, path === 'int8');
  };
  return {
    markConstant: (w) => void constants.add(w),
    // As the first product of as many rows as any would be, on the path that reads the copies.
    repackNow: (w) => isBlockDType(w.dtype) && packedFor(w, Number.MAX_SAFE_INTEGER, 'int8') !== undefined,
    repackedBytes: (dtype, rows, cols) =>
      repack && isBlockDType(dtype) ? a.q8PackedBytes(DTYPE_CODE[dtype], rows, cols) : 0,
    quantize: (out: Tensor<BlockDType>, x: Tensor<'f32'>) => {
      a.quantize(DTYPE_CODE[out.dtype], out.data, out.offset, x.data, x.offset, x.size);
    },
    dequantize: (out: Tensor<'f32'>, x: Tensor<BlockDType>) => {
      a.dequantize(DTYPE_CODE[x.dtype], out.data, out.offset, x.data, x.offset, x.size);
    },
    quantizeInt4: (out: Int4Matrix, x: Tensor<'f32'>) => {
      a.quantizeInt4(...int4Args(out), x.data, x.offset);
    },
    dequantizeInt4: (out: Tensor<'f32'>, w: Int4Matrix) => {
      a.dequantizeInt4(out.data, out.offset, ...int4Args(w));
    },
    matvec: (out, w, x, path) => product(out, w, x, 1, path),
    matmul: (out, w, x, path) => product(out, w, x, x.shape[0], path),
    matvecInt4: (out, w, x, path) => productInt4(out, w, x, 1, path),
    matmulInt4: (out, w, x, path) => productInt4(out, w, x, x.shape[0], path),
    rmsnorm: (out, x, weight, eps) => {
      const dim = x.shape[x.rank - 1];
      a.rmsnorm(out.data, out.offset, x.data, x.offset, weight.data, weight.offset, x.size / dim, dim, eps);
    },
    rope: (x, positions, theta, options = {}) => {
      const [n, nHeads, headDim] = x.shape;
      const { freqs, scale = 1, pairs = 'adjacent' } = options;
      a.rope(
        x.data,
        x.offset,
        positions.data,
        positions.offset,
        n,
        nHeads,
        headDim,
        theta,
        freqs?.data ?? null,
        freqs?.offset ?? 0,
        scale,
        pairs === 'halves',
      );
    },
    swiglu: (out, gate, up) => {
      a.swiglu(out.data, out.offset, gate.data, gate.offset, up.data, up.offset, gate.size);
    },
    add: (out, x, y) => {
      a.add(out.data, out.offset, x.data, x.offset, y.data, y.offset, x.size);
    },
    firstAbove: (data, offset, size, maxAbs) =>
      size < NATIVE_SCAN_MIN ? firstAbove(data, offset, size, maxAbs) : a.firstAbove(data, offset, size, maxAbs),
    softmax: (x) => {
      const len = x.shape[x.rank - 1];
      a.softmax(x.data, x.offset, x.size / len, len);
    },
    topk: (out, x) => {
      const [n, len] = x.shape;
      a.topk(out.data, out.offset, x.data, x.offset, n, len, out.shape[1]);
    },
  };
}
