/**
 * Where the blocked 'int8' product starts to beat the per-row one, per block type, weight layout and
 * kernel path:
 *   pnpm exec tsx bench/gemm-crossover.ts [--types q4_0,q4_k] [--kernel avx2|avx512] [--ns 1,2,4,8]
 *
 * One thread, a 2048 x 4096 weight, CPU time (best of 7) of the addon's matmul at n = 1, 2, 4, 8, 16,
 * 24, 32, 48, 64, 96 activation rows (or --ns) on three kernels: the blocked one over the file's layout
 * (its panels decoded per call), the blocked one over the weights repacked once (q8Repack: the layout a
 * model's weights, marked constant, are multiplied through; Q4_K and Q6_K), and the per-row one. The
 * three are timed in turn within each of the 7 rounds, so a neighbour's load falls on all of them.
 * Prints, per layout, the first n from which the blocked kernel was as fast at every measured n:
 * gemm_q8_min_n's crossovers (BLOCK_TRAITS' gemm_min_n and packed_min_n columns, src/common/block_traits.h).
 */
import { BLOCK_DTYPES, type BlockDType } from '@sparq/core';
import { DTYPE_CODE } from '../packages/native/lib/basic-ops.ts';
import { ALL_ROWS, flag, productBench, tiledWeight } from './block-weight.ts';

const types = (flag('--types')?.split(',') ?? BLOCK_DTYPES) as BlockDType[];
const NS = flag('--ns')?.split(',').map(Number) ?? [1, 2, 4, 8, 16, 24, 32, 48, 64, 96];
const { reference, raw, basic } = await productBench('bench/gemm-crossover.ts', 1);

const ROWS = 2048;
const COLS = 4096;
const REPS = 7;

/** CPU ms of one call of fn. */
function cpuMs(fn: () => void): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/** The first n of NS from which blocked[i] <= perRow[i] at every later n too, or '> last'. */
function crossover(blocked: number[], perRow: number[]): string {
  let from = NS.length;
  while (from > 0 && blocked[from - 1] <= perRow[from - 1]) from--;
  return from < NS.length ? String(NS[from]) : `> ${NS[NS.length - 1]}`;
}

console.log(
  `kernel path ${raw.kernelPaths().current}, one thread, ${ROWS} x ${COLS}, CPU ms best of ${REPS}: ` +
    'blocked over the file layout / blocked over the repacked layout / per row',
);
console.log(
  ['type', ...NS.map((n) => `n ${n}`), 'crossover file', 'crossover packed', 'table file / packed'].join(' | '),
);
for (const dtype of types) {
  const code = DTYPE_CODE[dtype];
  const w = tiledWeight(reference, dtype, ROWS, COLS).data as Uint8Array;
  const packedBytes = basic.q8PackedBytes(code, ROWS, COLS);
  const packed = packedBytes > 0 ? new Uint8Array(packedBytes) : undefined;
  if (packed) basic.q8Repack(code, packed, w, 0, ROWS, COLS);
  const times = { file: [] as number[], packed: [] as number[], perRow: [] as number[] };
  const cells: string[] = [];
  for (const n of NS) {
    const x = new Float32Array(n * COLS);
    for (let i = 0; i < x.length; i++) x[i] = Math.cos(i);
    const out = new Float32Array(n * ROWS);
    const product = (from: number, layout?: Uint8Array) => () => {
      basic.forceQ8GemmMinN(from);
      return cpuMs(() => basic.matmul(code, out, 0, w, 0, x, 0, n, ROWS, COLS, true, layout));
    };
    const runs = [product(1, undefined), ...(packed ? [product(1, packed)] : []), product(ALL_ROWS, undefined)];
    const best = runs.map(() => Infinity);
    for (let r = 0; r < REPS; r++) runs.forEach((run, i) => (best[i] = Math.min(best[i], run())));
    const [file, perRow] = [best[0], best[best.length - 1]];
    times.file.push(file);
    times.perRow.push(perRow);
    if (packed) times.packed.push(best[1]);
    cells.push(
      [file, packed ? best[1] : undefined, perRow].map((t) => (t === undefined ? '-' : t.toFixed(2))).join(' / '),
    );
  }
  basic.forceQ8GemmMinN(null);
  const table = `${basic.q8GemmMinN(code, false)} / ${packed ? basic.q8GemmMinN(code, true) : '-'}`;
  console.log(
    [
      dtype,
      ...cells,
      crossover(times.file, times.perRow),
      packed ? crossover(times.packed, times.perRow) : '-',
      table,
    ].join(' | '),
  );
}
basic.forceQ8GemmMinN(null);
