/**
 * The basic ops bound to the addon (src/bind_basic.cc): ggml block quantization,
 * group-wise INT4, matvec/matmul, rmsnorm, rope, softmax, swiglu, top-k.
 *
 * Zero-copy: every call passes the tensors' typed arrays with their element
 * offsets and sizes; the addon re-checks lengths and reads them in place. Core
 * has validated shapes, dtypes and contiguity before any of these runs.
 */
import type { BackendOps, BlockDType, Int4Matrix, ProductPath, Tensor } from '@sparq/core';
import type { NativeAddon } from './addon.ts';

/** The dtype codes of bind_basic.cc (WeightType in src/quant.h). */
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

type Fn = (...args: unknown[]) => unknown;

/** The basic-op functions of the addon, typed loosely: bind_basic.cc documents each argument list. */
export interface BasicAddon {
  quantize: Fn;
  dequantize: Fn;
  quantizeInt4: Fn;
  dequantizeInt4: Fn;
  matmul: Fn;
  matmulInt4: Fn;
  int4GroupSums: Fn;
  /** Whether matmulInt4 'int8' runs on AMX tiles now (opt-in: SPARQ_NATIVE_AMX=1 on a CPU with AMX-INT8). */
  amxEnabled: () => boolean;
  /** Tests and benchmarks: turns the AMX opt-in on / off, null restores the environment's; returns amxEnabled(). */
  setAmx: (on: boolean | null) => boolean;
  /**
   * Tests: q8BlockSums(dtypeCode, sums Int32Array (n, rows, cols / sub-block), w, wOffset, x, xOffset, n, rows, cols)
   * writes the int32 sub-block sums sum_j c_j q_j of matmul's 'int8' product for a block dtype (src/matvec_q8.h;
   * sub-blocks of 16 elements for q2_k, q3_k, q6_k, else 32) as the kernel matmul runs for that dtype and n on
   * the current kernel path computes them, and returns that kernel's name: 'ref' (the scalar twin), 'avx2'
   * (per row), 'avx2-gemm' (AVX2, blocked), 'avx512' (VNNI, per row), 'vnni' (VNNI, blocked), 'neon' or 'neon-dotprod' (arm64, per row).
   */
  q8BlockSums: (...args: unknown[]) => 'ref' | 'avx2' | 'avx2-gemm' | 'avx512' | 'vnni' | 'neon' | 'neon-dotprod';
  /** The activation rows from which matmul's 'int8' product of a block dtype (by code) takes the blocked kernel on the current path. */
  q8GemmMinN: (dtypeCode: number) => number;
  /** Tests and benchmarks: every block dtype takes the blocked kernel from n rows on; null restores the measured crossovers. */
  forceQ8GemmMinN: (n: number | null) => void;
  rmsnorm: Fn;
  rope: Fn;
  softmax: Fn;
  swiglu: Fn;
  topk: Fn;
}

export function basicAddon(addon: NativeAddon): BasicAddon {
  return addon as unknown as BasicAddon;
}

/** The (packed, scales, zeros, rows, cols, groupSize, symmetric) argument run of an Int4Matrix. */
export function int4Args(w: Int4Matrix): unknown[] {
  return [w.packed, w.scales, w.zeros, w.rows, w.cols, w.groupSize, w.symmetric];
}

/** Quantization, matvec/matmul, rmsnorm, rope, softmax, swiglu, top-k, bound to the addon. */
export function basicOps(addon: NativeAddon): Partial<BackendOps> {
  const a = basicAddon(addon);
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
    );
  };
  const productInt4 = (out: Tensor<'f32'>, w: Int4Matrix, x: Tensor<'f32'>, n: number, path: ProductPath) => {
    a.matmulInt4(out.data, out.offset, ...int4Args(w), x.data, x.offset, n, path === 'int8');
  };
  return {
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
