/**
 * The 'int8' product of one block weight at 1, 8, 64 and 512 activation rows (decode, speculative
 * batches, a prefill chunk and a whole 512-token prompt), per type, shape and kernel path:
 *   pnpm exec tsx bench/gemm-prefill.ts [--types q4_k,q6_k,q8_0] [--shapes 4096x4096,14336x4096]
 *     [--ns 1,8,64,512] [--kernel avx2|avx512] [--threads 2] [--reps 5] [--cpu] [--loop N:n:shape:type]
 *
 * Wall-clock ms (--cpu: the process's CPU time), best of --reps. --loop runs only that product N times (for `perf record`).
 */
import { BLOCK_DTYPES, Tensor, type BlockDType } from '@sparq/core';
import { flag, productBench, tiledWeight } from './block-weight.ts';

const types = (flag('--types')?.split(',') ?? ['q4_k', 'q6_k', 'q8_0']) as BlockDType[];
for (const t of types)
  if (!BLOCK_DTYPES.includes(t)) throw new Error(`--types: ${t} is not a block dtype (${BLOCK_DTYPES.join(', ')})`);
const shapes = (flag('--shapes') ?? '4096x4096,14336x4096')
  .split(',')
  .map((s) => s.split('x').map(Number) as [number, number]);
const ns = (flag('--ns') ?? '1,8,64,512').split(',').map(Number);
const reps = Number(flag('--reps') ?? 5);
const { reference, native, raw } = await productBench('bench/gemm-prefill.ts', Number(flag('--threads') ?? 2));

/** A (rows, cols) weight of type t (tiledWeight), marked constant as a model's weights. */
function weight(t: BlockDType, rows: number, cols: number): Tensor {
  const w = tiledWeight(reference, t, rows, cols, (i) => Math.sin(i * 0.7) * (1 + (i % 13) / 7));
  native.markConstant(w); // as a model's weights: the products may repack it (SPARQ_NATIVE_REPACK=0: not)
  return w;
}

/** n activation rows (n, cols), or one vector (cols) for n = 1 (matvec: decode's product). */
function acts(n: number, cols: number): Tensor<'f32'> {
  const x = Tensor.zeros('f32', n === 1 ? [cols] : [n, cols]);
  for (let i = 0; i < x.size; i++) x.data[i] = Math.cos(i * 0.37);
  return x;
}

function product(w: Tensor, n: number): () => void {
  const [rows, cols] = w.shape;
  const x = acts(n, cols);
  const out = Tensor.zeros('f32', [n, rows]);
  const out1 = Tensor.zeros('f32', [rows]);
  return n === 1 ? () => native.matvec(out1, w, x, 'int8') : () => native.matmul(out, w, x, 'int8');
}

/** Milliseconds of the process's CPU time (--cpu: steadier on a shared machine; every thread's, spinning included) or of the wall clock. */
const clock = process.argv.includes('--cpu')
  ? () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    }
  : () => performance.now();

const loop = flag('--loop');
if (loop) {
  const [count, n, shape, t] = loop.split(':');
  const [rows, cols] = shape.split('x').map(Number);
  const run = product(weight(t as BlockDType, rows, cols), Number(n));
  for (let i = 0; i < Number(count); i++) run();
} else {
  console.log(
    `kernel path ${raw.kernelPaths().current}, ${flag('--threads') ?? 2} threads, ${process.argv.includes('--cpu') ? 'CPU' : 'wall'} ms (best of ${reps})`,
  );
  console.log(['type', 'shape', ...ns.map((n) => `n ${n}`)].join(' | '));
  for (const t of types)
    for (const [rows, cols] of shapes) {
      const w = weight(t, rows, cols);
      const cells = ns.map((n) => {
        const run = product(w, n);
        run();
        let best = Infinity;
        for (let r = 0; r < reps; r++) {
          const t0 = clock();
          run();
          best = Math.min(best, clock() - t0);
        }
        return `${best.toFixed(2)} ms`;
      });
      console.log([t, `${rows}x${cols}`, ...cells].join(' | '));
    }
}
