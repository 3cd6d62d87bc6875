/**
 * H2O in a session, as its authors' code runs it (issue 25): the dense prefill's attention weights
 * seed the accumulated scores in every layer (chunked or not), and eviction applies from the first
 * decode step, so no decode step attends more than k positions.
 */
import { describe, expect, it } from 'vitest';
import { AttentionStats } from '@sparq/core';
import { Session, buildModel, randomLlama, type AttentionConfig } from '@sparq/llm';
import { engines } from '../support/backends.ts';

const S = 40;
const H2O: AttentionConfig = { method: 'h2o', r: 0, k: 12, l: 3, reallocate: false };
const { loaded } = randomLlama({ dim: 64, hiddenDim: 64, nLayers: 2, nHeads: 4, nKvHeads: 2, seqLen: 64 });
const prompt = Array.from({ length: S }, (_, i) => 3 + ((i * 37) % 250));
/** Sum of S probabilities, each within f32 rounding: the seeds' total is S to this. */
const SUM_TOL = 1e-4;

describe.each(engines.map((e) => [e.name, e] as const))('H2O session (%s)', (_, engine) => {
  const model = buildModel(engine, loaded);

  it('seeds every layer from the prefill: each KV head holds S in all, the same whether the prefill was chunked', () => {
    const whole = new Session(engine, model, { capacity: S + 4, maxPrefill: S, attention: H2O });
    const chunked = new Session(engine, model, { capacity: S + 4, maxPrefill: 7, attention: H2O });
    whole.prefill(prompt);
    chunked.prefill(prompt);
    for (let l = 0; l < 2; l++) {
      for (let kvh = 0; kvh < 2; kvh++) {
        const acc = whole.h2o[l]!.acc.subarray(kvh * (S + 4), kvh * (S + 4) + S);
        const other = chunked.h2o[l]!.acc.subarray(kvh * (S + 4), kvh * (S + 4) + S);
        expect(Math.abs(acc.reduce((a, v) => a + v, 0) - S)).toBeLessThan(SUM_TOL);
        for (let j = 0; j < S; j++) expect(Math.abs(acc[j] - other[j])).toBeLessThan(SUM_TOL);
        // Position 0 is seen by every row: it gathers more than the last position, seen by one.
        expect(acc[0]).toBeGreaterThan(acc[S - 1]);
      }
      expect(whole.h2o[l]!.evicted.every((e) => e === 0)).toBe(true);
    }
  });

  it('attends k positions per KV head from the first decode step on', () => {
    const session = new Session(engine, model, { capacity: S + 4, maxPrefill: S, attention: H2O });
    session.prefill(prompt);
    const d = model.config.headDim;
    for (let step = 0; step < 3; step++) {
      const before = { ...session.stats } as AttentionStats;
      session.decode(5 + step);
      // Per layer and KV head: k rows of K and of V.
      expect(session.stats.kElements - before.kElements).toBe(2 * 2 * H2O.k * d);
      expect(session.stats.vElements - before.vElements).toBe(2 * 2 * H2O.k * d);
    }
    expect(session.h2o[0]!.evicted.reduce((a, e) => a + e, 0)).toBe(2 * (S + 3 - H2O.k));
  });
});
