/**
 * The reference backend's basic ops, one per file in ops/: ggml block quantization, the engine's
 * group-wise INT4, matrix products (dense, ggml-quantized, INT4 by either path), rmsnorm, rope,
 * softmax, SwiGLU's product, the residual add and top-k. Each file opens with what it computes and why it computes it that way.
 */
import type { BackendOps } from '@sparq/core';
import { add } from './ops/add.ts';
import { dequantizeInt4, quantizeInt4 } from './ops/int4-groupwise.ts';
import { matmulInt4, matvecInt4 } from './ops/int4-matvec.ts';
import { matmul, matvec } from './ops/matvec.ts';
import { dequantize, quantize } from './ops/quantize.ts';
import { rmsnorm } from './ops/rmsnorm.ts';
import { rope } from './ops/rope.ts';
import { softmax } from './ops/softmax.ts';
import { swiglu } from './ops/swiglu.ts';
import { topk } from './ops/topk.ts';

/** Quantization, matvec/matmul, rmsnorm, rope, softmax, swiglu, add, top-k. */
export const basicOps: Partial<BackendOps> = {
  quantize,
  dequantize,
  quantizeInt4,
  dequantizeInt4,
  matvec,
  matmul,
  matvecInt4,
  matmulInt4,
  rmsnorm,
  rope,
  softmax,
  swiglu,
  add,
  topk,
};
