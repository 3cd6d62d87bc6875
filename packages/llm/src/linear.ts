/**
 * A weight matrix as the forward pass sees it: a Tensor (f32, f16 or a ggml
 * block type, shape (rows, cols)) or the engine's group-wise Int4Matrix, and
 * the one call that multiplies by it through the engine.
 */
import { Int4Matrix, type Engine, type ProductPath, type Tensor } from '@sparq/core';

export type Matrix = Tensor | Int4Matrix;

/**
 * How the runtime multiplies by quantized weights unless told otherwise: 'int8', for ggml blocks and
 * group-wise INT4 alike. It is what llama.cpp does (its quantized matmuls quantize the activations
 * to 8-bit blocks) and Neural Speed's INT4 compute path; the integer kernels are native's fast ones
 * (README, AVX2, one 4096 x 4096 matrix: 1.1x (Q8_0) to 7.6x (Q2_K) the f32 path's speed, INT4
 * 2.4x); and it costs little accuracy: on stories260K it keeps about as many teacher-forced tokens
 * as 'dequant' (test/llm/quantized.spec.ts), and our logits stay about as close to llama.cpp's as
 * with f32 activations (test/llm/llama-cpp.spec.ts, families.spec.ts). 'dequant' stays one option away
 * for f32 activations; `sparq eval` keeps it so that its documented results (docs/eval) reproduce.
 * Float weights take the f32 product on either path.
 */
export const DEFAULT_PRODUCT_PATH: ProductPath = 'int8';

/**
 * W (rows, cols) @ x -> out: x (cols) -> out (rows) as a matvec, or
 * x (n, cols) -> out (n, rows) as a matmul sharing one read of W; `path` for quantized W.
 */
export function linear(engine: Engine, out: Tensor<'f32'>, w: Matrix, x: Tensor<'f32'>, path: ProductPath): void {
  const batched = x.rank === 2;
  if (w instanceof Int4Matrix) {
    if (batched) engine.matmulInt4(out, w, x, path);
    else engine.matvecInt4(out, w, x, path);
  } else if (batched) engine.matmul(out, w, x, path);
  else engine.matvec(out, w, x, path);
}

/** Storage type of a matrix, for summaries: 'f32', 'q4_0', 'int4/g32', ... */
export function matrixType(w: Matrix): string {
  return w instanceof Int4Matrix ? `int4/g${w.groupSize}` : w.dtype;
}
