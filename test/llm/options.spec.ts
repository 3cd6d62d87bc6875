/**
 * One vocabulary of options, checked at every entry point as the CLI checks
 * its flags: a mistyped value or key is an error naming it (never a quiet
 * INT4 model), the older names still work and agree with the newer, and Chat
 * runs on the text session: one generation loop, a failed turn leaves the
 * conversation as it was.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SparqError, type Engine } from '@sparq/core';
import {
  Chat,
  ChatTemplate,
  LanguageModel,
  Sampler,
  Session,
  TextSession,
  WEIGHT_TYPES,
  buildModel,
  defaultAttention,
  openModel,
  randomLlama,
  writeRandomGGUF,
  type AttentionConfig,
} from '@sparq/llm';
import { checkKv, parseKvFlag } from '@sparq/llm/options';
import { loadModel } from 'sparq';
import { afterAll, describe, expect, it } from 'vitest';
import { referenceEngine } from '../support/backends.ts';
import { runSparq } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const small = randomLlama({ dim: 32, hiddenDim: 64, nLayers: 1, nHeads: 4, nKvHeads: 2, seqLen: 64, seed: 11 });
const path = writeRandomGGUF(referenceEngine, small, 'f32', join(dir, 'small.gguf'));
const model = buildModel(referenceEngine, small.loaded);
const DENSE: AttentionConfig = defaultAttention('dense', small.loaded.config.headDim, 64);

describe('model options are checked before loading, as the CLI checks its flags', () => {
  it("weights 'q8_0', 'f16' or 'Q4_0' is an error listing the choices, in the CLI's words", async () => {
    for (const bad of ['q8_0', 'f16', 'Q4_0']) {
      await expect(loadModel(path, { weights: bad as never, backend: 'reference' })).rejects.toThrow(
        `loadModel: weights ${bad}, expected one of ${WEIGHT_TYPES.join(', ')}`,
      );
      expect(() => openModel(referenceEngine, path, { weights: bad as never })).toThrow(
        `openModel: weights ${bad}, expected one of`,
      );
      expect(runSparq('generate', '--model', path, '--weights', bad).stderr).toContain(
        `--weights ${bad}, expected one of ${WEIGHT_TYPES.join(', ')}`,
      );
    }
    const q4 = await loadModel(path, { weights: 'q4_0', backend: 'reference' });
    expect(q4.weightType).toContain('q4_0');
  });

  it('an unknown key, a KV type, layout or product path outside its choices, and attention the method does not read', async () => {
    await expect(loadModel(path, { kvDtype: 'f32' } as never)).rejects.toThrow(
      "loadModel: unknown option 'kvDtype', expected one of tokenizer, weights, kv, kt, kvLayout, attention, productPath, fallback, checkTensors, contextSize, backend",
    );
    expect(() => openModel(referenceEngine, path, { kv: 'q8' as never })).toThrow(
      'openModel: kv q8, expected one of f32, f16, q8_0, q4_0',
    );
    expect(() => openModel(referenceEngine, path, { kvLayout: 'twice' as never })).toThrow(
      'openModel: kvLayout twice, expected one of k-twice, single-k',
    );
    expect(() => openModel(referenceEngine, path, { productPath: 'int4' as never })).toThrow(
      'openModel: productPath int4, expected one of dequant, int8',
    );
    expect(() => openModel(referenceEngine, path, { attention: { method: 'dense', r: 3 } })).toThrow(
      'openModel: attention.r 3: attention dense does not read it (only sparq does)',
    );
    expect(() => openModel(referenceEngine, path, { attention: { method: 'sparq', topk: 3 } as never })).toThrow(
      'openModel: attention.topk: unknown attention setting',
    );
  });

  it('kv is one type or { k, v }: each side checked and named, one type when they agree; the CLI spells it K/V', () => {
    expect(checkKv('kv', 'q8_0')).toBe('q8_0');
    expect(checkKv('kv', { k: 'q8_0', v: 'q4_0' })).toEqual({ k: 'q8_0', v: 'q4_0' });
    expect(checkKv('kv', { k: 'f16', v: 'f16' })).toBe('f16');
    expect(parseKvFlag('--kv', 'q8_0/q4_0')).toEqual({ k: 'q8_0', v: 'q4_0' });
    expect(parseKvFlag('--kv', 'f32')).toBe('f32');
    expect(parseKvFlag('--kv', 'q4_0/q4_0')).toBe('q4_0');
    expect(() => checkKv('kv', { k: 'q8_0', v: 'q5' })).toThrow(
      'kv.v q5, expected one of f32, f16, q8_0, q4_0, or { k, v } of them',
    );
    expect(() => checkKv('kv', { k: 'q8_0' })).toThrow(
      'kv {"k":"q8_0"}, expected one of f32, f16, q8_0, q4_0, or { k, v } with both fields',
    );
    expect(() => checkKv('kv', { k: 'q8_0', v: 'q4_0', t: 'f16' })).toThrow('or { k, v } with both fields');
    expect(() => checkKv('kv', 'q8_0/q4_0')).toThrow(
      'kv q8_0/q4_0, expected one of f32, f16, q8_0, q4_0, or { k, v } of them',
    );
    expect(() => parseKvFlag('--kv', 'q8_0/q5')).toThrow(
      '--kv q8_0/q5: the V type q5, expected one of f32, f16, q8_0, q4_0',
    );
    expect(() => parseKvFlag('--kv', 'q8/q4_0')).toThrow('--kv q8/q4_0: the K type q8, expected one of');
    expect(() => parseKvFlag('--kv', 'f16/f16/f16')).toThrow(
      '--kv f16/f16/f16, expected TYPE or K/V, each of f32, f16, q8_0, q4_0',
    );
    expect(() => parseKvFlag('--kv', 'q5')).toThrow('--kv q5, expected one of f32, f16, q8_0, q4_0, or K/V of them');
    // Every entry point takes it: a model, a session, a text session.
    expect(() => openModel(referenceEngine, path, { kv: { k: 'f16', v: 'q6' as never } })).toThrow(
      'openModel: kv.v q6, expected',
    );
    const lm = openModel(referenceEngine, path, { kv: { k: 'f32', v: 'f16' } });
    const session = lm.createSession({ contextSize: 8 });
    expect([session.forward.caches[0].kDType, session.forward.caches[0].vDType]).toEqual(['f32', 'f16']);
    expect(() => lm.createSession({ contextSize: 8, kv: { k: 'f32' } as never })).toThrow(
      'createSession: kv {"k":"f32"}',
    );
    const t = new TextSession(referenceEngine, model, small.tokenizer, {
      contextSize: 8,
      attention: DENSE,
      kv: { k: 'f16', v: 'f32' },
    });
    expect(t.forward.caches[0].options.dtype).toEqual({ k: 'f16', v: 'f32' });
  });

  it('loadModel checks the native environment as the CLI does (not a quiet fall back to the reference)', async () => {
    const saved = process.env.SPARQ_THREADS;
    process.env.SPARQ_THREADS = '100000';
    try {
      await expect(loadModel(path)).rejects.toThrow('SPARQ_THREADS=100000, expected a decimal integer in [1, 256]');
    } finally {
      if (saved === undefined) delete process.env.SPARQ_THREADS;
      else process.env.SPARQ_THREADS = saved;
    }
  });

  it('createSession and generate check theirs the same way', () => {
    const lm = new LanguageModel(referenceEngine, model, small.tokenizer);
    expect(() => lm.createSession({ kv: 'bf16' as never })).toThrow('createSession: kv bf16, expected one of f32, f16');
    expect(() => lm.createSession({ context: 8 } as never)).toThrow("createSession: unknown option 'context'");
    expect(() => lm.createSession({ prefillChunk: 0 })).toThrow(
      'TextSession: prefillChunk 0, expected an integer >= 1',
    );
    const s = lm.createSession({ contextSize: 16 });
    expect(() => s.generate('a', { top_p: 0.5 } as never)).toThrow("generate: unknown option 'top_p'");
    expect(() => s.generate('a', { topP: NaN })).toThrow('generate: topP NaN, expected a finite number (0..1)');
    expect(() => s.generate('a', { seed: -1n })).toThrow(
      'generate: seed -1, expected an integer in [0, 9007199254740991] (below 2^53)',
    );
  });
});

describe('older names still work, and agree with the newer', () => {
  it('Session: capacity, maxPrefill, kvDType are contextSize, prefillChunk, kv', () => {
    const older = new Session(referenceEngine, model, {
      capacity: 24,
      maxPrefill: 4,
      kvDType: 'f32',
      attention: DENSE,
    });
    const newer = new Session(referenceEngine, model, {
      contextSize: 24,
      prefillChunk: 4,
      kv: 'f32',
      attention: DENSE,
    });
    expect([older.caches[0].capacity, older.state.maxRows, older.caches[0].options.dtype]).toEqual([24, 4, 'f32']);
    expect([newer.caches[0].capacity, newer.state.maxRows, newer.caches[0].options.dtype]).toEqual([24, 4, 'f32']);
    expect(Array.from(older.prefill([1, 40, 41, 42, 43]))).toEqual(Array.from(newer.prefill([1, 40, 41, 42, 43])));
    expect(() => new Session(referenceEngine, model, { contextSize: 24, capacity: 32, attention: DENSE })).toThrow(
      'Session: contextSize 24 and capacity 32 disagree',
    );
    const split = { k: 'f32', v: 'f16' } as const;
    expect(
      new Session(referenceEngine, model, {
        contextSize: 24,
        kv: { ...split },
        kvDType: { ...split },
        attention: DENSE,
      }).caches[0].options.dtype,
    ).toEqual(split);
    expect(
      () =>
        new Session(referenceEngine, model, {
          contextSize: 24,
          kv: split,
          kvDType: { k: 'f16', v: 'f16' },
          attention: DENSE,
        }),
    ).toThrow('Session: kv {"k":"f32","v":"f16"} and kvDType {"k":"f16","v":"f16"} disagree');
    expect(() => new Session(referenceEngine, model, { attention: DENSE })).toThrow(
      'Session: contextSize undefined, expected an integer in [1, 64]',
    );
  });

  it('Sampler and TextSession: topp is topP, kvDType is kv', () => {
    const logits = () => Float32Array.from({ length: 8 }, (_, i) => Math.sin(i));
    const draws = (s: Sampler) => Array.from({ length: 5 }, () => s.sample(logits()));
    expect(draws(new Sampler(8, { temperature: 1, topp: 0.5, seed: 3 }))).toEqual(
      draws(new Sampler(8, { temperature: 1, topP: 0.5, seed: 3 })),
    );
    const t = new TextSession(referenceEngine, model, small.tokenizer, {
      contextSize: 8,
      attention: DENSE,
      kvDType: 'f32',
    });
    expect(t.forward.caches[0].options.dtype).toBe('f32');
  });
});

/** `engine` whose dense prefill throws from call `failAt` on (counting prefill calls). */
function failingPrefill(engine: Engine, failAt: number): Engine {
  let calls = 0;
  return new Proxy(engine, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (key !== 'attentionPrefill' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (calls++ >= failAt) throw new SparqError('injected prefill failure');
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

describe('Chat on the text session', () => {
  const TEMPLATE =
    "{% for m in messages %}{{ m['role'] + ':' + m['content'] + ';' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";

  it('a turn whose prefill fails records no user message and leaves the cache as it was; the next turn runs as if it never happened', () => {
    const layers = small.loaded.config.nLayers;
    // Turn 1's prefill (one call per layer) succeeds, turn 2's first prefill call throws.
    const chat = new Chat(
      failingPrefill(referenceEngine, layers),
      model,
      small.tokenizer,
      new ChatTemplate(TEMPLATE, small.tokenizer),
      { attention: DENSE, contextSize: 64, temperature: 0, maxReplyTokens: 3 },
    );
    const first = chat.send('ab');
    const position = chat.session.pos;
    expect(() => chat.send('cd')).toThrow('injected prefill failure');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(chat.session.pos).toBe(position);

    const clean = new Chat(referenceEngine, model, small.tokenizer, new ChatTemplate(TEMPLATE, small.tokenizer), {
      attention: DENSE,
      contextSize: 64,
      temperature: 0,
      maxReplyTokens: 3,
    });
    expect(clean.send('ab').tokens).toEqual(first.tokens);
    expect(clean.session.pos).toBe(position);
  });

  it('prefills in the session chunk size it is given (no fixed chunk), with the same reply', () => {
    const template = new ChatTemplate(TEMPLATE, small.tokenizer);
    const chunked = new Chat(referenceEngine, model, small.tokenizer, template, {
      attention: DENSE,
      contextSize: 64,
      temperature: 0,
      maxReplyTokens: 4,
      prefillChunk: 3,
    });
    const whole = new Chat(referenceEngine, model, small.tokenizer, template, {
      attention: DENSE,
      contextSize: 64,
      temperature: 0,
      maxReplyTokens: 4,
    });
    expect(chunked.session.state.maxRows).toBe(3);
    const a = chunked.send('abcabc');
    const b = whole.send('abcabc');
    expect(a.tokens).toEqual(b.tokens);
    expect(a.finishReason).toBe(b.finishReason);
    expect(a.stop).toBe(a.finishReason === 'eos' ? 'eog' : a.finishReason);
  });
});
