/**
 * Perplexity by issue 14's protocol, over the tokens of corpus.ts:
 *   - non-overlapping windows of `window` (512) input positions, positions
 *     restarting at 0; window i reads tokens [512i, 512i + 512) and position p
 *     of it is scored on the next token of the whole text, so every token but
 *     the first is a target once;
 *   - dense: one batched prefill per window, every position scored;
 *   - a method: the window's first `warmup` (64) positions prefilled densely
 *     and not scored, each later position fed by a decode step with the
 *     method's attention and scored on its target (teacher forcing).
 * Runs give a per-position NLL array (index = global input position, NaN when
 * not scored), so a method is compared with dense on the same positions.
 */
import { SparqRangeError } from '@sparq/core';
import { defaultAttention, type AttentionConfig } from '../attention-method.ts';
import { AllLogits, tokenNll } from './nll.ts';
import { evalSession, type EvalModel } from './run-model.ts';

export interface PerplexityProtocol {
  /** Input positions per window (512). */
  window: number;
  /** Positions of a method run prefilled densely and not scored (64). */
  warmup: number;
  /** Windows to run, from the first; default all. */
  windows?: number;
}

export const PERPLEXITY_PROTOCOL: PerplexityProtocol = { window: 512, warmup: 64 };

/** Progress: windows done of total. */
export type OnWindow = (done: number, total: number) => void;

/** [start, length) of each window run. */
export function windowsOf(tokenCount: number, p: PerplexityProtocol): { start: number; n: number }[] {
  if (!Number.isInteger(p.window) || p.window < 1)
    throw new SparqRangeError(`perplexity: window ${p.window}, expected an integer >= 1`);
  if (!Number.isInteger(p.warmup) || p.warmup < 1 || p.warmup >= p.window)
    throw new SparqRangeError(`perplexity: warmup ${p.warmup}, expected an integer in [1, ${p.window - 1}]`);
  const out: { start: number; n: number }[] = [];
  for (let start = 0; start < tokenCount && (p.windows === undefined || out.length < p.windows); start += p.window) {
    out.push({ start, n: Math.min(p.window, tokenCount - start) });
  }
  return out;
}

/** Valid positions S of every scored decode step of a method run (S = window position + 1). */
export function scoredSteps(tokenCount: number, p: PerplexityProtocol): number[] {
  const steps: number[] = [];
  for (const { start, n } of windowsOf(tokenCount, p)) {
    for (let pos = p.warmup; pos < n && start + pos + 1 < tokenCount; pos++) steps.push(pos + 1);
  }
  return steps;
}

/** Dense NLL of every input position (batched prefill per window). */
export function denseNll(
  m: EvalModel,
  tokens: readonly number[],
  p: PerplexityProtocol,
  onWindow?: OnWindow,
): Float64Array {
  const vocab = m.model.config.vocabSize;
  const nll = new Float64Array(tokens.length).fill(Number.NaN);
  const session = evalSession(m, defaultAttention('dense', m.model.config.headDim, p.window), p.window);
  const all = new AllLogits(session);
  const windows = windowsOf(tokens.length, p);
  windows.forEach(({ start, n }, i) => {
    session.reset();
    const logits = all.prefill(tokens.slice(start, start + n)); // (n, vocab)
    for (let pos = 0; pos < n && start + pos + 1 < tokens.length; pos++)
      nll[start + pos] = tokenNll(logits, pos * vocab, vocab, tokens[start + pos + 1]);
    onWindow?.(i + 1, windows.length);
  });
  return nll;
}

export interface MethodRun {
  nll: Float64Array;
  /** Elements the decode kernels counted over spec.md §3's dense elements, over the run's decode steps. */
  countedRatio: number;
  /** The same in bytes of the cache's types (AttentionStats.totalBytes over Session.denseBytes). */
  countedBytesRatio: number;
}

/** NLL of the positions a method run scores (warmup prefilled densely, then teacher-forced decode steps). */
export function methodNll(
  m: EvalModel,
  tokens: readonly number[],
  attention: AttentionConfig,
  p: PerplexityProtocol,
  onWindow?: OnWindow,
): MethodRun {
  const vocab = m.model.config.vocabSize;
  const nll = new Float64Array(tokens.length).fill(Number.NaN);
  const session = evalSession(m, attention, p.window);
  const windows = windowsOf(tokens.length, p);
  windows.forEach(({ start, n }, i) => {
    session.reset();
    if (n > p.warmup) {
      session.prefill(tokens.slice(start, start + p.warmup));
      for (let pos = p.warmup; pos < n; pos++) {
        const logits = session.decode(tokens[start + pos]);
        if (start + pos + 1 < tokens.length) nll[start + pos] = tokenNll(logits, 0, vocab, tokens[start + pos + 1]);
      }
    }
    onWindow?.(i + 1, windows.length);
  });
  return {
    nll,
    countedRatio: session.denseCost > 0 ? session.stats.total / session.denseCost : 1,
    countedBytesRatio: session.denseBytes > 0 ? session.stats.totalBytes / session.denseBytes : 1,
  };
}

export interface NllSummary {
  /** Mean NLL (nats per token) and its exp over the positions scored. */
  nll: number;
  ppl: number;
  targets: number;
  /** Dense on the same positions. */
  denseNll: number;
  densePpl: number;
}

/** Means of `scored` (NaN = not scored) and of `dense` over the same positions, in f64. */
export function summarize(scored: Float64Array, dense: Float64Array): NllSummary {
  let sum = 0;
  let denseSum = 0;
  let targets = 0;
  for (let i = 0; i < scored.length; i++) {
    if (Number.isNaN(scored[i])) continue;
    sum += scored[i];
    denseSum += dense[i];
    targets++;
  }
  const nll = targets > 0 ? sum / targets : Number.NaN;
  const denseMean = targets > 0 ? denseSum / targets : Number.NaN;
  return { nll, ppl: Math.exp(nll), targets, denseNll: denseMean, densePpl: Math.exp(denseMean) };
}
