/**
 * What the weight-product benches (gemm-crossover.ts, gemm-prefill.ts, packed-rows.ts) share: their
 * flags, and a block weight of any height quantized once in a band of rows.
 */
import { Tensor, type BlockDType, type Engine } from '@sparq/core';

/** The value after flag `name` (e.g. '--ns') on the command line, or undefined. */
export function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

/**
 * A (rows, cols) weight of block type t, rows a multiple of 64: 64 rows of value(i) quantized by
 * `reference` (its K-quant scale search is slow), tiled to the full height.
 */
export function tiledWeight(
  reference: Engine,
  t: BlockDType,
  rows: number,
  cols: number,
  value: (i: number) => number = (i) => Math.sin(i * 0.7),
): Tensor {
  const values = Tensor.zeros('f32', [64, cols]);
  for (let i = 0; i < values.size; i++) values.data[i] = value(i);
  const band = Tensor.zeros(t, [64, cols]);
  reference.quantize(band, values);
  const w = Tensor.zeros(t, [rows, cols]);
  for (let r = 0; r < rows; r += 64) (w.data as Uint8Array).set(band.data as Uint8Array, (r / 64) * band.data.length);
  return w;
}
