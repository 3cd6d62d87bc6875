/**
 * A weight matrix as the forward pass sees it: a Tensor (f32, f16 or a ggml
 * block type, shape (rows, cols)) or the engine's group-wise Int4Matrix, and
 * the one call that multiplies by it through the engine.
 */
import { Int4Matrix, type Engine, type ProductPath, type Tensor } from '@sparq/core';

export type Matrix = Tensor | Int4Matrix;

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
