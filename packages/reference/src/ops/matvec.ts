/**
 * The `matvec` and `matmul` ops for dense and ggml-quantized weights (spec.md §5; llama2.c's `matmul`).
 *
 *   matvec: w (rows, cols) @ x (cols)       -> out (rows)       out[r]    = sum_c w[r, c] * x[c]
 *   matmul: x (n, cols) @ w^T, w (rows, cols) -> out (n, rows)  out[t, r] = sum_c w[r, c] * x[t, c]
 *   w: f32 | f16 | bf16 | any block dtype; x, out: f32
 *
 * Path 'int8' on a block dtype takes the integer product of block-int8-matvec.ts. On f16 and bf16
 * weights it rounds x to the weights' type first (to nearest, ties to even), as ggml converts the
 * activations before its f16 and bf16 products, then takes the f32 product below. Otherwise
 * (path 'dequant', or f32 weights) each weight row is first
 * decoded to f32 (f16 and bf16 exactly, the block formats by their dequantization, which rounds
 * as ggml's does), then dotted with each x row by dotF32: one f32 accumulator, left to right,
 * like llama2.c (see dot.ts for why and for the error bound).
 * matmul decodes a row once and uses it for all n rows of x: n matvecs sharing one read of w.
 * Core has checked shapes, dtypes and contiguity; offsets are honoured.
 */
import {
  Tensor,
  bf16ToF32,
  f16ToF32,
  f32ToBf16,
  isBlockDType,
  roundToF16,
  type BlockDType,
  type ProductPath,
} from '@sparq/core';
import { productBlockInt8 } from './block-int8-matvec.ts';
import { dotF32 } from './dot.ts';
import { dequantizeRun } from './quantize.ts';

/** Row r of w (rows, cols), any weight dtype, decoded into row[0 .. cols) f32. */
function decodeRow(row: Float32Array, w: Tensor, r: number): void {
  const cols = w.shape[1];
  const first = r * cols; // element index of (r, 0), counted from w's offset (w is contiguous)
  if (isBlockDType(w.dtype)) {
    dequantizeRun(row, 0, w as Tensor<BlockDType>, first, cols);
    return;
  }
  const at = w.offset + first;
  for (let c = 0; c < cols; c++) {
    const v = w.data[at + c];
    // f16 and bf16 are stored as raw bits; both convert to f32 exactly.
    row[c] = w.dtype === 'f16' ? f16ToF32(v) : w.dtype === 'bf16' ? bf16ToF32(v) : v;
  }
}

/**
 * The shared loop: out[t, r] = dot(w[r, :], x[t, :]) for t < n, r < rows.
 * x rows start at x.offset + t * cols; out rows at out.offset + t * rows.
 */
function product(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, n: number): void {
  const [rows, cols] = w.shape;
  // One decoded weight row, reused for every r (allocated once per call, not per row).
  const row = new Float32Array(cols); // (cols)
  for (let r = 0; r < rows; r++) {
    decodeRow(row, w, r);
    // The same decoded row against every row of x.
    for (let t = 0; t < n; t++) {
      out.data[out.offset + t * rows + r] = dotF32(row, 0, x.data, x.offset + t * cols, cols);
    }
  }
}

/** x (n, cols) with every element rounded to f16 or bf16 (ggml's activations for f16 and bf16 weights). */
function roundedTo(dtype: 'f16' | 'bf16', x: Tensor<'f32'>, n: number, cols: number): Tensor<'f32'> {
  const rounded = Tensor.zeros('f32', [n, cols]);
  for (let i = 0; i < n * cols; i++) {
    const v = x.data[x.offset + i];
    rounded.data[i] = dtype === 'f16' ? roundToF16(v) : bf16ToF32(f32ToBf16(v));
  }
  return rounded;
}

/** n rows of x by the chosen path: on 'int8', the integer product for block weights and rounded activations for f16 and bf16 ones. */
function productBy(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, n: number, path: ProductPath): void {
  if (path === 'int8' && isBlockDType(w.dtype)) productBlockInt8(out, w as Tensor<BlockDType>, x, n);
  else if (path === 'int8' && (w.dtype === 'f16' || w.dtype === 'bf16'))
    product(out, w, roundedTo(w.dtype, x, n, w.shape[1]), n);
  else product(out, w, x, n);
}

/** w (rows, cols) @ x (cols) -> out (rows). */
export function matvec(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath): void {
  productBy(out, w, x, 1, path);
}

/** x (n, cols) @ w^T, w (rows, cols) -> out (n, rows). */
export function matmul(out: Tensor<'f32'>, w: Tensor, x: Tensor<'f32'>, path: ProductPath): void {
  productBy(out, w, x, x.shape[0], path);
}
