/**
 * Part (a) of `sparq bench`: one decode step of attention, dense and SparQ,
 * against the context length S, per backend, KV type, layout, GQA group size
 * and thread count. The cache holds `heads` KV heads; a group size g gives each
 * g query heads (Llama 3 8B: 8 KV heads, g = 4), which share its K and V reads.
 * SparQ runs at r = d/8 and k = S/8 and S/16 (l = k/4, reallocation on). Each
 * row carries spec.md §3's data ratio (dense elements read over the method's), the
 * speed-up measured against dense on the same cache and threads, and the read
 * bandwidth the kernel achieved (its spec.md §3 bytes over its time) as a share of
 * the bandwidth probed just before its row.
 */
import { kvLabel, kvRowBytes, kvTypes, type Engine, type KVLayout, type KVTypeChoice } from '@sparq/core';
import { attentionCost, type AttentionConfig } from '@sparq/llm';
import type { NativeControls } from './native.ts';
import { withThreads } from './native.ts';
import { randomCache, randomQuery } from './random-cache.ts';
import { medianMs } from './timing.ts';

export interface SweepOptions {
  engines: readonly Engine[];
  /** The native pool (null without the addon); thread counts apply to the native backend only. */
  native: NativeControls | null;
  threads: readonly number[];
  seqs: readonly number[];
  /** KV heads of the cache. */
  heads: number;
  headDim: number;
  /** GQA group sizes: query heads per KV head. */
  groups: readonly number[];
  kv: readonly KVTypeChoice[];
  layouts: readonly KVLayout[];
  /** Time per measurement (ms). */
  timeMs: number;
  /**
   * Probes the read bandwidth (GB/s) on this many threads, or null when it cannot. Called just
   * before each row: a VM's bandwidth can change while the sweep runs (the 2-core Zen 4 VM's
   * 2-thread probe read 35 and 57 GB/s a few minutes apart, with the same code).
   */
  probe: (threads: number) => number | null;
  log: (line: string) => void;
}

export interface KernelRow {
  backend: string;
  threads: number;
  /** The KV row types as --kv spells them ('q8_0', 'q8_0/q4_0'). */
  kv: string;
  layout: KVLayout;
  /** Query heads per KV head. */
  group: number;
  S: number;
  method: 'dense' | 'sparq';
  /** SparQ's parameters (0 for dense). */
  r: number;
  k: number;
  l: number;
  /** Median milliseconds per decode step (all heads of the group size). */
  ms: number;
  /** spec.md §3 bytes read per step (all heads). */
  bytes: number;
  gbPerS: number;
  /** The read bandwidth probed just before this row's measurements (GB/s; null when not measured). */
  readGBs: number | null;
  /** gbPerS over readGBs, in percent (null when not measured). */
  pctBandwidth: number | null;
  /** Dense ms over this method's ms on the same cache and threads (1 for dense). */
  speedup: number;
  /** spec.md §3's dense elements over this method's: the speed-up if time followed the data. */
  dataRatio: number;
  /** speedup over dataRatio, in percent. */
  pctOfDataRatio: number;
}

/**
 * Bytes per element of a K row and a V row of `kv`, averaged (ggml's blocks for q8_0 and q4_0: 34 or
 * 18 bytes per 32): dense attention reads as many K elements as V elements.
 */
export function kvElementBytes(kv: KVTypeChoice, headDim: number): number {
  const { k, v } = kvTypes(kv);
  return (kvRowBytes(k, headDim) + kvRowBytes(v, headDim)) / (2 * headDim);
}

/** The methods timed at context S: dense, then SparQ at r = d/8 with k = S/8 and S/16. */
export function sweepMethods(S: number, headDim: number): AttentionConfig[] {
  const r = Math.max(1, Math.floor(headDim / 8));
  const sparq = (k: number): AttentionConfig => ({ method: 'sparq', r, k, l: Math.floor(k / 4), reallocate: true });
  return [
    { method: 'dense', r: 0, k: 0, l: 0, reallocate: false },
    sparq(Math.max(1, Math.floor(S / 8))),
    sparq(Math.max(1, Math.floor(S / 16))),
  ];
}

/** Queries the timed runs take turns over (see kernelSweep). */
const QUERIES = 8;

export async function kernelSweep(o: SweepOptions): Promise<KernelRow[]> {
  const rows: KernelRow[] = [];
  // Successive runs take turns over several queries, as decode steps do: with one query SparQ would
  // select the same rows every run and find some of them still in the last-level cache (the Zen 4
  // VM, one thread, S = 32k, k = S/8: 2-4% faster with f16, 5-11% with f32 than with 8 queries in turn).
  const queries = new Map(
    o.groups.map((g) => [g, Array.from({ length: QUERIES }, (_, i) => randomQuery(o.heads * g, o.headDim, 2 + i))]),
  );
  let turn = 0;
  for (const engine of o.engines) {
    const native = engine.name === 'native' ? o.native : null;
    const threadCounts = native ? o.threads : [1];
    for (const kv of o.kv) {
      for (const layout of o.layouts) {
        for (const S of o.seqs) {
          const cache = randomCache(engine, { S, heads: o.heads, headDim: o.headDim, dtype: kv, layout });
          const bytesPer = kvElementBytes(kv, o.headDim);
          for (const [group, turns] of queries) {
            for (const threads of threadCounts) {
              const next = () => turns[turn++ % QUERIES];
              const bw = native ? o.probe(threads) : null;
              let denseMs = NaN;
              for (const m of sweepMethods(S, o.headDim)) {
                const ms = await withThreads(native, threads, () =>
                  medianMs(
                    m.method === 'dense'
                      ? () => {
                          const { q, out } = next();
                          engine.attentionDecode(out, q, cache);
                        }
                      : () => {
                          const { q, out } = next();
                          engine.sparqDecode(out, q, cache, m);
                        },
                    { timeMs: o.timeMs },
                  ),
                );
                if (m.method === 'dense') denseMs = ms;
                const bytes = o.heads * attentionCost(m, S, o.headDim) * bytesPer;
                const gbPerS = bytes / (ms * 1e6);
                const dataRatio =
                  attentionCost({ ...m, method: 'dense' }, S, o.headDim) / attentionCost(m, S, o.headDim);
                const speedup = denseMs / ms;
                rows.push({
                  backend: engine.name,
                  threads,
                  kv: kvLabel(kv),
                  layout,
                  group,
                  S,
                  method: m.method as 'dense' | 'sparq',
                  r: m.r,
                  k: m.k,
                  l: m.l,
                  ms,
                  bytes,
                  gbPerS,
                  readGBs: bw,
                  pctBandwidth: bw ? (100 * gbPerS) / bw : null,
                  speedup,
                  dataRatio,
                  pctOfDataRatio: (100 * speedup) / dataRatio,
                });
              }
              const [d, s8, s16] = rows.slice(-3);
              o.log(
                `kernels ${engine.name} ${threads}t ${kvLabel(kv)} ${layout} g${group} S=${S}: dense ${d.ms.toFixed(3)} ms, sparq k=S/8 ${s8.ms.toFixed(3)} ms (${s8.speedup.toFixed(2)}x), k=S/16 ${s16.ms.toFixed(3)} ms (${s16.speedup.toFixed(2)}x)`,
              );
            }
          }
        }
      }
    }
  }
  return rows;
}
