/**
 * A few activation rows against a model-sized weight, streamed from memory: the blocked 'int8' product
 * over the weights repacked at load (the layout a model's Q4_K and Q6_K matrices take from their first
 * product of gemm_q8_min_n's packed crossover rows on) against the per-row kernels, at the row counts of
 * a server's decode steps:
 *   pnpm exec tsx bench/packed-rows.ts [--threads 2] [--kernel avx2|avx512] [--ns 1,2,4,8] [--reps 9]
 *
 * Shapes: Llama 3 8B's ffn_gate / ffn_up (14336 x 4096, Q4_K), ffn_down (4096 x 14336, Q6_K) and a
 * quarter of its classifier (32768 x 4096, Q6_K); each weight is 60-110 MB, past the caches, so every
 * call reads it from memory as a decode step does. Wall ms per product, best of --reps (the two kernels
 * alternate within each rep), with the weight bytes per ms it implies (the file's bytes: the packed copy
 * is 0.6-5% larger). Sets the product's crossover with forceQ8GemmMinN, so it runs apart from a model.
 */
import type { BlockDType } from '@sparq/core';
import { DTYPE_CODE } from '../packages/native/lib/basic-ops.ts';
import { ALL_ROWS, flag, productBench, tiledWeight } from './block-weight.ts';

const threads = Number(flag('--threads') ?? 2);
const NS = (flag('--ns') ?? '1,2,4,8').split(',').map(Number);
const REPS = Number(flag('--reps') ?? 9);
const { reference, raw, basic } = await productBench('bench/packed-rows.ts', threads);

const SHAPES: [BlockDType, number, number, string][] = [
  ['q4_k', 14336, 4096, 'ffn_gate / ffn_up'],
  ['q6_k', 4096, 14336, 'ffn_down'],
  ['q6_k', 32768, 4096, 'classifier, a quarter'],
];

console.log(
  `kernel path ${raw.kernelPaths().current}, ${threads} thread(s), wall ms best of ${REPS}: packed / per row (GB/s of the file's bytes)`,
);
console.log(['weight', ...NS.map((n) => `n ${n}`)].join(' | '));
for (const [dtype, rows, cols, name] of SHAPES) {
  const code = DTYPE_CODE[dtype];
  const w = tiledWeight(reference, dtype, rows, cols).data as Uint8Array;
  const packed = new Uint8Array(basic.q8PackedBytes(code, rows, cols));
  if (packed.length === 0) throw new Error(`this build does not repack ${dtype}`);
  basic.q8Repack(code, packed, w, 0, rows, cols);
  const cells: string[] = [];
  for (const n of NS) {
    const x = new Float32Array(n * cols);
    for (let i = 0; i < x.length; i++) x[i] = Math.cos(i);
    const out = new Float32Array(n * rows);
    const time = (from: number, layout?: Uint8Array) => {
      basic.forceQ8GemmMinN(from);
      const t0 = performance.now();
      basic.matmul(code, out, 0, w, 0, x, 0, n, rows, cols, true, layout);
      return performance.now() - t0;
    };
    let [onPacked, perRow] = [Infinity, Infinity];
    for (let r = 0; r < REPS; r++) {
      onPacked = Math.min(onPacked, time(1, packed));
      perRow = Math.min(perRow, time(ALL_ROWS));
    }
    const gbs = (ms: number) => (w.length / ms / 1e6).toFixed(0);
    cells.push(`${onPacked.toFixed(2)} / ${perRow.toFixed(2)} (${gbs(onPacked)} / ${gbs(perRow)})`);
  }
  console.log([`${dtype} ${rows} x ${cols} (${name})`, ...cells].join(' | '));
}
basic.forceQ8GemmMinN(null);
