/**
 * Where the blocked 'int8' product starts to beat the per-row one, per block type and kernel path:
 *   pnpm exec tsx bench/gemm-crossover.ts [--types q4_0,q4_k] [--kernel avx2|avx512]
 *
 * One thread, a 2048 x 4096 weight, CPU time (best of 7) of matmul at n = 8, 16, .. 96 activation rows on
 * the blocked kernel and on the per-row kernel (forced with the addon's forceQ8GemmMinN), and the
 * first n where the blocked one was as fast. gemm_q8_min_n (src/common/block_traits.h, read by src/ops/gemm_q8.cc) holds these crossovers.
 * The blocked kernel decodes every weight into panels per call; the per-row one reads the weights
 * once per activation row.
 */
import { BLOCK_DTYPES, Tensor, loadBackends, type BlockDType } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { basicAddon } from '../packages/native/lib/basic-ops.ts';

const arg = (name: string) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
};
const types = (arg('--types')?.split(',') ?? BLOCK_DTYPES) as BlockDType[];
const { available } = await loadBackends();
const native = available.find((e) => e.name === 'native');
const reference = available.find((e) => e.name === 'reference')!;
if (!native) throw new Error('bench/gemm-crossover.ts needs the native backend (pnpm build:native)');
const raw = loadAddon();
const basic = basicAddon(raw);
const kernel = arg('--kernel');
if (kernel) raw.forceKernelPath(kernel);
attentionAddon(raw).attnSetThreads(1);

const ROWS = 2048;
const COLS = 4096;
const NS = Array.from({ length: 12 }, (_, i) => 8 * (i + 1)); // 8, 16, .., 96
const ALL_ROWS = 1 << 30; // forceQ8GemmMinN: no product is that tall, so every one takes the per-row kernel

const values = Tensor.zeros('f32', [64, COLS]);
for (let i = 0; i < values.size; i++) values.data[i] = Math.sin(i * 0.7);

function cpuMs(run: () => void): number {
  let best = Infinity;
  for (let r = 0; r < 7; r++) {
    const c0 = process.cpuUsage();
    run();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / 1000);
  }
  return best;
}

console.log(`kernel path ${raw.kernelPaths().current}, one thread, ${ROWS} x ${COLS}, CPU ms (blocked / per row)`);
console.log(['type', ...NS.map((n) => `n ${n}`), 'crossover'].join(' | '));
for (const dtype of types) {
  // The reference quantizes 64 rows (its K-quant scale search is slow), tiled to the full height.
  const band = Tensor.zeros(dtype, [64, COLS]);
  reference.quantize(band, values);
  const w = Tensor.zeros(dtype, [ROWS, COLS]);
  for (let r = 0; r < ROWS; r += 64) (w.data as Uint8Array).set(band.data as Uint8Array, (r / 64) * band.data.length);
  native.markConstant(w); // as a model's weights: the products may repack it (SPARQ_NATIVE_REPACK=0: not)
  const cells: string[] = [];
  let crossover = '> 96';
  for (const n of NS) {
    const x = Tensor.zeros('f32', [n, COLS]);
    for (let i = 0; i < x.size; i++) x.data[i] = Math.cos(i);
    const out = Tensor.zeros('f32', [n, ROWS]);
    const timeWith = (from: number) => {
      basic.forceQ8GemmMinN(from);
      return cpuMs(() => native.matmul(out, w, x, 'int8'));
    };
    const [blocked, perRow] = [timeWith(1), timeWith(ALL_ROWS)];
    if (crossover === '> 96' && blocked <= perRow) crossover = String(n);
    cells.push(`${blocked.toFixed(2)} / ${perRow.toFixed(2)}`);
  }
  console.log([dtype, ...cells, crossover].join(' | '));
}
basic.forceQ8GemmMinN(null);
