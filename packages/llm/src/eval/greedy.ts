/**
 * Greedy agreement (issue 14): from the same prompt, how many tokens a method
 * generates greedily before its first difference from dense's greedy output.
 * The prompt is prefilled densely (prefill is always dense), so the first
 * generated token is dense's too. No token ends generation early: every run
 * is `count` tokens long (the comparison is of token streams, not texts).
 */
import type { Session } from '../forward.ts';
import { argmax } from '../sampler.ts';

/**
 * Greedy tokens after `prompt`, at most `count`; with `reference`, stops at
 * the first token that differs from it (the tokens returned all agree).
 */
export function greedyTokens(
  session: Session,
  prompt: readonly number[],
  count: number,
  reference?: readonly number[],
): number[] {
  session.reset();
  let logits = session.prefill(prompt);
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t = argmax(logits);
    if (reference && t !== reference[i]) break;
    out.push(t);
    if (i + 1 < count) logits = session.decode(t);
  }
  return out;
}

/** Valid positions S of the decode steps of one greedy run: prompt + 1 .. prompt + count - 1. */
export function greedySteps(promptLength: number, count: number): number[] {
  return Array.from({ length: Math.max(0, count - 1) }, (_, i) => promptLength + 1 + i);
}

/** Mean and median of the agreement lengths. */
export function agreementSummary(lengths: readonly number[]): { mean: number; median: number } {
  const sorted = [...lengths].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = lengths.reduce((a, b) => a + b, 0) / n;
  const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return { mean, median };
}
