/**
 * End to end on stories260K, per backend: the greedy 200 text byte for byte
 * (llama2.c's own test), batched prefill agreeing with it, SparQ and the
 * baselines with a budget covering the whole context equal to dense, and
 * SparQ's default budget reading fewer elements than dense.
 */
import { describe, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';
import { expectedText, greedy, lacking, stories, storiesMissing, GENERATE_OPS } from './support.ts';
import { generate, defaultAttention } from '@sparq/llm';

const describeStories = storiesMissing ? describe.skip : describe;

describeStories(`stories260K generation${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  forEachBackend('greedy text', (engine) => {
    const skip = lacking(engine, [...GENERATE_OPS, 'sparqDecode', 'topkDecode', 'h2oDecode', 'lmInfiniteDecode']);
    const test = skip ? it.skip : it;
    const suffix = skip ? ` (skipped: ${skip})` : '';
    const setup = () => stories(engine);

    test(`prints llama2.c's greedy 200 text byte for byte${suffix}`, () => {
      const { model, tokenizer } = setup();
      const r = greedy(engine, model, tokenizer);
      expect(Buffer.from(r.text).toString('utf8')).toBe(expectedText());
      // run.c's -n 200: positions 0..199 forwarded, 200 tokens sampled after BOS.
      expect(r.tokens.length).toBe(201);
      expect(r.session.pos).toBe(200);
      expect(r.session.decodeSteps).toBe(199);
    });

    test(`continues a batched-prefill prompt exactly as greedy decoding did${suffix}`, () => {
      const { model, tokenizer } = setup();
      const prompt = 'Once upon a time, there was a little girl named Lily.';
      const r = generate(engine, model, tokenizer, prompt, {
        steps: 200,
        temperature: 0,
        topp: 0.9,
        seed: 1,
        attention: defaultAttention('dense', 8, 200),
      });
      expect(r.promptTokens).toBeGreaterThan(10);
      expect(Buffer.from(r.text).toString('utf8')).toBe(expectedText());
    });

    test(`SparQ with r = head dim and k >= context, and the baselines with k >= context, equal dense${suffix}`, () => {
      const { model, tokenizer } = setup();
      const dense = greedy(engine, model, tokenizer).tokens;
      const full = [
        { method: 'sparq', r: 8, k: 200, l: 0, reallocate: true },
        { method: 'sparq', r: 8, k: 256, l: 16, reallocate: false },
        { method: 'oracle', k: 200 },
        { method: 'h2o', k: 200 },
        { method: 'lminf', k: 200 },
      ] as const;
      for (const a of full) expect(greedy(engine, model, tokenizer, a).tokens, JSON.stringify(a)).toEqual(dense);
    });

    test(`KV defaults to f16 in the method's layout (SparQ k-twice, else single-k); f32 and single-k on request${suffix}`, () => {
      const { model, tokenizer } = setup();
      const run = (method: 'dense' | 'sparq', extra: { kvDType?: 'f32'; kvLayout?: 'single-k' } = {}) =>
        generate(engine, model, tokenizer, '', {
          steps: 24,
          temperature: 0,
          topp: 0.9,
          seed: 1,
          attention: defaultAttention(method, 8, 24),
          ...extra,
        }).session;
      const cache = (s: ReturnType<typeof run>) => [
        s.caches[0].options.dtype,
        s.caches[0].layout,
        s.caches[0].kT === null,
      ];
      expect(cache(run('dense'))).toEqual(['f16', 'single-k', true]);
      expect(cache(run('sparq'))).toEqual(['f16', 'k-twice', false]);
      expect(cache(run('sparq', { kvDType: 'f32', kvLayout: 'single-k' }))).toEqual(['f32', 'single-k', true]);
    });

    test(`SparQ's default budget reads less than dense, as counted by the kernels${suffix}`, () => {
      const { model, tokenizer } = setup();
      const dense = greedy(engine, model, tokenizer).session;
      const sparq = greedy(engine, model, tokenizer, { method: 'sparq' }).session;
      expect(sparq.denseCost).toBe(dense.methodCost);
      expect(sparq.methodCost / sparq.denseCost).toBeLessThan(0.75);
      expect(sparq.stats.total).toBeLessThan(dense.stats.total);
      expect(dense.stats.calls).toBe(199 * 5);
    });

    test(`samples reproducibly from a seed${suffix}`, () => {
      const { model, tokenizer } = setup();
      const run = (seed: number) =>
        generate(engine, model, tokenizer, 'Lily', {
          steps: 64,
          temperature: 1,
          topp: 0.9,
          seed,
          attention: defaultAttention('dense', 8, 64),
        }).tokens;
      expect(run(42)).toEqual(run(42));
      expect(run(42)).not.toEqual(run(43));
    });
  });
});
