/**
 * Text generation with run.c's loop semantics: `steps` counts positions
 * including BOS at position 0 (0 or more than seq_len means seq_len); the
 * prompt (BOS, dummy prefix, pieces) is forwarded in one batched prefill; then
 * each sampled token is printed and, while positions remain, forwarded with
 * the chosen decode attention. Sampling BOS ends the text, as in run.c. What
 * run.c prints goes to `onPiece`: the prompt's pieces after BOS, then every
 * sampled token, each through safe_printf's filter.
 */
import { SparqRangeError, type Engine, type Int4Path, type KVDType } from '@sparq/core';
import type { AttentionConfig } from './attention-method.ts';
import { Session } from './forward.ts';
import { Sampler } from './sampler.ts';
import { printable, type Tokenizer } from './tokenizer.ts';
import type { Model } from './weights.ts';

export interface GenerateOptions {
  /** Positions including BOS (run.c's -n); 0 or > seq_len means seq_len. */
  steps: number;
  temperature: number;
  topp: number;
  seed: bigint | number;
  attention: AttentionConfig;
  kvDType?: KVDType;
  int4Path?: Int4Path;
  /** Called with each printed piece as soon as it is known (streaming). */
  onPiece?: (bytes: Uint8Array) => void;
}

export interface GenerateResult {
  /** Prompt tokens then the sampled ones. */
  tokens: number[];
  promptTokens: number;
  /** Everything printed. */
  text: Uint8Array;
  prefillMs: number;
  decodeMs: number;
  /** The session: decode stats, SPEC 3 costs, caches. */
  session: Session;
}

/** Positions a run of `steps` uses, as run.c clamps them. */
export function clampSteps(steps: number, seqLen: number): number {
  return steps <= 0 || steps > seqLen ? seqLen : steps;
}

export function generate(engine: Engine, model: Model, tokenizer: Tokenizer, prompt: string, options: GenerateOptions): GenerateResult {
  const steps = clampSteps(options.steps, model.config.seqLen);
  const tokens = tokenizer.encode(prompt, true, false);
  if (tokens.length > steps) throw new SparqRangeError(`generate: the prompt is ${tokens.length} tokens (with BOS), more than the ${steps} positions of -n`);
  const session = new Session(engine, model, { capacity: steps, maxPrefill: tokens.length, attention: options.attention, kvDType: options.kvDType, int4Path: options.int4Path });
  const sampler = new Sampler(model.config.vocabSize, options);
  const printed: Uint8Array[] = [];
  const emit = (prev: number, next: number) => {
    const piece = printable(tokenizer.decodePiece(prev, next));
    if (piece.length === 0) return;
    printed.push(piece);
    options.onPiece?.(piece);
  };
  // The prompt prints as run.c echoes it: each token after its predecessor.
  for (let i = 1; i < tokens.length; i++) emit(tokens[i - 1], tokens[i]);

  const promptTokens = tokens.length;
  const t0 = performance.now();
  let logits = session.prefill(tokens);
  const t1 = performance.now();
  let token = tokens[tokens.length - 1];
  // Positions 0..P-1 are forwarded; each loop samples the token for position `pos`.
  for (let pos = tokens.length; ; pos++) {
    const next = sampler.sample(logits);
    if (next === tokenizer.bosId) break;
    emit(token, next);
    tokens.push(next);
    token = next;
    if (pos >= steps) break;
    logits = session.decode(token);
  }
  const t2 = performance.now();
  return { tokens, promptTokens, text: Buffer.concat(printed), prefillMs: t1 - t0, decodeMs: t2 - t1, session };
}
