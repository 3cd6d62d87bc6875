/**
 * The playground's lesson (a replayed decode step) on the KV cache the page
 * now runs, f16, the CLI's default: the same settings give the same text in
 * both. Runs in Node on a small random model, no browser needed.
 */
import { describe, expect, it } from 'vitest';
import { LanguageModel, buildModel, randomLlama } from '@sparq/llm';
import { lesson } from '../../packages/playground/web/lesson.ts';
import { ProbeEngine } from '../../packages/playground/web/probe.ts';
import { referenceEngine } from '../support/backends.ts';

describe('playground lesson on an f16 KV cache', () => {
  it('replays a SparQ step; with r = d and k >= S it matches dense', async () => {
    const { loaded, tokenizer } = randomLlama({ dim: 32, hiddenDim: 64, nLayers: 2, nHeads: 4, nKvHeads: 2, seqLen: 32, seed: 9 });
    const probe = new ProbeEngine(referenceEngine, loaded.config.nLayers);
    const model = new LanguageModel(probe, buildModel(probe, loaded), tokenizer);
    expect(model.kv).toBe('f16');
    const d = loaded.config.headDim;
    const session = model.createSession({ contextSize: 16, attention: { method: 'sparq', r: d, k: 32, l: 0 } });
    await session.generate([tokenizer.bosId, 5, 6], { maxTokens: 8, temperature: 0 }).collect();
    expect(session.forward.caches[0].dtype).toBe('f16');
    const position = session.position - 1;
    const input = { engine: referenceEngine, caches: session.forward.caches, records: probe.records, nHeads: loaded.config.nHeads, position, layer: 1, head: 1 };
    const full = lesson({ ...input, attention: session.attention });
    expect(full.S).toBe(position + 1);
    expect(full.errReallocate).toBeLessThan(1e-6);
    expect(full.errPlain).toBeLessThan(1e-6);
    const sparse = lesson({ ...input, attention: { ...session.attention, r: 2, k: 4, l: 1 } });
    expect(sparse.sparq).toHaveLength(4);
    expect(Number.isFinite(sparse.errReallocate)).toBe(true);
  });
});
