/**
 * Text generation with run.c's loop semantics, synchronously: `steps` counts
 * positions including BOS at position 0 (0 or more than seq_len means
 * seq_len); the prompt (BOS, dummy prefix, pieces) is forwarded in one batched
 * prefill; then each sampled token is shown and, while positions remain,
 * forwarded with the chosen decode attention. Sampling BOS (or EOS) ends the
 * text of a llama2.c model; an end-of-generation token (not BOS) that of a
 * GGUF model, as in llama.cpp (generation-limits.ts). What run.c prints goes to `onPiece`: the prompt's text, then each
 * sampled token's (see text-stream.ts for the one difference from run.c).
 * This is a TextSession of `steps` positions run to the end with `step()`.
 */
import {
  SparqRangeError,
  type Engine,
  type ProductPath,
  type KVTypeChoice,
  type KTDType,
  type KVLayout,
} from '@sparq/core';
import type { AttentionConfig } from './attention-method.ts';
import type { PrefillProgress, Session } from './forward.ts';
import { contextSize, stopRuleOf, type StopRule } from './generation-limits.ts';
import { DEFAULT_PREFILL_CHUNK, checkCacheChoices, checkKeys, renamed } from './options.ts';
import { TextSession } from './text-session.ts';
import { detokenize } from './text-stream.ts';
import type { Tokenizer } from './tokenizer.ts';
import type { Model } from './weights.ts';

/** Names and defaults are options.ts's; the older names still work. */
export interface GenerateOptions {
  /** Positions including BOS (run.c's -n); 0 or > seq_len means seq_len. */
  steps: number;
  temperature: number;
  /** Nucleus sampling threshold, default DEFAULT_TOP_P (0.9). */
  topP?: number;
  /** @deprecated The older name of topP. */
  topp?: number;
  seed: bigint | number;
  attention: AttentionConfig;
  /** KV cache element type, default DEFAULT_KV_DTYPE ('f16'). */
  kv?: KVTypeChoice;
  /** @deprecated The older name of kv. */
  kvDType?: KVTypeChoice;
  /** SparQ's transposed K type, default DEFAULT_SESSION_KT of kv's K type (forward.ts). */
  kt?: KTDType;
  kvLayout?: KVLayout;
  productPath?: ProductPath;
  /** Called with each printed piece as soon as it is known (streaming). */
  onPiece?: (text: string) => void;
  /** Called after each prefill chunk: tokens done, of the total, and the rate so far. */
  onProgress?: (progress: PrefillProgress) => void;
  /** What ends the text (generation-limits.ts); default: the model's (GGUF: end-of-generation tokens; llama2.c: also BOS). */
  stop?: StopRule;
  /** Context size: the most positions, at most the model's trained context (the default). */
  contextSize?: number;
  /** @deprecated The older name of contextSize. */
  context?: number;
}

/** What `generate` produced: the tokens, the printed text, the timings and the forward session. */
export interface GenerateResult {
  /** Prompt tokens then the sampled ones. */
  tokens: number[];
  promptTokens: number;
  /** Everything printed. */
  text: string;
  prefillMs: number;
  decodeMs: number;
  /** The forward session: decode stats, spec.md §3 costs, caches. */
  session: Session;
}

/** Positions a run of `steps` uses, as run.c clamps them. */
export function clampSteps(steps: number, seqLen: number): number {
  return steps <= 0 || steps > seqLen ? seqLen : steps;
}

/** Every key of GenerateOptions: a key not among them is a mistyped option, an error before any work. */
const GENERATE_OPTIONS: readonly (keyof GenerateOptions)[] = [
  'steps',
  'temperature',
  'topP',
  'topp',
  'seed',
  'attention',
  'kv',
  'kvDType',
  'kt',
  'kvLayout',
  'productPath',
  'onPiece',
  'onProgress',
  'stop',
  'contextSize',
  'context',
];

/**
 * Runs run.c's generation loop synchronously: the prompt, then sampled tokens until `steps`
 * positions, the context or the end of text; pieces go to `onPiece`. Options are checked first, as
 * the CLI checks them.
 */
export function generate(
  engine: Engine,
  model: Model,
  tokenizer: Tokenizer,
  prompt: string,
  options: GenerateOptions,
): GenerateResult {
  checkKeys('generate', options, GENERATE_OPTIONS);
  checkCacheChoices('generate', { ...options, kv: renamed('generate', 'kv', options.kv, 'kvDType', options.kvDType) });
  const context = contextSize(
    model.config.seqLen,
    renamed('generate', 'contextSize', options.contextSize, 'context', options.context),
  );
  const steps = clampSteps(options.steps, context);
  const tokens = tokenizer.encode(prompt, { parseSpecial: true });
  if (tokens.length > steps)
    throw new SparqRangeError(
      `generate: the prompt is ${tokens.length} tokens (with BOS), more than the ${steps} positions of ${steps < context ? 'steps' : 'the context'}`,
    );
  const session = new TextSession(engine, model, tokenizer, {
    contextSize: steps,
    prefillChunk: Math.min(tokens.length, DEFAULT_PREFILL_CHUNK),
    attention: options.attention,
    kv: renamed('generate', 'kv', options.kv, 'kvDType', options.kvDType),
    kt: options.kt,
    kvLayout: options.kvLayout,
    productPath: options.productPath,
    stop: options.stop ?? stopRuleOf(model.format),
  });
  // The prompt prints as run.c echoes it.
  let text = detokenize(tokenizer, tokens);
  if (text) options.onPiece?.(text);
  const run = session.generate(tokens, {
    temperature: options.temperature,
    topP: renamed('generate', 'topP', options.topP, 'topp', options.topp),
    seed: options.seed,
    onProgress: options.onProgress,
  });
  for (let piece = run.step(); piece !== null; piece = run.step()) {
    if (!piece) continue;
    text += piece;
    options.onPiece?.(piece);
  }
  const r = run.result!;
  return {
    tokens: session.history,
    promptTokens: tokens.length,
    text,
    prefillMs: r.prefillMs,
    decodeMs: r.decodeMs,
    session: session.forward,
  };
}
