/**
 * Part (b) of `sparq bench`, with (c): prefill and decode tokens/s at each
 * context length S, sparq dense against sparq SparQ (r = d/8, k = S/8 and
 * S/16), and llama.cpp's dense beside them when it is available. The systems
 * alternate (sparq, llama.cpp, sparq, llama.cpp ...) at each S and thread count,
 * so slow drift on a shared machine hits both alike; each reports its fastest
 * repetition. Decode's achieved bandwidth counts the weights a step reads in
 * full plus spec.md §3's KV elements for the method. Each S runs with each KV type
 * of --e2e-kv in both engines (the same type: f16, or q8_0 as long-context
 * users run llama.cpp). Memory per system: the KV cache it allocated (sparq:
 * its buffers' bytes; llama.cpp: its n_ctx positions of K and V rows) and the
 * process's peak RSS over its run (memory.ts), beside the RSS before it.
 */
import { kvLabel, kvRowBytes, kvTypes, type KVTypeChoice } from '@sparq/core';
import { attentionCost, mulberry32, type LanguageModel, type ModelConfig, type PrefillProgress } from '@sparq/llm';
import type { BenchModel } from './bench-model.ts';
import { kvElementBytes, sweepMethods } from './kernel-sweep.ts';
import type { LlamaCppRun, LlamaCppRunner } from './llama-cpp.ts';
import { withThreads, type NativeControls } from './native.ts';
import { e2ePositions, sparqEndToEnd, type SparqRun, type SystemTiming } from './sparq-e2e.ts';

export interface EndToEndOptions {
  lm: LanguageModel;
  model: BenchModel;
  llamaCpp: LlamaCppRunner | null;
  native: NativeControls | null;
  threads: readonly number[];
  seqs: readonly number[];
  /** KV types: each S runs with each, in both engines. */
  kv: readonly KVTypeChoice[];
  /** llama.cpp's flash attention settings (LlamaCppRunOptions.flash). */
  llamaFlash?: readonly boolean[];
  /** Decode steps timed per method. */
  steps: number;
  reps: number;
  bandwidth: ReadonlyMap<number, number>;
  log: (line: string) => void;
  /** Called with each prefill's progress (system, S and the counts), for a progress line. */
  onProgress?: (what: string, progress: PrefillProgress) => void;
  /** Called with the rows so far after each S (so a long run's files are written as it goes). */
  onRows?: (rows: readonly EndToEndRow[]) => void;
}

export interface EndToEndRow {
  system: 'sparq' | 'llama.cpp';
  method: 'dense' | 'sparq';
  r: number;
  k: number;
  l: number;
  threads: number;
  S: number;
  /** The KV row types as --kv spells them ('q8_0', 'q8_0/q4_0'). */
  kv: string;
  prefillTokS: number;
  decodeTokS: number;
  /** Bytes one decode step reads: weights (all but the embedding) and the method's KV elements. */
  decodeBytes: number;
  /** decodeBytes per second over the measured read bandwidth, in percent (null when not measured). */
  pctBandwidth: number | null;
  /** Bytes of the KV cache the system allocated for the run (all layers, its context). */
  kvBytes: number;
  /** Peak RSS of the process over the system's runs (the largest of the repetitions), bytes; null where not measurable. */
  peakRssBytes: number | null;
  /** RSS before the run (model loaded, previous runs collected), bytes. */
  startRssBytes: number | null;
}

/** llama.cpp's KV cache: K and V rows (as ggml stores them, each in its type) of every layer and KV head, for `positions` positions. */
export function llamaCppKvBytes(
  c: Pick<ModelConfig, 'nLayers' | 'nKvHeads' | 'headDim'>,
  kv: KVTypeChoice,
  positions: number,
): number {
  const { k, v } = kvTypes(kv);
  return positions * c.nLayers * c.nKvHeads * (kvRowBytes(k, c.headDim) + kvRowBytes(v, c.headDim));
}

/** Random prompt ids in [3, vocab): past <unk>, <s>, </s> of llama vocabs. */
function promptTokens(count: number, vocab: number): number[] {
  const random = mulberry32(7);
  return Array.from({ length: count }, () => 3 + Math.floor(random() * (vocab - 3)));
}

/** The fastest of `runs` (prefill and each method's decode on their own). */
function best(runs: SystemTiming[]): SystemTiming {
  return {
    prefillMs: Math.min(...runs.map((r) => r.prefillMs)),
    decodeMs: runs[0].decodeMs.map((_, i) => Math.min(...runs.map((r) => r.decodeMs[i]))),
  };
}

/** The largest of the runs' values (null if any is null). */
function largest(values: (number | null)[]): number | null {
  return values.some((v) => v === null) ? null : Math.max(...(values as number[]));
}

const tokS = (n: number, ms: number) => ((1000 * n) / ms).toFixed(1);
const mib = (bytes: number | null) => (bytes === null ? '-' : `${(bytes / 2 ** 20).toFixed(0)} MiB`);

export async function endToEnd(o: EndToEndOptions): Promise<EndToEndRow[]> {
  const c = o.lm.config;
  const rows: EndToEndRow[] = [];
  for (const threads of o.threads) {
    for (const S of o.seqs) {
      const methods = sweepMethods(S, c.headDim);
      const tokens = promptTokens(e2ePositions(S, o.steps, methods.length), c.vocabSize);
      for (const kv of o.kv) {
        const sparqRuns: SparqRun[] = [];
        const llamaRuns: LlamaCppRun[] = [];
        for (let rep = 0; rep < o.reps; rep++) {
          const label = `${threads}t S=${S} KV ${kvLabel(kv)} rep ${rep + 1}`;
          const s = await withThreads(o.native, threads, () =>
            sparqEndToEnd(o.lm, tokens, S, o.steps, methods, kv, (p) => o.onProgress?.(`sparq ${label}`, p)),
          );
          sparqRuns.push(s);
          o.log(
            `e2e sparq ${label}: prefill ${tokS(S, s.prefillMs)} tok/s, decode ${methods.map((m, i) => `${m.method}${m.method === 'sparq' ? ` k=${m.k}` : ''} ${tokS(1, s.decodeMs[i])}`).join(', ')} tok/s; KV ${mib(s.kvBytes)}, peak RSS ${mib(s.peakRssBytes)}`,
          );
          if (o.llamaCpp) {
            const l = await o.llamaCpp.run(tokens, S, o.steps, threads, {
              kv,
              flash: o.llamaFlash,
              onProgress: (p) => o.onProgress?.(`llama.cpp ${label}`, p),
            });
            llamaRuns.push(l);
            o.log(
              `e2e llama.cpp ${label}: prefill ${tokS(S, l.prefillMs)} tok/s, decode ${tokS(1, l.decodeMs[0])} tok/s; KV ${mib(llamaCppKvBytes(c, kv, l.contextSize))}, peak RSS ${mib(l.peakRssBytes)}${l.failed.length ? ` (${l.failed.join('; ')})` : ''}`,
            );
          }
        }
        const row =
          (
            system: EndToEndRow['system'],
            timing: SystemTiming,
            memory: Pick<EndToEndRow, 'kvBytes' | 'peakRssBytes' | 'startRssBytes'>,
          ) =>
          (m: (typeof methods)[number], i: number): EndToEndRow => {
            const decodeBytes =
              o.model.weightBytes +
              c.nLayers * c.nKvHeads * attentionCost(m, S, c.headDim) * kvElementBytes(kv, c.headDim);
            const bw = o.bandwidth.get(threads);
            return {
              system,
              method: m.method as EndToEndRow['method'],
              r: m.r,
              k: m.k,
              l: m.l,
              threads,
              S,
              kv: kvLabel(kv),
              prefillTokS: (1000 * S) / timing.prefillMs,
              decodeTokS: 1000 / timing.decodeMs[i],
              decodeBytes,
              pctBandwidth: bw ? (100 * decodeBytes) / (timing.decodeMs[i] * 1e6) / bw : null,
              ...memory,
            };
          };
        const memory = (runs: (SparqRun | LlamaCppRun)[], kvBytes: number) => ({
          kvBytes,
          peakRssBytes: largest(runs.map((r) => r.peakRssBytes)),
          startRssBytes: largest(runs.map((r) => r.startRssBytes)),
        });
        rows.push(...methods.map(row('sparq', best(sparqRuns), memory(sparqRuns, sparqRuns[0].kvBytes))));
        if (llamaRuns.length > 0)
          rows.push(
            row(
              'llama.cpp',
              best(llamaRuns),
              memory(llamaRuns, llamaCppKvBytes(c, kv, llamaRuns[0].contextSize)),
            )(methods[0], 0),
          );
        o.onRows?.(rows);
      }
    }
  }
  return rows;
}
