/**
 * Weight matvec for every weight type, native, 4096 x 4096:
 *   pnpm bench:matvec [--quick] [--types q8_0,int4] [--products dequant,int8] [--paths avx2,avx512] [--threads 1,2]
 *
 * Every block type and INT4 runs by both product paths (ProductPath in core/backend.ts): 'dequant'
 * (weights decoded to f32) and 'int8' (activations quantized to 8 bits in ggml's activation blocks,
 * integer sums against the weights' codes: packages/native/src/ops/matvec_q8.h for the block types);
 * f32, f16 and bf16 have one row each (their f32 product).
 *
 * For each kernel path this CPU runs (avx2, avx512) and thread count (1, 2): GB/s of weight
 * bytes read and the ratio to the read bandwidth measured at the same thread count
 * (bench/bandwidth.ts) right before each row, so that on a shared machine whose bandwidth moves
 * by 2x within a minute each ratio compares two numbers taken seconds apart. The weights rotate
 * through STREAM_MB of copies (several times this machine's L3), so each call reads its weights
 * from DRAM, as a model's layers do. Repeat the run and compare ratios, not absolute GB/s.
 * `GB/s per core` divides the bytes by the process's CPU time over the same calls (all threads,
 * the pool's spinning between calls included: packages/native/src/common/threads.cc):
 * on a machine shared with other jobs, time spent descheduled is not in it, so it shows what a
 * kernel does per core while it runs (on an idle machine it is GB/s / threads).
 * Target (issue 13): INT4 and every K-quant matvec >= 70% of its bandwidth bound.
 */
import {
  BLOCK_DTYPES,
  Int4Matrix,
  Tensor,
  loadBackends,
  type Engine,
  type MatrixDType,
  type ProductPath,
} from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { measureReadBandwidth, medianMs } from './bandwidth.ts';

const SIZE = 4096;
const STREAM_MB = 160;
const TARGET = 0.7;
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const option = (name: string): string[] | null => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1].split(',') : null;
};

const { available } = await loadBackends();
const native = available.find((e) => e.name === 'native');
const reference = available.find((e) => e.name === 'reference')!;
if (!native) throw new Error('bench/matvec.ts needs the native backend (pnpm build:native)');
const raw = loadAddon();
const threadsAddon = attentionAddon(raw);

interface Case {
  type: string;
  product: ProductPath | 'f32';
  bytes: number;
  run: () => void;
}

let seed = 12345;
const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const values = Tensor.f32([SIZE, SIZE], Float32Array.from({ length: SIZE * SIZE }, random));
const x = Tensor.f32([SIZE], Float32Array.from({ length: SIZE }, random));
const out = Tensor.zeros('f32', [SIZE]);

/** Enough copies of `bytes` to stream STREAM_MB per round (at least two, so no call finds its weights cached). */
const copies = (bytes: number) => Math.max(2, Math.ceil((STREAM_MB * 2 ** 20) / bytes));
const roundRobin = (runs: (() => void)[]) => {
  let i = 0;
  return () => runs[i++ % runs.length]();
};

function tensorCases(engine: Engine, dtype: MatrixDType, products: readonly ProductPath[]): Case[] {
  const w = Tensor.zeros(dtype, [SIZE, SIZE]);
  if (dtype === 'f32') w.data.set(values.data);
  else if (dtype === 'f16' || dtype === 'bf16') {
    const u = w.data as Uint16Array;
    const bits = new Uint32Array(values.data.buffer);
    // bf16: the top half of the f32 bits; f16: any finite pattern does for timing (exponent kept small).
    for (let i = 0; i < u.length; i++) u[i] = dtype === 'bf16' ? bits[i] >>> 16 : (bits[i] >>> 16) & 0xbbff;
  } else if (engine.has('quantize', dtype)) engine.quantize(w as Tensor<'q8_0'>, values);
  else {
    // Types native only reads: the reference quantizes 64 rows (its K-quant scale search is slow), tiled.
    const band = Tensor.zeros(dtype, [64, SIZE]);
    reference.quantize(band as Tensor<'q8_0'>, Tensor.f32([64, SIZE], values.data.subarray(0, 64 * SIZE)));
    for (let r = 0; r < SIZE; r += 64) w.data.set(band.data, (r / 64) * band.data.length);
  }
  const bytes = w.data.byteLength;
  const all = Array.from({ length: copies(bytes) }, (_, i) =>
    i === 0 ? w : new Tensor(dtype, w.data.slice() as never, w.shape),
  );
  if (dtype === 'f32' || dtype === 'f16' || dtype === 'bf16')
    return [{ type: dtype, product: 'f32', bytes, run: roundRobin(all.map((m) => () => engine.matvec(out, m, x))) }];
  return products.map((p) => ({
    type: dtype,
    product: p,
    bytes,
    run: roundRobin(all.map((m) => () => engine.matvec(out, m, x, p))),
  }));
}

function int4Case(engine: Engine, path: ProductPath): Case {
  const w = new Int4Matrix(SIZE, SIZE, { groupSize: 32, symmetric: true });
  engine.quantizeInt4(w, values);
  const bytes = w.packed.byteLength + w.scales.byteLength + w.zeros.byteLength;
  const all = Array.from({ length: copies(bytes) }, (_, i) => {
    if (i === 0) return w;
    const c = new Int4Matrix(SIZE, SIZE, { groupSize: 32, symmetric: true });
    c.packed.set(w.packed);
    c.scales.set(w.scales);
    return c;
  });
  return {
    type: 'int4',
    product: path,
    bytes,
    run: roundRobin(all.map((m) => () => engine.matvecInt4(out, m, x, path))),
  };
}

const TYPES: readonly string[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES, 'int4'];
const types = option('types') ?? TYPES;
const products = (option('products') ?? ['dequant', 'int8']) as ProductPath[];
const cases = types.flatMap((t) =>
  t === 'int4' ? products.map((p) => int4Case(native, p)) : tensorCases(native, t as MatrixDType, products),
);
const paths = (option('paths') ?? ['avx2', 'avx512']).filter((p) => raw.kernelPaths().supported.includes(p));
const threadCounts = (option('threads') ?? ['1', '2']).map(Number);

console.log(`native: ${raw.info().kernel}; ${SIZE}x${SIZE} matvec, weights streamed from ${STREAM_MB} MB of copies`);
const table: Record<string, string>[] = [];
const defaultThreads = threadsAddon.attnThreads();
for (const threads of threadCounts) {
  for (const path of paths) {
    raw.forceKernelPath(path);
    for (const c of cases) {
      const bandwidth = await measureReadBandwidth(threads, quick ? 200 : 500);
      // After the probe, which restores the default thread count when it ends.
      threadsAddon.attnSetThreads(threads);
      const ms = await medianMs(c.type, c.run, quick ? 150 : 600);
      const gbs = c.bytes / (ms * 1e6);
      const calls = Math.max(3, Math.ceil((quick ? 100 : 300) / ms));
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < calls; i++) c.run();
      const cpu = process.cpuUsage(cpu0);
      const perCore = (c.bytes * calls) / ((cpu.user + cpu.system) * 1e3);
      table.push({
        type: c.type,
        product: c.product,
        path,
        threads: String(threads),
        ms: ms.toFixed(3),
        'GB/s': gbs.toFixed(1),
        'GB/s per core': perCore.toFixed(1),
        'read GB/s': bandwidth.toFixed(1),
        'of bandwidth': `${((100 * gbs) / bandwidth).toFixed(0)}%`,
      });
    }
  }
}
raw.forceKernelPath(null);
threadsAddon.attnSetThreads(defaultThreads);
console.table(table);
const missed = table.filter(
  (r) => (r.type === 'int4' || r.type.endsWith('_k')) && Number(r['GB/s']) / Number(r['read GB/s']) < TARGET,
);
console.log(
  missed.length
    ? `below the ${TARGET * 100}% target: ${missed.map((r) => `${r.type} ${r.product} ${r.path} ${r.threads}t`).join(', ')}`
    : `INT4 / K-quant rows all at >= ${TARGET * 100}% of bandwidth`,
);
