/**
 * Part (b) of `sparq bench`, with (c): prefill and decode tokens/s at each
 * context length S, sparq dense against sparq SparQ (r = d/8, k = S/8 and
 * S/16), and llama.cpp's dense beside them when it is available. The systems
 * alternate (sparq, llama.cpp, sparq, llama.cpp ...) at each S and thread count,
 * so slow drift on a shared machine hits both alike; each reports its fastest
 * repetition. Decode's achieved bandwidth counts the weights a step reads in
 * full plus SPEC 3's KV elements for the method.
 */
import type { KVDType } from '@sparq/core';
import { attentionCost, mulberry32, type LanguageModel } from '@sparq/llm';
import type { BenchModel } from './bench-model.ts';
import { sweepMethods } from './kernel-sweep.ts';
import type { LlamaCppRunner } from './llama-cpp.ts';
import { withThreads, type NativeControls } from './native.ts';
import { e2ePositions, sparqEndToEnd, type SystemTiming } from './sparq-e2e.ts';

export interface EndToEndOptions {
  lm: LanguageModel;
  model: BenchModel;
  llamaCpp: LlamaCppRunner | null;
  native: NativeControls | null;
  threads: readonly number[];
  seqs: readonly number[];
  /** Decode steps timed per method. */
  steps: number;
  reps: number;
  kv: KVDType;
  bandwidth: ReadonlyMap<number, number>;
  log: (line: string) => void;
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
  kv: KVDType;
  prefillTokS: number;
  decodeTokS: number;
  /** Bytes one decode step reads: weights (all but the embedding) and the method's KV elements. */
  decodeBytes: number;
  /** decodeBytes per second over the measured read bandwidth, in percent (null when not measured). */
  pctBandwidth: number | null;
}

/** llama.cpp's KV cache type by default (node-llama-cpp does not change it). */
const LLAMA_CPP_KV: KVDType = 'f16';

/** Random prompt ids in [3, vocab): past <unk>, <s>, </s> of llama vocabs. */
function promptTokens(count: number, vocab: number): number[] {
  const random = mulberry32(7);
  return Array.from({ length: count }, () => 3 + Math.floor(random() * (vocab - 3)));
}

/** The fastest of `runs` (prefill and each method's decode on their own). */
function best(runs: SystemTiming[]): SystemTiming {
  return { prefillMs: Math.min(...runs.map((r) => r.prefillMs)), decodeMs: runs[0].decodeMs.map((_, i) => Math.min(...runs.map((r) => r.decodeMs[i]))) };
}

export async function endToEnd(o: EndToEndOptions): Promise<EndToEndRow[]> {
  const c = o.lm.config;
  const rows: EndToEndRow[] = [];
  for (const threads of o.threads) {
    for (const S of o.seqs) {
      const methods = sweepMethods(S, c.headDim);
      const tokens = promptTokens(e2ePositions(S, o.steps, methods.length), c.vocabSize);
      const sparqRuns: SystemTiming[] = [];
      const llamaRuns: SystemTiming[] = [];
      for (let rep = 0; rep < o.reps; rep++) {
        const s = await withThreads(o.native, threads, () => sparqEndToEnd(o.lm, tokens, S, o.steps, methods, o.kv));
        sparqRuns.push(s);
        o.log(`e2e sparq ${threads}t S=${S} rep ${rep + 1}: prefill ${((1000 * S) / s.prefillMs).toFixed(1)} tok/s, decode ${methods.map((m, i) => `${m.method}${m.method === 'sparq' ? ` k=${m.k}` : ''} ${(1000 / s.decodeMs[i]).toFixed(1)}`).join(', ')} tok/s`);
        if (o.llamaCpp) {
          const l = await o.llamaCpp.run(tokens, S, o.steps, threads);
          llamaRuns.push(l);
          o.log(`e2e llama.cpp ${threads}t S=${S} rep ${rep + 1}: prefill ${((1000 * S) / l.prefillMs).toFixed(1)} tok/s, decode ${(1000 / l.decodeMs[0]).toFixed(1)} tok/s`);
        }
      }
      const row = (system: EndToEndRow['system'], kv: KVDType, timing: SystemTiming) =>
        (m: (typeof methods)[number], i: number): EndToEndRow => {
          const kvBytes = c.nLayers * c.nKvHeads * attentionCost(m, S, c.headDim) * (kv === 'f32' ? 4 : 2);
          const decodeBytes = o.model.weightBytes + kvBytes;
          const bw = o.bandwidth.get(threads);
          return {
            system, method: m.method as EndToEndRow['method'], r: m.r, k: m.k, l: m.l, threads, S, kv,
            prefillTokS: (1000 * S) / timing.prefillMs, decodeTokS: 1000 / timing.decodeMs[i], decodeBytes,
            pctBandwidth: bw ? (100 * decodeBytes) / (timing.decodeMs[i] * 1e6) / bw : null,
          };
        };
      rows.push(...methods.map(row('sparq', o.kv, best(sparqRuns))));
      if (llamaRuns.length > 0) rows.push(row('llama.cpp', LLAMA_CPP_KV, best(llamaRuns))(methods[0], 0));
      o.onRows?.(rows);
    }
  }
  return rows;
}
