/**
 * The playground's lesson (a replayed decode step) on the KV cache the page
 * now runs, f16, the CLI's default: the same settings give the same text in
 * both. Runs in Node on a small random model, no browser needed.
 */
import { describe, expect, it } from 'vitest';
import { f16ToF32, Tensor } from '@sparq/core';
import { LanguageModel, buildModel, randomLlama, type AttentionSettings } from '@sparq/llm';
import { lesson, replayH2O } from '../../packages/playground/web/lesson.ts';
import { ProbeEngine } from '../../packages/playground/web/probe.ts';
import { referenceEngine } from '../support/backends.ts';

describe('playground lesson on an f16 KV cache', () => {
  it('replays a SparQ step; with r = d and k >= S it matches dense', async () => {
    const { loaded, tokenizer } = randomLlama({
      dim: 32,
      hiddenDim: 64,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      seqLen: 32,
      seed: 9,
    });
    const probe = new ProbeEngine(referenceEngine, loaded.config.nLayers);
    const model = new LanguageModel(probe, buildModel(probe, loaded), tokenizer);
    expect(model.kv).toBe('f16');
    const d = loaded.config.headDim;
    const session = model.createSession({ contextSize: 16, attention: { method: 'sparq', r: d, k: 32, l: 0 } });
    session.forward.prefillAllRows = true; // as the playground's worker: every prompt row's query in every layer
    await session.generate([tokenizer.bosId, 5, 6], { maxTokens: 8, temperature: 0 }).collect();
    expect(session.forward.caches[0].options.dtype).toBe('f16');
    const position = session.position - 1;
    const input = {
      engine: referenceEngine,
      caches: session.forward.caches,
      records: probe.records,
      nHeads: loaded.config.nHeads,
      position,
      layer: 1,
      head: 1,
    };
    const full = lesson({ ...input, attention: session.attention });
    expect(full.S).toBe(position + 1);
    expect(full.errReallocate).toBeLessThan(1e-6);
    expect(full.errPlain).toBeLessThan(1e-6);
    const sparse = lesson({ ...input, attention: { ...session.attention, r: 2, k: 4, l: 1 } });
    expect(sparse.sparq).toHaveLength(4);
    expect(Number.isFinite(sparse.errReallocate)).toBe(true);
  });

  // A small GQA model on the playground's settings: every prompt row forwarded in every layer.
  const setup = (attention: AttentionSettings) => {
    const { loaded, tokenizer } = randomLlama({
      dim: 32,
      hiddenDim: 64,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      seqLen: 32,
      seed: 9,
    });
    const probe = new ProbeEngine(referenceEngine, loaded.config.nLayers);
    const model = new LanguageModel(probe, buildModel(probe, loaded), tokenizer);
    const run = async (maxTokens: number) => {
      probe.clear();
      const session = model.createSession({ contextSize: 24, attention });
      session.forward.prefillAllRows = true;
      await session.generate([tokenizer.bosId, 5, 6, 7, 8], { maxTokens, temperature: 0 }).collect();
      const input = {
        engine: referenceEngine,
        caches: session.forward.caches,
        records: probe.records.map((m) => new Map(m)),
        nHeads: 4,
        attention: session.attention,
      };
      return { session, input };
    };
    return { run, d: loaded.config.headDim };
  };

  it('scores every position from the decoded f16 keys: sum_j s_j v_j is the dense output', async () => {
    const { run, d } = setup({ method: 'sparq', r: 2, k: 4, l: 1 });
    const { session, input } = await run(6);
    const position = session.position - 1;
    for (const layer of [0, 1]) {
      for (const head of [0, 1]) {
        const a = lesson({ ...input, position, layer, head });
        // Dense attention over the same cache and query, from the op itself (g = 2 heads per KV head).
        const cache = session.forward.caches[layer];
        const out = Tensor.zeros('f32', [1, 4, d]);
        const q = Tensor.wrap('f32', input.records[layer].get(position)!.q, [1, 4, d]);
        const nPast = cache.nPast[0];
        cache.nPast[0] = position + 1;
        referenceEngine.attentionDecode(out, q, cache);
        cache.nPast[0] = nPast;
        for (let i = 0; i < d; i++) {
          let mixed = 0; // sum_j s_j v_j: s is the group's mean weight, so this is the group's mean output
          for (let j = 0; j <= position; j++)
            mixed += a.s[j] * f16ToF32(cache.v[cache.vRowOffset(0, head, j) + i] as number);
          const mean = (out.data[2 * head * d + i] + out.data[(2 * head + 1) * d + i]) / 2;
          expect(Math.abs(mixed - mean)).toBeLessThan(1e-5);
        }
      }
    }
  });

  it('replays a step as it ran: the same lesson from a run that stopped there and from a longer one', async () => {
    const { run } = setup({ method: 'sparq', r: 2, k: 4, l: 1 });
    const short = await run(4);
    const position = short.session.position - 1;
    const long = await run(10);
    expect(long.session.history.slice(0, position + 1)).toEqual(short.session.history.slice(0, position + 1));
    for (const layer of [0, 1]) {
      const a = lesson({ ...short.input, position, layer, head: 1 });
      const b = lesson({ ...long.input, position, layer, head: 1 });
      // K transposed's block scales as they stood at the step, not at the end of the longer run.
      expect(b.sHat).toEqual(a.sHat);
      expect(b.sparq).toEqual(a.sparq);
      expect(b.s).toEqual(a.s);
      expect(b.errReallocate).toBe(a.errReallocate);
    }
  });

  it('inspects a prompt position in the last layer', async () => {
    const { run } = setup({ method: 'sparq', r: 2, k: 4, l: 1 });
    const { input } = await run(4);
    const a = lesson({ ...input, position: 2, layer: 1, head: 0 });
    expect(a.S).toBe(3);
    expect(a.kept.h2o).toEqual([0, 1, 2]); // H2O evicts nothing before generation
  });

  it("replays H2O from the prompt's seeded scores to the state the run ended with", async () => {
    const k = 3;
    const { run } = setup({ method: 'h2o', k });
    const { session, input } = await run(8);
    const position = session.position - 1;
    for (const layer of [0, 1]) {
      const replay = replayH2O({ ...input, position, layer, head: 0 }, k);
      const state = session.forward.h2o[layer]!;
      expect(Array.from(replay.state.evicted)).toEqual(Array.from(state.evicted));
      expect(Array.from(replay.state.acc)).toEqual(Array.from(state.acc));
      expect(replay.kept.length).toBeLessThanOrEqual(k);
    }
  });
});
