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
import type { SystemTiming } from './sparq-e2e.ts';

export interface LlamaCppRunner {
  /** llama.cpp's release tag in node-llama-cpp's prebuilt binary. */
  version: string;
  run(tokens: readonly number[], S: number, steps: number, threads: number): Promise<SystemTiming>;
  dispose(): Promise<void>;
}

const BATCH = 512;

/**
 * A runner for the GGUF at `path`, or why llama.cpp cannot run here. `clock` gives the times in ms
 * (default the wall clock; bench/prefill.ts --cpu passes the process's CPU time).
 */
export async function openLlamaCpp(path: string, clock: () => number = () => performance.now()): Promise<LlamaCppRunner | { missing: string }> {
  let lib: typeof import('node-llama-cpp');
  try {
    lib = await import('node-llama-cpp');
  } catch (error) {
    return { missing: `node-llama-cpp is not installed (npm install node-llama-cpp to compare): ${(error as Error).message.split('\n')[0]}` };
  }
  let llama: Awaited<ReturnType<typeof lib.getLlama>>;
  try {
    llama = await lib.getLlama({ gpu: false, build: 'never', logLevel: lib.LlamaLogLevel.error });
  } catch (error) {
    return { missing: `node-llama-cpp has no usable prebuilt llama.cpp for this machine: ${(error as Error).message.split('\n')[0]}` };
  }
  const model = await llama.loadModel({ modelPath: path });
  /** One prefill of S tokens and `steps` decode steps in a fresh context. */
  const runOnce = async (tokens: readonly number[], S: number, steps: number, threads: number, flashAttention: boolean): Promise<SystemTiming> => {
    const context = await model.createContext({ contextSize: S + steps + 8, batchSize: Math.min(BATCH, S), threads: { ideal: threads, min: threads }, sequences: 1, flashAttention });
    try {
      const sequence = context.getSequence();
      const ids = tokens as unknown as import('node-llama-cpp').Token[];
      let t0 = clock();
      await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, S));
      const prefillMs = clock() - t0;
      t0 = clock();
      // One evaluation per token with the next token sampled greedily (logits computed, as sparq's decode does).
      for (let i = 0; i < steps; i++) await sequence.controlledEvaluate([[ids[S + i], { generateNext: { token: true, options: { temperature: 0 } } }]]);
      return { prefillMs, decodeMs: [(clock() - t0) / steps] };
    } finally {
      await context.dispose();
    }
  };
  return {
    version: llama.llamaCppRelease.release,
    async run(tokens, S, steps, threads) {
      const timings: SystemTiming[] = [];
      for (const flashAttention of [true, false]) timings.push(await runOnce(tokens, S, steps, threads, flashAttention));
      return { prefillMs: Math.min(...timings.map((t) => t.prefillMs)), decodeMs: [Math.min(...timings.map((t) => t.decodeMs[0]))] };
    },
    dispose: () => model.dispose(),
  };
}
