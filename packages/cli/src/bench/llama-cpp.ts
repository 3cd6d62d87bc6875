/**
 * llama.cpp beside sparq, through node-llama-cpp (an optional peer: loaded
 * with a dynamic import, never built from source). The same file, the same
 * thread count, the same prompt tokens (given as ids: no BOS added), prefill
 * in batches of 512 then one token per evaluation, as sparq runs them.
 */
import type { SystemTiming } from './sparq-e2e.ts';

export interface LlamaCppRunner {
  /** llama.cpp's release tag in node-llama-cpp's prebuilt binary. */
  version: string;
  run(tokens: readonly number[], S: number, steps: number, threads: number): Promise<SystemTiming>;
  dispose(): Promise<void>;
}

const BATCH = 512;

/** A runner for the GGUF at `path`, or why llama.cpp cannot run here. */
export async function openLlamaCpp(path: string): Promise<LlamaCppRunner | { missing: string }> {
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
  return {
    version: llama.llamaCppRelease.release,
    async run(tokens, S, steps, threads) {
      const context = await model.createContext({ contextSize: S + steps + 8, batchSize: Math.min(BATCH, S), threads: { ideal: threads, min: threads }, sequences: 1 });
      try {
        const sequence = context.getSequence();
        const ids = tokens as unknown as import('node-llama-cpp').Token[];
        let t0 = performance.now();
        await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, S));
        const prefillMs = performance.now() - t0;
        t0 = performance.now();
        // One evaluation per token with the next token sampled greedily (logits computed, as sparq's decode does).
        for (let i = 0; i < steps; i++) await sequence.controlledEvaluate([[ids[S + i], { generateNext: { token: true, options: { temperature: 0 } } }]]);
        return { prefillMs, decodeMs: [(performance.now() - t0) / steps] };
      } finally {
        await context.dispose();
      }
    },
    dispose: () => model.dispose(),
  };
}
