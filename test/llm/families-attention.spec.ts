/**
 * SparQ and every baseline on each family (GQA, head dim 64 and 128, biases,
 * q/k norms, RoPE scaling): with a budget covering the whole context each
 * method attends to every position, so its logits are dense's up to summation
 * order; with a small budget it reads less than dense and its logits stay finite.
 */
import { Session, buildModel, defaultAttention, readModelFile, type AttentionConfig, type Model } from '@sparq/llm';
import type { Engine } from '@sparq/core';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';
import { LLAMA_FAMILY, writeFamilyModel, type FamilySpec } from './family-fixture.ts';

const PROMPT = [1, 300, 301, 302, 303, 260, 261, 262];
const STEPS = 24;
/**
 * With every position attended, the methods differ from dense only in summation order (a gathered
 * copy of K and V, SparQ's mean-value interpolation with weight 1): each attention output within
 * head_dim x context U of dense, which through the remaining products stays far below 1e-4 of the logits.
 */
const FULL_BUDGET_REL = 1e-4;

const base = LLAMA_FAMILY;
const FAMILIES: FamilySpec[] = [
  base,
  {
    ...base,
    name: 'llama 3 (head dim 128, rope_freqs)',
    nHeads: 2,
    nKvHeads: 1,
    ropeTheta: 500000,
    llama3: { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 64 },
    tied: false,
  },
  {
    ...base,
    name: 'qwen2 (biases, yarn)',
    arch: 'qwen2',
    attnBias: true,
    ropeTheta: 1e6,
    ropeScaling: { type: 'yarn', factor: 4, originalContext: 64, attnFactor: 1 },
  },
  { ...base, name: 'qwen3 (head dim 128, q/k norms)', arch: 'qwen3', headDim: 128, ropeTheta: 1e6 },
];

/** Teacher-forced logits of a fixed token stream, and the session's costs. */
function run(engine: Engine, model: Model, attention: AttentionConfig): { logits: Float32Array[]; session: Session } {
  const session = new Session(engine, model, { capacity: PROMPT.length + STEPS, maxPrefill: PROMPT.length, attention });
  const logits = [Float32Array.from(session.prefill(PROMPT))];
  for (let s = 0; s < STEPS; s++) logits.push(Float32Array.from(session.decode(300 + (s % 20))));
  return { logits, session };
}

forEachBackend('SparQ and baselines on each family', (engine) => {
  for (const spec of FAMILIES) {
    it(`${spec.name}: every method equals dense with a full budget, reads less with a small one`, () => {
      const path = writeFamilyModel(engine, spec);
      const model = buildModel(engine, readModelFile(path, engine).loaded);
      rmSync(dirname(path), { recursive: true });
      const d = model.config.headDim;
      const context = PROMPT.length + STEPS;
      const dense = run(engine, model, defaultAttention('dense', d, context));
      const full: AttentionConfig[] = [
        { method: 'sparq', r: d / 4, k: context, l: 4, reallocate: true },
        { method: 'oracle', r: d, k: context, l: 0, reallocate: true },
        { method: 'h2o', r: d, k: context, l: 0, reallocate: true },
        { method: 'lminf', r: d, k: context, l: 0, reallocate: true },
      ];
      for (const a of full) {
        const got = run(engine, model, a).logits;
        got.forEach((row, s) => {
          const scale = Math.max(...dense.logits[s].map(Math.abs));
          const delta = Math.max(...row.map((v, i) => Math.abs(v - dense.logits[s][i])));
          expect(delta, `${a.method} step ${s}`).toBeLessThanOrEqual(FULL_BUDGET_REL * scale);
        });
      }
      for (const method of ['sparq', 'oracle', 'h2o', 'lminf'] as const) {
        const small = run(engine, model, { ...defaultAttention(method, d, context), k: 8, l: 2 });
        expect(
          small.logits.every((row) => row.every(Number.isFinite)),
          method,
        ).toBe(true);
        if (method !== 'oracle') expect(small.session.methodCost, method).toBeLessThan(dense.session.methodCost);
      }
    });
  }
});
