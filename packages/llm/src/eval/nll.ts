/**
 * Negative log-likelihood of a target token under one row of logits, and the
 * logits of every row of a batched prefill (the forward pass keeps only the
 * last row's; perplexity scores them all).
 */
import { SparqRangeError, Tensor } from '@sparq/core';
import type { Session } from '../forward.ts';
import { linear } from '../linear.ts';
import { DEFAULT_PRODUCT_PATH } from '../options.ts';

/**
 * -log softmax(logits[at .. at + vocab))[target], in f64:
 * logsumexp(z) - z[target], with the maximum subtracted first so exp never overflows.
 */
export function tokenNll(logits: Float32Array, at: number, vocab: number, target: number): number {
  let max = -Infinity;
  for (let i = 0; i < vocab; i++) max = Math.max(max, logits[at + i]);
  let sum = 0;
  for (let i = 0; i < vocab; i++) sum += Math.exp(logits[at + i] - max);
  return Math.log(sum) + max - logits[at + target];
}

/**
 * Reusable buffers for `allLogits` over up to `maxRows` rows:
 *   normed (maxRows, dim), logits (maxRows, vocab_size).
 */
export class AllLogits {
  readonly normed: Float32Array;
  readonly logits: Float32Array;
  readonly maxRows: number;
  private readonly session: Session;

  constructor(session: Session) {
    const { dim, vocabSize } = session.model.config;
    this.session = session;
    this.maxRows = session.state.maxRows;
    this.normed = new Float32Array(this.maxRows * dim);
    this.logits = new Float32Array(this.maxRows * vocabSize);
  }

  /**
   * Prefills `tokens` in one forward call (so the RunState holds every row's
   * final residual stream), then applies the final norm and the classifier to
   * all rows: logits (n, vocab_size), row i predicting the token after tokens[i].
   */
  prefill(tokens: readonly number[]): Float32Array {
    const n = tokens.length;
    if (n < 1 || n > this.maxRows)
      throw new SparqRangeError(
        `AllLogits.prefill: ${n} tokens, expected 1..${this.maxRows} (one prefill call, the session's maxPrefill)`,
      );
    const s = this.session;
    const { dim, vocabSize, normEps } = s.model.config;
    const w = s.model.weights;
    s.prefill(tokens, { allRows: true });
    // The residual stream of every row, as the last layer left it: (n, dim).
    const x = s.state.rows(n).x;
    const normed = new Tensor('f32', this.normed, [n, dim]);
    s.engine.rmsnorm(normed, x, w.finalNorm, normEps);
    const out = new Tensor('f32', this.logits, [n, vocabSize]);
    linear(s.engine, out, w.classifier, normed, s.options.productPath ?? DEFAULT_PRODUCT_PATH);
    return this.logits;
  }
}
