/**
 * llama.cpp beside sparq, through node-llama-cpp (an optional peer: loaded
 * with a dynamic import, never built from source). The same file, the same
 * thread count, the same prompt tokens (given as ids: no BOS added), prefill
 * in batches of 512 then one token per evaluation, as sparq runs them.
 *
 * Each run measures llama.cpp twice, with its flash-attention kernel on and off,
 * and keeps the faster prefill and the faster decode: which one wins depends on
 * the CPU build and S (measured on an AMD EPYC Zen 4 with node-llama-cpp 3.22's
 * CPU build, S = 16k, one thread: prefill 228 against 169 tok/s with it on,
 * decode 92 against 29 ms per token with it off), and llama.cpp's best is the
 * fair comparison.
 */
import type { PrefillProgress } from '@sparq/llm';
import { kvLabel, kvTypes, type KVTypeChoice } from '@sparq/core';
import { rssWindow } from './memory.ts';
import type { SystemTiming } from './sparq-e2e.ts';

export interface LlamaCppRunOptions {
  /** KV cache type of K and of V (node-llama-cpp's experimentalKvCacheKeyType / ValueType); default f16. */
  /** K and V cache types (-ctk / -ctv), default f16. */
  kv?: KVTypeChoice;
  /** Flash attention settings to run, default both (on, then off); the faster counts, per metric. */
  flash?: readonly boolean[];
  /** Called as the prompt goes in (in pieces of PROGRESS_TOKENS). */
  onProgress?: (progress: PrefillProgress) => void;
}

export interface LlamaCppRun extends SystemTiming {
  /** Positions of the context llama.cpp allocated (its n_ctx: asked for, rounded up by llama.cpp). */
  contextSize: number;
  /** Peak RSS of the process over the run, bytes (null where not measurable; see memory.ts). */
  peakRssBytes: number | null;
  /** RSS just before the run, bytes. */
  startRssBytes: number | null;
  /** Flash attention settings that failed, with llama.cpp's reason (a quantized V cache needs flash attention). */
  failed: string[];
}

export interface LlamaCppRunner {
  /** llama.cpp's release tag in node-llama-cpp's prebuilt binary. */
  version: string;
  run(
    tokens: readonly number[],
    S: number,
    steps: number,
    threads: number,
    options?: LlamaCppRunOptions,
  ): Promise<LlamaCppRun>;
  dispose(): Promise<void>;
}

const BATCH = 512;
/** Prompt tokens per evaluation call, so a long prefill can report progress (llama.cpp batches each call by BATCH). */
const PROGRESS_TOKENS = 16 * BATCH;
/** llama.cpp's names of the KV types. */
const GGML_KV = { f32: 'F32', f16: 'F16', q8_0: 'Q8_0', q4_0: 'Q4_0' } as const;

/**
 * A runner for the GGUF at `path`, or why llama.cpp cannot run here. `clock` gives the times in ms
 * (default the wall clock; bench/prefill.ts --cpu passes the process's CPU time).
 */
export async function openLlamaCpp(
  path: string,
  clock: () => number = () => performance.now(),
): Promise<LlamaCppRunner | { missing: string }> {
  let lib: typeof import('node-llama-cpp');
  try {
    lib = await import('node-llama-cpp');
  } catch (error) {
    return {
      missing: `node-llama-cpp is not installed (npm install node-llama-cpp to compare): ${(error as Error).message.split('\n')[0]}`,
    };
  }
  let llama: Awaited<ReturnType<typeof lib.getLlama>>;
  try {
    llama = await lib.getLlama({ gpu: false, build: 'never', logLevel: lib.LlamaLogLevel.error });
  } catch (error) {
    return {
      missing: `node-llama-cpp has no usable prebuilt llama.cpp for this machine: ${(error as Error).message.split('\n')[0]}`,
    };
  }
  const model = await llama.loadModel({ modelPath: path });
  /** One prefill of S tokens and `steps` decode steps in a fresh context. */
  const runOnce = async (
    tokens: readonly number[],
    S: number,
    steps: number,
    threads: number,
    flashAttention: boolean,
    o: LlamaCppRunOptions,
  ) => {
    const { k, v } = kvTypes(o.kv ?? 'f16');
    const context = await model.createContext({
      contextSize: S + steps + 8,
      batchSize: Math.min(BATCH, S),
      threads: { ideal: threads, min: threads },
      sequences: 1,
      flashAttention,
      experimentalKvCacheKeyType: GGML_KV[k],
      experimentalKvCacheValueType: GGML_KV[v],
    });
    try {
      const sequence = context.getSequence();
      const ids = tokens as unknown as import('node-llama-cpp').Token[];
      let t0 = clock();
      for (let done = 0; done < S;) {
        const n = Math.min(PROGRESS_TOKENS, S - done);
        await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(done, done + n));
        done += n;
        const ms = clock() - t0;
        o.onProgress?.({ done, total: S, tokensPerSecond: ms > 0 ? (1000 * done) / ms : 0 });
      }
      const prefillMs = clock() - t0;
      t0 = clock();
      // One evaluation per token with the next token sampled greedily (logits computed, as sparq's decode does).
      for (let i = 0; i < steps; i++)
        await sequence.controlledEvaluate([
          [ids[S + i], { generateNext: { token: true, options: { temperature: 0 } } }],
        ]);
      return { prefillMs, decodeMs: [(clock() - t0) / steps], contextSize: context.contextSize };
    } finally {
      await context.dispose();
    }
  };
  return {
    version: llama.llamaCppRelease.release,
    async run(tokens, S, steps, threads, options = {}) {
      const window = await rssWindow();
      const timings: Awaited<ReturnType<typeof runOnce>>[] = [];
      const failed: string[] = [];
      for (const flashAttention of options.flash ?? [true, false]) {
        try {
          timings.push(await runOnce(tokens, S, steps, threads, flashAttention, options));
        } catch (error) {
          failed.push(`flash attention ${flashAttention ? 'on' : 'off'}: ${(error as Error).message.split('\n')[0]}`);
        }
      }
      if (timings.length === 0)
        throw new Error(
          `llama.cpp could not run S = ${S} with KV ${kvLabel(options.kv ?? 'f16')}: ${failed.join('; ')}`,
        );
      return {
        prefillMs: Math.min(...timings.map((t) => t.prefillMs)),
        decodeMs: [Math.min(...timings.map((t) => t.decodeMs[0]))],
        contextSize: Math.max(...timings.map((t) => t.contextSize)),
        peakRssBytes: window.peakBytes(),
        startRssBytes: window.startBytes,
        failed,
      };
    },
    dispose: () => model.dispose(),
  };
}
