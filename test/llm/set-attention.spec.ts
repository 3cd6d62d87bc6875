/**
 * Session.setAttention: after one dense prefill, decode switches method over
 * the same caches (what `sparq bench` times). A session switched to SparQ must
 * decode as a session created for SparQ does, and differ from dense decode.
 */
import { describe, expect, it } from 'vitest';
import { Session, buildModel, randomLlama, type AttentionConfig } from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';

const S = 48;
/** SparQ with a small budget (k of 48 positions): its output differs from dense. */
const SPARQ: AttentionConfig = { method: 'sparq', r: 8, k: 8, l: 2, reallocate: true };
const DENSE: AttentionConfig = { method: 'dense', r: 0, k: 0, l: 0, reallocate: false };
/**
 * The two sessions' caches differ in layout only (K twice or once, K transposed in f16 like the
 * rows); SparQ's step 1 reads the same values from either, so the logits agree (measured:
 * identical; the bound allows a reordered f32 sum).
 */
const LAYOUT_TOL = 1e-4;

const { loaded } = randomLlama({ dim: 256, hiddenDim: 256, nLayers: 1, nHeads: 2, nKvHeads: 2, seqLen: 64 });
const model = buildModel(referenceEngine, loaded);
const prompt = Array.from({ length: S }, (_, i) => 3 + ((i * 37) % 250));

function decodeAfterPrefill(created: AttentionConfig, switchTo: AttentionConfig | null): Float32Array {
  const session = new Session(referenceEngine, model, {
    capacity: S + 1,
    maxPrefill: S,
    attention: created,
    kvDType: 'f16',
    kt: 'f16',
  });
  session.prefill(prompt);
  if (switchTo) session.setAttention(switchTo);
  return session.decode(5).slice();
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

describe('Session.setAttention', () => {
  it('decodes with the new method over the same caches', () => {
    const switched = decodeAfterPrefill(DENSE, SPARQ);
    const sparq = decodeAfterPrefill(SPARQ, null);
    const dense = decodeAfterPrefill(DENSE, null);
    expect(maxDiff(switched, sparq)).toBeLessThan(LAYOUT_TOL);
    expect(maxDiff(switched, dense)).toBeGreaterThan(100 * LAYOUT_TOL);
    expect(maxDiff(decodeAfterPrefill(SPARQ, DENSE), dense)).toBeLessThan(LAYOUT_TOL);
  });
  it('refuses H2O on a session created without its score state', () => {
    const session = new Session(referenceEngine, model, { capacity: 8, maxPrefill: 8, attention: DENSE });
    expect(() => session.setAttention({ method: 'h2o', r: 0, k: 4, l: 0, reallocate: false })).toThrow(
      "h2o needs its score state; create the session with method 'h2o'",
    );
  });
});
