/**
 * Session.decodeBatch: the decode steps of several sessions as one forward pass (the batch as rows
 * of the weight products) give each session exactly the greedy tokens it gets decoding alone, on
 * every backend; sessions join and leave the batch between steps (batch sizes 1..8); a failing row
 * rolls every session back; Session.truncate keeps a prefix as if the rest had never been appended.
 */
import { KVCache, type Engine } from '@sparq/core';
import {
  BatchState,
  RunState,
  Session,
  argmax,
  buildModel,
  defaultAttention,
  defaultKVLayout,
  randomLlama,
  type AttentionConfig,
  type Model,
} from '@sparq/llm';
import { describe, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';
import { lacking, stories, storiesMissing, GENERATE_OPS } from './support.ts';

const CAPACITY = 96;
const STEPS = 40;

/** Prompts of different lengths (token ids), one per sequence. */
function prompts(vocab: number, count: number): number[][] {
  return Array.from({ length: count }, (_, s) => [
    1,
    ...Array.from({ length: 3 + 2 * s }, (_, i) => 3 + ((s * 37 + i * 11) % (vocab - 3))),
  ]);
}

/** Greedy tokens of one session decoding alone. */
function alone(engine: Engine, model: Model, prompt: number[], attention: AttentionConfig): number[] {
  const s = new Session(engine, model, { capacity: CAPACITY, maxPrefill: 16, attention });
  let logits = s.prefill(prompt);
  const out: number[] = [];
  for (let i = 0; i < STEPS; i++) {
    out.push(argmax(logits));
    if (i < STEPS - 1) logits = s.decode(out[i]);
  }
  return out;
}

/**
 * The same sequences as slots of one batch-8 cache: slot s starts after `start(s)` batch steps and
 * every live slot decodes in one decodeBatch call per step, so the batch grows to 8 and shrinks.
 */
function batched(engine: Engine, model: Model, all: number[][], attention: AttentionConfig): number[][] {
  const c = model.config;
  const n = all.length;
  const state = new RunState(c, 16);
  const batch = new BatchState(state);
  const big = Array.from(
    { length: c.nLayers },
    () =>
      new KVCache({
        nKvHeads: c.nKvHeads,
        headDim: c.headDim,
        capacity: CAPACITY,
        batch: n,
        dtype: 'f16',
        layout: defaultKVLayout(attention.method),
      }),
  );
  const sessions = all.map(
    (_, s) =>
      new Session(engine, model, {
        capacity: CAPACITY,
        maxPrefill: 16,
        attention,
        state,
        caches: big.map((cache) => cache.view(s, 0, c.nKvHeads)),
      }),
  );
  const out: number[][] = all.map(() => []);
  const logits: (Float32Array | null)[] = all.map(() => null);
  const start = (s: number) => (s * 3) % 7;
  for (let step = 0; out.some((o) => o.length < STEPS); step++) {
    // Newcomers prefill (alone, as a server interleaves them) and sample their first token.
    all.forEach((p, s) => {
      if (start(s) === step) logits[s] = sessions[s].prefill(p).slice();
    });
    const live = all.map((_, s) => s).filter((s) => logits[s] !== null && out[s].length < STEPS);
    for (const s of live) out[s].push(argmax(logits[s]!));
    const next = live.filter((s) => out[s].length < STEPS);
    if (next.length === 0) continue;
    const rows = Session.decodeBatch(
      next.map((s) => sessions[s]),
      next.map((s) => out[s][out[s].length - 1]),
      batch,
    );
    next.forEach((s, i) => (logits[s] = rows[i].slice()));
  }
  return out;
}

function checks(engine: Engine, model: Model, title: string, attention: AttentionConfig) {
  it(`${title}: 8 sequences decoded as one batch get each the greedy tokens they get alone`, () => {
    const all = prompts(model.config.vocabSize, 8);
    const expected = all.map((p) => alone(engine, model, p, attention));
    expect(batched(engine, model, all, attention)).toEqual(expected);
  });
}

forEachBackend('Session.decodeBatch', (engine) => {
  const skip = lacking(engine, [...GENERATE_OPS, 'sparqDecode']);
  const test = skip ? describe.skip : describe;
  test(`random GQA model${skip ? ` (skipped: ${skip})` : ''}`, () => {
    const { loaded } = randomLlama({
      dim: 64,
      hiddenDim: 128,
      nHeads: 4,
      nKvHeads: 2,
      nLayers: 2,
      seqLen: CAPACITY,
      extraTokens: 61,
      margin: 2,
      seed: 5,
    });
    const f32 = buildModel(engine, loaded);
    checks(engine, f32, 'f32 weights, dense', defaultAttention('dense', f32.config.headDim, CAPACITY));
    checks(engine, f32, 'f32 weights, SparQ', { method: 'sparq', r: 4, k: 8, l: 2, reallocate: true });
    const q4 = buildModel(engine, loaded, 'q4_0');
    checks(engine, q4, 'q4_0 weights (int8 products), dense', defaultAttention('dense', q4.config.headDim, CAPACITY));

    it('a failing row puts every session back; the next step goes on as if it had not run', () => {
      const c = f32.config;
      const state = new RunState(c, 4);
      const batch = new BatchState(state);
      const sessions = [0, 1, 2].map(
        () =>
          new Session(engine, f32, {
            capacity: CAPACITY,
            maxPrefill: 4,
            attention: defaultAttention('dense', c.headDim, CAPACITY),
            state,
          }),
      );
      sessions.forEach((s, i) => s.prefill([1, 5 + i, 9]));
      const before = sessions.map((s) => ({
        pos: s.pos,
        nPast: s.caches.map((cache) => cache.nPast[0]),
        vSum: s.caches[1].vSum.slice(),
      }));
      expect(() => Session.decodeBatch(sessions, [4, c.vocabSize + 3, 6], batch)).toThrow(
        /token .* expected an integer in \[0, /,
      );
      sessions.forEach((s, i) => {
        expect(s.pos).toBe(before[i].pos);
        expect(s.caches.map((cache) => cache.nPast[0])).toEqual(before[i].nPast);
        expect(s.caches[1].vSum).toEqual(before[i].vSum);
      });
      const rows = Session.decodeBatch(sessions, [4, 5, 6], batch).map((r) => r.slice());
      const fresh = new Session(engine, f32, {
        capacity: CAPACITY,
        maxPrefill: 4,
        attention: defaultAttention('dense', c.headDim, CAPACITY),
      });
      fresh.prefill([1, 6, 9]);
      expect(rows[1]).toEqual(fresh.decode(5).slice());
    });

    it('rejects mismatched arguments with the numbers', () => {
      const state = new RunState(f32.config, 2);
      const s = [0, 1, 2].map(
        () =>
          new Session(engine, f32, {
            capacity: 8,
            maxPrefill: 2,
            attention: defaultAttention('dense', f32.config.headDim, 8),
            state,
          }),
      );
      s.forEach((x) => x.prefill([1]));
      expect(() => Session.decodeBatch(s, [3, 4, 5], new BatchState(state))).toThrow(
        '3 rows in all (3 parts), the batch state holds at most 2',
      );
      expect(() => Session.decodeBatch(s.slice(0, 2), [3], new BatchState(state))).toThrow('2 sessions and 1 tokens');
      expect(() => Session.decodeBatch([s[0], s[0]], [3, 3], new BatchState(state))).toThrow('parts[0] and parts[1] are the same session');
    });

    it('truncate keeps a prefix: the V sums and the next logits are those of the prefix alone', () => {
      const attention = defaultAttention('dense', f32.config.headDim, CAPACITY);
      const s = new Session(engine, f32, { capacity: CAPACITY, maxPrefill: 8, attention });
      s.prefill([1, 7, 8, 9, 10]);
      const vSums = s.caches.map((cache) => cache.vSum.slice());
      const first = s.decode(11).slice();
      s.decode(12);
      s.prefill([13, 14, 15]);
      s.truncate(5);
      expect(s.pos).toBe(5);
      expect(s.caches.map((cache) => cache.vSum)).toEqual(vSums);
      expect(s.decode(11)).toEqual(first);
      expect(() => s.truncate(7)).toThrow('length 7, expected an integer in [0, 6]');
    });

    it('truncate over q8_0 and q4_0 rows (decoded by the engine): the V sums and next logits of the prefix alone', () => {
      // Head dim 32: one ggml block per row.
      const { loaded: wide } = randomLlama({
        dim: 128,
        hiddenDim: 128,
        nHeads: 4,
        nKvHeads: 2,
        nLayers: 2,
        seqLen: CAPACITY,
        extraTokens: 61,
        margin: 2,
        seed: 6,
      });
      const model = buildModel(engine, wide);
      for (const kv of ['q8_0', 'q4_0'] as const) {
        const s = new Session(engine, model, {
          capacity: CAPACITY,
          maxPrefill: 8,
          attention: defaultAttention('dense', model.config.headDim, CAPACITY),
          kv,
        });
        s.prefill([1, 7, 8, 9, 10]);
        const vSums = s.caches.map((cache) => cache.vSum.slice());
        const first = s.decode(11).slice();
        s.prefill([12, 13, 14]);
        s.truncate(5);
        expect(s.caches.map((cache) => cache.vSum)).toEqual(vSums);
        expect(s.decode(11)).toEqual(first);
      }
    });
  });
});

describe(`stories260K as a batch${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  forEachBackend('Session.decodeBatch', (engine) => {
    const skip = storiesMissing ?? lacking(engine, GENERATE_OPS);
    (skip ? it.skip : it)('8 sequences decoded as one batch get each the greedy tokens they get alone', () => {
      const { model } = stories(engine);
      const attention = defaultAttention('dense', model.config.headDim, CAPACITY);
      const all = prompts(model.config.vocabSize, 8);
      const expected = all.map((p) => alone(engine, model, p, attention));
      expect(batched(engine, model, all, attention)).toEqual(expected);
    });
  });
});
