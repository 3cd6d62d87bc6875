/**
 * What the weight-product benches (gemm-crossover.ts, gemm-prefill.ts, packed-rows.ts) share: their
 * flags, their engines and addon, and a block weight of any height quantized once in a band of rows.
 */
import { Tensor, loadBackends, type BlockDType, type Engine } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { basicAddon } from '../packages/native/lib/basic-ops.ts';

/** The value after flag `name` (e.g. '--ns') on the command line, or undefined. */
export function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

/** For forceQ8GemmMinN: no product is that tall, so every one takes the per-row kernel. */
export const ALL_ROWS = 1 << 30;

/**
 * The reference (it quantizes the weights), native and its addon (with its basic-op functions), the
 * kernel path of --kernel forced and the pool at `threads` threads; `script` names the bench in the
 * error when native is unavailable.
 */
export async function productBench(script: string, threads: number) {
  const { available } = await loadBackends();
  const native = available.find((e) => e.name === 'native');
  if (!native) throw new Error(`${script} needs the native backend (pnpm build:native)`);
  const reference = available.find((e) => e.name === 'reference')!;
  const raw = loadAddon();
  const kernel = flag('--kernel');
  if (kernel) raw.forceKernelPath(kernel);
  attentionAddon(raw).attnSetThreads(threads);
  return { reference, native, raw, basic: basicAddon(raw) };
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
