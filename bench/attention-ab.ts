/**
 * Dense decode of two builds of the native addon in one process (before / after a kernel change):
 *   pnpm exec tsx bench/attention-ab.ts --base /path/to/old/sparq_native.node
 *     [--op decode|sparq|append] [--kv f16,q8_0,q4_0] [--g 1,4,8] [--S 16384,32768] [--paths avx2,avx512] [--time 600] [--cpu | --interleave]
 *
 * --op sparq times SparQ decode instead (r = d/8, k = S/8, l = k/4, sparq bench's row) on the
 * 'k-twice' layout with a session's K transposed (DEFAULT_SESSION_KT: i4 for f16 and q8_0, i2 for
 * q4_0); --op append times the kvAppend of one token at position S - 1 into that cache (a decode
 * step's append, integer kT blocks included). %BW is dense's only.
 *
 * Copy build/sparq_native.node aside before rebuilding and pass it as --base. Per row (kv type, GQA
 * group g, S, kernel path): a read probe at the default thread count, then the two builds' dense
 * decodes alternating, 3 rounds of tinybench medians each, the best round kept. %BW is the K and V
 * rows' bytes per second over the probe, as in bench/attention.ts's --kv sweep (32 query heads x
 * d 128, batch 1, both builds reading the same cache).
 *
 * --cpu: the process's CPU time per call instead (run with SPARQ_THREADS=1), the best of 5 rounds
 * of alternating batches, and the K and V rows' GB/s over it in place of %BW: figures that a
 * loaded machine does not inflate the way it inflates wall times.
 *
 * --interleave: the builds' calls alternate one by one (medians of each, 3 rounds, the best kept)
 * instead of in tinybench batches. The VM's read bandwidth changes within a row (50 <-> 80 GB/s on
 * 2 threads); batches then time the builds in different states, calls side by side do not. It sets
 * SPARQ_SPIN_US=0 unless set: each build has its own thread pool, whose workers would otherwise spin
 * 500 us into the other build's call (an unchanged kernel read 0.87-0.89x of itself with them).
 */
import { loadBackends } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import { createRequire } from 'node:module';
import { type NativeAddon } from '../packages/native/lib/addon.ts';
import { randomCache, randomQuery } from '../packages/cli/src/bench/random-cache.ts';
import { median } from '../packages/cli/src/bench/timing.ts';
import { measureReadBandwidth, medianMs } from './bandwidth.ts';

const option = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(name);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
};
const basePath = option('--base', '');
if (!basePath)
  throw new Error('bench/attention-ab.ts: --base <path to the other build of sparq_native.node> is required');
const require = createRequire(import.meta.url);
const base = require(basePath) as NativeAddon;
const current = require('../packages/native/build/sparq_native.node') as NativeAddon;
const { available } = await loadBackends();
const native = available.find((e) => e.name === 'native');
if (!native) throw new Error('bench/attention-ab.ts needs the native backend (pnpm build:native)');

const H = 32;
const D = 128;
const dtypes = option('--kv', 'f16,q8_0,q4_0').split(',') as ('f16' | 'q8_0' | 'q4_0')[];
const groups = option('--g', '1,4,8').split(',').map(Number);
const sizes = option('--S', '16384,32768').split(',').map(Number);
const paths = option('--paths', 'avx2,avx512').split(',');
const timeMs = Number(option('--time', '600'));
const rowBytes = { f16: 2 * D, q8_0: (D / 32) * 34, q4_0: (D / 32) * 18 } as const;
const op = option('--op', 'decode') as 'decode' | 'sparq' | 'append';
if (!['decode', 'sparq', 'append'].includes(op))
  throw new Error(`bench/attention-ab.ts: --op ${op}, expected decode | sparq | append`);
const sessionKT = { f16: 'i4', q8_0: 'i4', q4_0: 'i2' } as const;
const cpu = process.argv.includes('--cpu');
const interleave = process.argv.includes('--interleave');
if (interleave) process.env.SPARQ_SPIN_US ??= '0'; // read by the pools at their first call (common/threads.cc)

// CPU ms per call of fn over about timeMs of calls (the first call untimed).
function cpuMs(fn: () => void, timeMs: number): number {
  fn();
  const start = performance.now();
  const before = process.cpuUsage();
  let calls = 0;
  do {
    fn();
    calls++;
  } while (performance.now() - start < timeMs);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / calls;
}

// Median wall ms per call of each fn, the fns called in turn one call at a time over about timeMs (the first calls untimed).
function interleavedMs(fns: (() => void)[], timeMs: number): number[] {
  for (const fn of fns) fn();
  const times: number[][] = fns.map(() => []);
  const start = performance.now();
  do {
    fns.forEach((fn, i) => {
      const t0 = performance.now();
      fn();
      times[i].push(performance.now() - t0);
    });
  } while (performance.now() - start < timeMs);
  return times.map(median);
}

console.log(`# ${op}, ${H} query heads x d ${D}: base ${basePath} against this build, alternating`);
console.log(
  `  kv   g       S  kernel | base ms  ${cpu ? 'GB/s' : ' %BW'} | this ms  ${cpu ? 'GB/s' : ' %BW'} | speed-up | ${cpu ? '(CPU time per call)' : 'read GB/s'}`,
);
for (const dtype of dtypes) {
  for (const g of groups) {
    for (const S of sizes) {
      const nKv = H / g;
      const cache =
        op === 'decode'
          ? randomCache(native, { S, heads: nKv, headDim: D, dtype, layout: 'single-k' })
          : randomCache(native, { S, heads: nKv, headDim: D, dtype, layout: 'k-twice', kTDType: sessionKT[dtype] });
      const { q, out } = randomQuery(H, D, 3);
      const row = randomQuery(nKv, D, 4).q; // (1, nKv, d): the appended token's k and v
      const bytes = 2 * nKv * S * rowBytes[dtype];
      const [r, k] = [D / 8, S / 8];
      const decode = (addon: NativeAddon) => {
        const call = (name: string, ...a: unknown[]) =>
          (addon[name as keyof NativeAddon] as (...b: unknown[]) => void)(...a);
        if (op === 'sparq') return () => call('attnSparq', cache, q.data, out.data, H, r, k, k / 4, true, null, null);
        if (op === 'append')
          return () => {
            cache.nPast[0] = S - 1;
            call('attnKvAppend', cache, 0, row.data, row.data, 1);
          };
        return () => call('attnDecode', cache, q.data, out.data, H, null);
      };
      for (const path of paths) {
        base.forceKernelPath(path);
        current.forceKernelPath(path);
        const bw = cpu ? 0 : await measureReadBandwidth(2, 800);
        const best = [Infinity, Infinity];
        for (let round = 0; round < (cpu ? 5 : 3); round++) {
          if (cpu) {
            best[0] = Math.min(best[0], cpuMs(decode(base), timeMs / 2));
            best[1] = Math.min(best[1], cpuMs(decode(current), timeMs / 2));
          } else if (interleave) {
            const [a, b] = interleavedMs([decode(base), decode(current)], 2 * timeMs);
            best[0] = Math.min(best[0], a);
            best[1] = Math.min(best[1], b);
          } else {
            best[0] = Math.min(best[0], await medianMs('base', decode(base), timeMs));
            best[1] = Math.min(best[1], await medianMs('this', decode(current), timeMs));
          }
        }
        const pct = (ms: number) =>
          op !== 'decode'
            ? '   -'
            : cpu
              ? `${(bytes / (ms * 1e6)).toFixed(0).padStart(2)}GB`
              : `${((100 * bytes) / (ms * 1e6) / bw).toFixed(0).padStart(3)}%`;
        console.log(
          `${dtype.padStart(4)} ${String(g).padStart(3)} ${String(S).padStart(7)} ${path.padStart(7)} | ${best[0].toFixed(2).padStart(7)} ${pct(best[0])} | ${best[1].toFixed(2).padStart(7)} ${pct(best[1])} | ${(best[0] / best[1]).toFixed(2).padStart(7)}x | ${cpu ? '' : bw.toFixed(1)}`,
        );
      }
      base.forceKernelPath(null);
      current.forceKernelPath(null);
    }
  }
}
