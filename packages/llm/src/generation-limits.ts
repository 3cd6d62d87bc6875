/**
 * What ends a generation and how long a session may be: the stop rule of the
 * model's origin, and the context size checked against the trained context.
 */
import { SparqRangeError } from '@sparq/core';
import type { Tokenizer } from './tokenizer.ts';

/**
 * 'bos': llama2.c's run.c ends the text when it samples BOS (its stories are
 * separated by BOS); EOS and the other end-of-generation tokens end it too.
 * 'eog': llama.cpp's rule for GGUF models: EOS, EOT, EOM and the tokens it
 * knows by their text (`<|eot_id|>`, `<|im_end|>`, ...) end it; BOS does not.
 */
export type StopRule = 'bos' | 'eog';

/** Whether sampling `token` ends the text under `rule`. */
export function stops(tokenizer: Tokenizer, token: number, rule: StopRule): boolean {
  return tokenizer.isEog(token) || (rule === 'bos' && token === tokenizer.bosId);
}

/** The stop rule for a model loaded from a file of this format ('GGUF v3 (...)' or llama2.c's). */
export function stopRuleOf(format: string): StopRule {
  return format.startsWith('GGUF') ? 'eog' : 'bos';
}

/** The context size asked for (default: the model's trained context), checked against the trained context. */
export function contextSize(seqLen: number, context?: number): number {
  if (context === undefined) return seqLen;
  if (!Number.isInteger(context) || context < 1 || context > seqLen)
    throw new SparqRangeError(
      `context ${context}, expected an integer in [1, ${seqLen}] (the model's trained context)`,
    );
  return context;
}
