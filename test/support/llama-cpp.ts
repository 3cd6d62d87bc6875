/**
 * llama.cpp itself (node-llama-cpp's prebuilt CPU binaries) as an oracle for
 * model files: load a GGUF, decode greedily from BOS, and record each step's
 * token and full logits. getLlama never builds from source here: when no
 * prebuilt binary fits the machine, `llamaCppMissing` says why.
 */
import type { LlamaContextSequence } from 'node-llama-cpp';
import { commonPrefix } from '@sparq/llm';

export type Llama = Awaited<ReturnType<typeof import('node-llama-cpp').getLlama>>;

let instance: Promise<Llama> | null = null;

/** The process's llama.cpp (CPU, prebuilt binaries only), loaded on first use. */
export function llama(): Promise<Llama> {
  instance ??= import('node-llama-cpp').then(({ getLlama, LlamaLogLevel }) =>
    getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error }),
  );
  return instance;
}

/** Why llama.cpp cannot run here, or null. */
export async function llamaCppMissing(): Promise<string | null> {
  try {
    await llama();
    return null;
  } catch (error) {
    return `node-llama-cpp has no usable prebuilt llama.cpp: ${(error as Error).message}`;
  }
}

export interface LlamaCppRun {
  /** Greedy tokens after BOS, one per step. */
  tokens: number[];
  /** (steps) each step's logits over the vocab, before the token was chosen. */
  logits: Float32Array[];
  /** Milliseconds to load the model. */
  loadMs: number;
}

/**
 * Greedy decoding of `steps` tokens by llama.cpp after `start` (BOS alone, or a whole prompt
 * evaluated in one call), then one token per evaluation.
 * `useMmap: false` makes llama.cpp read each tensor instead of mapping the file (a mapped sparse
 * file of tens of GiB gets its holes paged in). `f32Kv`: an f32 KV cache without flash attention
 * (llama.cpp's default cache is f16), so that only the products' arithmetic differs.
 */
export async function llamaCppGreedy(
  path: string,
  start: number | readonly number[],
  steps: number,
  vocab: number,
  options: { useMmap?: boolean; f32Kv?: boolean } = {},
): Promise<LlamaCppRun> {
  const prompt = typeof start === 'number' ? [start] : start;
  const l = await llama();
  const t0 = performance.now();
  const model = await l.loadModel({ modelPath: path, useMmap: options.useMmap ?? true });
  const loadMs = performance.now() - t0;
  // One thread: for these tiny models llama.cpp's thread barriers cost more than the work, and on a
  // loaded 2-core machine two threads measured ~300 ms per token against ~1.4 ms with one.
  const kv = options.f32Kv
    ? ({ flashAttention: false, experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32' } as const)
    : {};
  const context = await model.createContext({
    contextSize: Math.max(64, prompt.length + steps + 8),
    threads: 1,
    batchSize: prompt.length > 1 ? 512 : 8,
    ...kv,
  });
  try {
    return { ...(await llamaCppSteps(context.getSequence(), prompt, steps, vocab)), loadMs };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

/**
 * Greedy decoding of `steps` tokens on `sequence` after `input` (evaluated in one call, after what
 * the sequence holds), then one token per evaluation: each step's token and logits over the vocab.
 */
export async function llamaCppSteps(
  sequence: LlamaContextSequence,
  input: readonly number[],
  steps: number,
  vocab: number,
): Promise<{ tokens: number[]; logits: Float32Array[] }> {
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  for (let i = 0; i < steps; i++) {
    const last = input.length - 1;
    const items = input.map((t, j) =>
      j < last ? t : [t, { generateNext: { token: true, logits: true, options: { temperature: 0 } } }],
    );
    const outs = await sequence.controlledEvaluate(items as never);
    const out = outs[last];
    const row = new Float32Array(vocab).fill(Number.NaN);
    for (const [token, logit] of out!.next.logits!) row[token as number] = logit;
    logits.push(row);
    tokens.push(out!.next.token as number);
    input = [out!.next.token as number];
  }
  return { tokens, logits };
}

/**
 * Greedy decoding of `steps` tokens after `prompt` on a sequence that may hold an earlier prompt:
 * the tokens it shares with `prompt` are kept (all but the last prompt token, which is evaluated again
 * for its logits), the rest erased, and only `evaluated` tokens go through the model. `share: false`
 * erases everything first, for a run to compare with.
 */
export async function llamaCppContinue(
  sequence: LlamaContextSequence,
  prompt: readonly number[],
  steps: number,
  vocab: number,
  share = true,
): Promise<{ tokens: number[]; logits: Float32Array[]; evaluated: number }> {
  const keep = share ? Math.min(commonPrefix(sequence.contextTokens as number[], prompt), prompt.length - 1) : 0;
  if (keep < sequence.nextTokenIndex)
    await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  return { ...(await llamaCppSteps(sequence, prompt.slice(keep), steps, vocab)), evaluated: prompt.length - keep };
}
