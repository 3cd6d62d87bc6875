/**
 * The 'int8' product of block weights for 1 to 8 activation rows (decode: one row per stream of
 * `sparq serve`), 4096 x 4096, native, per kernel path:
 *   pnpm exec tsx bench/q8-rows.ts [--types q4_k,q6_k,q8_0] [--rows 1,2,4,8] [--paths avx2,avx512]
 *                                  [--threads 2] [--baseline DIR] [--rounds 7] [--gemm-from N]
 *
 * For each type, path and row count: the median ms per call and the weight bytes read per second
 * of it as a share of the read bandwidth measured right before (bench/bandwidth.ts's probe; the
 * weights rotate through STREAM_MB of copies, so each call reads them from DRAM), and the process's
 * CPU ms per call (all threads; time spent descheduled is not in it, so on a machine shared with
 * other jobs it shows what a call costs while it runs: the kernels' instruction cost).
 * --baseline DIR loads a second addon (DIR/sparq_native.node, e.g. a copy of main's build) into
 * the same process and alternates the two, round by round, on the same weights: on a shared
 * machine the ratios `base / this` are the figures to trust, not either time alone.
 * --gemm-from N: the per-row kernels up to N - 1 activation rows, the blocked one from N on
 * (forceQ8GemmMinN; default: each type's measured crossover, gemm_q8_min_n).
 */
import { Tensor, loadBackends, type MatrixDType } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { loadAddon, type NativeAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { DTYPE_CODE } from '../packages/native/lib/basic-ops.ts';
import { measureReadBandwidth } from './bandwidth.ts';

const SIZE = 4096;
const STREAM_MB = 160;
const args = process.argv.slice(2);
const option = (name: string, fallback: string[]): string[] => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1].split(',') : fallback;
};
const types = option('types', ['q4_k', 'q6_k', 'q8_0']) as MatrixDType[];
const rowCounts = option('rows', ['1', '2', '4', '8']).map(Number);
const threads = Number(option('threads', ['2'])[0]);
const rounds = Number(option('rounds', ['7'])[0]);
const baselineDir = option('baseline', [''])[0];
const gemmFrom = Number(option('gemm-from', ['0'])[0]);

const { available } = await loadBackends();
const reference = available.find((e) => e.name === 'reference')!;
const addons: { name: string; raw: NativeAddon }[] = [{ name: 'this', raw: loadAddon() }];
if (baselineDir)
  addons.unshift({
    name: 'base',
    raw: createRequire(import.meta.url)(join(baselineDir, 'sparq_native.node')) as NativeAddon,
  });
if (gemmFrom > 0) for (const a of addons) a.raw.forceQ8GemmMinN(gemmFrom as never);
const paths = option('paths', ['avx2', 'avx512']).filter((p) => addons[0].raw.kernelPaths().supported.includes(p));

let seed = 12345;
const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const xs = Float32Array.from({ length: 8 * SIZE }, random);
const out = new Float32Array(8 * SIZE);

/** Copies of a SIZE x SIZE matrix of `dtype` (64 rows quantized by the reference, tiled) filling STREAM_MB. */
function weights(dtype: MatrixDType): Tensor[] {
  const band = Tensor.zeros(dtype, [64, SIZE]);
  reference.quantize(band as Tensor<'q8_0'>, Tensor.f32([64, SIZE], Float32Array.from({ length: 64 * SIZE }, random)));
  const w = Tensor.zeros(dtype, [SIZE, SIZE]);
  for (let r = 0; r < SIZE; r += 64) w.data.set(band.data, (r / 64) * band.data.length);
  const copies = Math.max(2, Math.ceil((STREAM_MB * 2 ** 20) / w.data.byteLength));
  return Array.from({ length: copies }, (_, i) => (i === 0 ? w : new Tensor(dtype, w.data.slice() as never, w.shape)));
}

/** Median wall ms per call and CPU ms per call of `n` rows against `all` (round robin), over `calls` calls. */
function timeCalls(
  raw: NativeAddon,
  dtype: MatrixDType,
  all: Tensor[],
  n: number,
  calls: number,
): { wall: number; cpu: number } {
  const times: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const w = all[i % all.length];
    const t0 = process.hrtime.bigint();
    raw.matmul(
      DTYPE_CODE[dtype] as never,
      out as never,
      0 as never,
      w.data as never,
      0 as never,
      xs as never,
      0 as never,
      n as never,
      SIZE as never,
      SIZE as never,
      true as never,
    );
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort((a, b) => a - b);
  return { wall: times[times.length >> 1], cpu: (cpu.user + cpu.system) / 1e3 / calls };
}

const table: Record<string, string>[] = [];
for (const dtype of types) {
  const all = weights(dtype);
  const bytes = all[0].data.byteLength;
  for (const path of paths) {
    for (const a of addons) {
      a.raw.forceKernelPath(path);
      attentionAddon(a.raw).attnSetThreads(threads);
    }
    for (const n of rowCounts) {
      const bandwidth = await measureReadBandwidth(threads, 200);
      for (const a of addons) attentionAddon(a.raw).attnSetThreads(threads);
      const wall: number[][] = addons.map(() => []);
      const cpu: number[][] = addons.map(() => []);
      // Rounds alternate the addons, so that both see the same machine.
      for (let round = 0; round < rounds; round++) {
        addons.forEach((a, i) => {
          const t = timeCalls(a.raw, dtype, all, n, 24);
          wall[i].push(t.wall);
          cpu[i].push(t.cpu);
        });
      }
      const median = (v: number[]) => [...v].sort((x, y) => x - y)[v.length >> 1];
      const row: Record<string, string> = { type: dtype, path, rows: String(n), 'read GB/s': bandwidth.toFixed(1) };
      addons.forEach((a, i) => {
        const m = median(wall[i]);
        row[`${a.name} ms`] = m.toFixed(3);
        row[`${a.name} of bw`] = `${((100 * bytes) / (m * 1e6) / bandwidth).toFixed(0)}%`;
        row[`${a.name} cpu ms`] = median(cpu[i]).toFixed(3);
      });
      if (addons.length === 2) {
        row['base / this'] = median(wall[0].map((m, r) => m / wall[1][r])).toFixed(2);
        row['cpu base / this'] = median(cpu[0].map((m, r) => m / cpu[1][r])).toFixed(2);
      }
      table.push(row);
    }
  }
}
for (const a of addons) {
  a.raw.forceKernelPath(null);
  a.raw.forceQ8GemmMinN(null as never);
}
console.table(table);
