/**
 * Decode attention benchmark (spec.md §8's setting): 32 heads x d 128, batch 1.
 *   pnpm exec tsx bench/attention.ts [--quick]
 *
 * - Read bandwidth on 1 and 2 threads, measured in this run (bench/bandwidth.ts), and at the default
 *   thread count again before each row (the %readBW column divides by that one).
 * - Dense decode, native, f32 and f16 KV, S in {1k, 4k, 16k, 32k, 64k}: ms and
 *   GB/s of K and V read (issue 13's target: >= 90% of the measured read bandwidth at S >= 32k).
 * - SparQ at realistic budgets, r = d/8 = 16, k = S/8 and S/16 (l 0, reallocate) vs native
 *   dense: speed-up beside spec.md §3's data ratio (target: >= 70% of it at S >= 16k);
 *   K-twice vs single-K layout (k = S/8).
 * - Thread scaling 1 vs 2 (dense); native vs reference (reference at S <= 4k only: it is slow).
 * - Quantized KV and GQA (issue 24; `--kv` runs only this part): f16, q8_0 and q4_0 rows with
 *   the session's default kT (DEFAULT_SESSION_KT), 32 query heads in groups of 1 (MHA), 4 and 8,
 *   S 16k and 32k: dense decode's share of the read bandwidth (rows' bytes / time / probe; target
 *   >= 90% with f16 and q8_0) and SparQ's speed-up over dense (r 16, k S/8), on the AVX2 and the
 *   AVX-512 kernels in turn in one process (the addon's forceKernelPath), so both are compared
 *   under the same machine load.
 * Times are tinybench medians (p50), robust on this noisy shared machine.
 */
import { type Engine, type KVCache, type KVDType, type KVLayout, loadBackends } from '@sparq/core';
import { DEFAULT_SESSION_KT, attentionCost } from '@sparq/llm';
import '@sparq/reference';
import '@sparq/native';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';
import { randomCache, randomQuery } from '../packages/cli/src/bench/random-cache.ts';
import { measureReadBandwidth, medianMs } from './bandwidth.ts';

const quick = process.argv.includes('--quick');
const kvOnly = process.argv.includes('--kv');
const H = 32;
const D = 128;
const R = 16;
/** The SparQ budgets: k = S / div. */
const DIVS = [8, 16] as const;
const SIZES = quick ? [4096, 32768] : [1024, 4096, 16384, 32768, 65536];
const REF_MAX_S = 4096;

const { available } = await loadBackends();
const found = available.find((e) => e.name === 'native');
const reference = available.find((e) => e.name === 'reference')!;
if (!found) throw new Error('bench/attention.ts needs the native backend (pnpm build:native)');
const native: Engine = found;
const raw = loadAddon();
const addon = attentionAddon(raw);
const defaultThreads = addon.attnThreads();

/** Runs the (async) measurement with `n` native threads, restoring the default after it settles. */
async function withThreads<T>(n: number, body: () => Promise<T>): Promise<T> {
  addon.attnSetThreads(n);
  try {
    return await body();
  } finally {
    addon.attnSetThreads(defaultThreads);
  }
}

/** A full cache of S random positions, written by native kvAppend (every copy the layout keeps). */
const makeCache = (S: number, dtype: KVDType, layout: KVLayout): KVCache =>
  randomCache(native, { S, heads: H, headDim: D, dtype, layout });
// Runs take turns over 8 queries, as decode steps do: with one query SparQ selects the same rows
// every run and finds part of them in the L3 (packages/cli/src/bench/kernel-sweep.ts).
const queries = Array.from({ length: 8 }, (_, i) => randomQuery(H, D, 2 + i));
let turn = 0;
const next = () => queries[turn++ % queries.length];

function denseMs(engine: Engine, cache: KVCache, timeMs: number): Promise<number> {
  return medianMs(
    'dense',
    () => {
      const { q, out } = next();
      engine.attentionDecode(out, q, cache);
    },
    timeMs,
  );
}
function sparqMs(engine: Engine, cache: KVCache, div: number, timeMs: number): Promise<number> {
  const S = cache.capacity;
  return medianMs(
    'sparq',
    () => {
      const { q, out } = next();
      engine.sparqDecode(out, q, cache, { r: R, k: S / div, l: 0 });
    },
    timeMs,
  );
}

/** spec.md §3: dense / SparQ elements per KV head at k = S / div (l 0, reallocation on, as timed). */
function sparqTheory(S: number, div: number): number {
  const sparq = { method: 'sparq', r: R, k: S / div, l: 0, reallocate: true } as const;
  return attentionCost({ ...sparq, method: 'dense' }, S, D) / attentionCost(sparq, S, D);
}

const fmt = (x: number, digits = 2) => x.toFixed(digits).padStart(8);
console.log(
  `# attention decode benchmark: ${H} heads x d ${D}, batch 1; native kernel ${addon.attnKernel()}, threads ${defaultThreads}${quick ? ' (--quick)' : ''}`,
);
const bw1 = await measureReadBandwidth(1);
const bw2 = await measureReadBandwidth(2);
console.log(
  `read bandwidth (bench/bandwidth.ts, 1 GiB): 1 thread ${bw1.toFixed(1)} GB/s, 2 threads ${bw2.toFixed(1)} GB/s`,
);
// Probed again before each row at the default thread count, the one %readBW divides by: the Zen 4
// VM's 2-thread bandwidth switched between about 35 and 57 GB/s within minutes.
const probeDefault = () => measureReadBandwidth(defaultThreads >= 2 ? 2 : 1);

/** The f32 / f16 sweep of issue 13 (dense, SparQ, layouts, threads, reference). */
async function floatSweep(): Promise<void> {
  interface Row {
    S: number;
    dtype: string;
    dense: number;
    dense1: number;
    gbs: number;
    /** Read bandwidth (GB/s) at the default thread count, probed just before this row. */
    bw: number;
    sparq: Record<(typeof DIVS)[number], number>;
    sparqSingle: number;
    ref?: number;
    refSparq?: number;
  }
  const rows: Row[] = [];
  for (const dtype of ['f32', 'f16'] as const) {
    for (const S of SIZES) {
      const time = S >= 32768 ? 1500 : 800;
      const bytes = 2 * H * S * D * (dtype === 'f32' ? 4 : 2);
      let cache: KVCache | null = makeCache(S, dtype, 'k-twice');
      const bw = await probeDefault();
      const dense = await denseMs(native, cache, time);
      const dense1 = await withThreads(1, () => denseMs(native, cache!, time));
      const sparq = { 8: await sparqMs(native, cache, 8, time), 16: await sparqMs(native, cache, 16, time) };
      let ref: number | undefined;
      let refSparq: number | undefined;
      if (S <= REF_MAX_S) {
        ref = await denseMs(reference, cache, 400);
        refSparq = await sparqMs(reference, cache, 8, 400);
      }
      cache = null;
      const single = makeCache(S, dtype, 'single-k');
      const sparqSingle = await sparqMs(native, single, 8, time);
      rows.push({ S, dtype, dense, dense1, gbs: bytes / (dense * 1e6), bw, sparq, sparqSingle, ref, refSparq });
      console.log(
        `  measured ${dtype} S=${S}: dense ${dense.toFixed(2)} ms, sparq S/8 ${sparq[8].toFixed(3)} ms, S/16 ${sparq[16].toFixed(3)} ms`,
      );
    }
  }

  console.log(`\n## dense decode (native) and SparQ (r ${R}, k S/8 and S/16, l 0): milliseconds per step (median)`);
  console.log(
    ' dtype       S  dense ms   GB/s  read GB/s %readBW  dense1t  2t/1t |  S/8 ms  speed-up  theory  %theory | S/16 ms  speed-up  theory  %theory | single-K S/8 | ref dense  ref sparq S/8',
  );
  const pctTheory = (r: Row, div: (typeof DIVS)[number]) => (100 * (r.dense / r.sparq[div])) / sparqTheory(r.S, div);
  for (const r of rows) {
    const cols = DIVS.map(
      (div) =>
        `${fmt(r.sparq[div], 3)} ${fmt(r.dense / r.sparq[div])}x ${fmt(sparqTheory(r.S, div), 1)}x ${fmt(pctTheory(r, div), 0)}%`,
    );
    console.log(
      `${r.dtype.padStart(6)} ${String(r.S).padStart(7)} ${fmt(r.dense)} ${fmt(r.gbs, 1)} ${fmt(r.bw, 1)} ${fmt((100 * r.gbs) / r.bw, 0)}% ${fmt(r.dense1)} ${fmt(r.dense1 / r.dense)} | ${cols.join(' | ')} | ${fmt(r.sparqSingle, 3)} | ${r.ref === undefined ? '       -' : fmt(r.ref)} ${r.refSparq === undefined ? '       -' : fmt(r.refSparq)}`,
    );
  }

  console.log('\n## targets (issue 13)');
  for (const r of rows) {
    if (r.S >= 32768) {
      const pct = (100 * r.gbs) / r.bw;
      console.log(
        `dense ${r.dtype} S=${r.S}: ${pct.toFixed(0)}% of read bandwidth (target 90%): ${pct >= 90 ? 'MET' : `MISSED by ${(90 - pct).toFixed(0)} points`}`,
      );
    }
  }
  for (const r of rows) {
    if (r.S < 16384) continue;
    for (const div of DIVS) {
      const pct = pctTheory(r, div);
      console.log(
        `sparq ${r.dtype} S=${r.S} k=S/${div}: ${pct.toFixed(0)}% of the data-ratio speed-up (target 70%): ${pct >= 70 ? 'MET' : `MISSED by ${(70 - pct).toFixed(0)} points`}`,
      );
    }
  }
  console.log(
    `\nnotes: single-K = SparQ on the single-copy layout (step 1 gathers r of d components from each key row);`,
  );
  console.log(
    `reference timed at S <= ${REF_MAX_S} only; bandwidth percentages use the ${defaultThreads >= 2 ? '2' : '1'}-thread read bandwidth (the default thread count) probed just before each row (read GB/s).`,
  );
}

/**
 * Issue 24's sweep: quantized rows and GQA groups, both x86 kernel paths alternating in one
 * process. Dense reads the K and V rows (nKv * S * row bytes each); %readBW divides their GB/s
 * by the read probe taken just before the row at the default thread count.
 */
async function quantizedSweep(): Promise<void> {
  const paths = raw.kernelPaths().supported.filter((p) => p !== 'scalar');
  const sizes = quick ? [16384] : [16384, 32768];
  const rowBytes = { f16: 2 * D, q8_0: (D / 32) * 34, q4_0: (D / 32) * 18 } as const;
  console.log(
    `\n## quantized KV, GQA (issue 24): ${H} query heads x d ${D}, dense and SparQ (r ${R}, k S/8, l 0), kernels ${paths.join(' / ')} alternating`,
  );
  console.log('    kv  kT   g       S  kernel  dense ms   GB/s  read GB/s %readBW |  S/8 ms  speed-up');
  const summary: string[] = [];
  for (const dtype of ['f16', 'q8_0', 'q4_0'] as const) {
    for (const g of [1, 4, 8]) {
      for (const S of sizes) {
        const nKv = H / g;
        const kTDType = DEFAULT_SESSION_KT[dtype];
        const cache = randomCache(native, { S, heads: nKv, headDim: D, dtype, layout: 'k-twice', kTDType });
        const gqaQueries = Array.from({ length: 8 }, (_, i) => randomQuery(H, D, 2 + i));
        let at = 0;
        const time = 1000;
        const dense = () =>
          medianMs(
            'dense',
            () => {
              const { q, out } = gqaQueries[at++ % gqaQueries.length];
              native.attentionDecode(out, q, cache);
            },
            time,
          );
        const sparq = () =>
          medianMs(
            'sparq',
            () => {
              const { q, out } = gqaQueries[at++ % gqaQueries.length];
              native.sparqDecode(out, q, cache, { r: R, k: S / 8, l: 0 });
            },
            time,
          );
        const bytes = 2 * nKv * S * rowBytes[dtype];
        for (const path of paths) {
          raw.forceKernelPath(path);
          const bw = await probeDefault();
          const denseT = await dense();
          const sparqT = await sparq();
          const gbs = bytes / (denseT * 1e6);
          const pct = (100 * gbs) / bw;
          console.log(
            `${dtype.padStart(6)} ${kTDType.padStart(3)} ${String(g).padStart(3)} ${String(S).padStart(7)} ${path.padStart(7)} ${fmt(denseT, 3)} ${fmt(gbs, 1)} ${fmt(bw, 1)} ${fmt(pct, 0)}% | ${fmt(sparqT, 3)} ${fmt(denseT / sparqT)}x`,
          );
          if (dtype !== 'q4_0')
            summary.push(
              `dense ${dtype} g ${g} S=${S} ${path}: ${pct.toFixed(0)}% of read bandwidth (target 90%): ${pct >= 90 ? 'MET' : `MISSED by ${(90 - pct).toFixed(0)} points`}`,
            );
        }
        raw.forceKernelPath(null);
      }
    }
  }
  console.log('\n## targets (issue 24)');
  for (const line of summary) console.log(line);
}

if (!kvOnly) await floatSweep();
await quantizedSweep();
