/**
 * Nothing half-done, nothing silently wrong: a forward call that fails at any
 * op leaves the session exactly as it was (failures injected at every op
 * call of a chunked prefill, of an H2O decode and of a TextSession
 * generate), non-finite activations stop generation naming the step and the
 * first bad layer, and bad weights are named at load or conversion.
 */
import { NonFiniteError, SparqError, SparqRangeError, Tensor, f32ToF16, type Engine } from '@sparq/core';
import {
  Session,
  TextSession,
  buildModel,
  checkTensors,
  ggufTensors,
  randomLlama,
  type AttentionConfig,
  type LoadedModel,
} from '@sparq/llm';
import { describe, expect, it } from 'vitest';
import { referenceEngine } from '../support/backends.ts';

const SMALL = { dim: 64, hiddenDim: 128, nLayers: 2, nHeads: 4, nKvHeads: 2, seqLen: 64 };
const DENSE: AttentionConfig = { method: 'dense', r: 4, k: 8, l: 2, reallocate: true };
const H2O: AttentionConfig = { ...DENSE, method: 'h2o' };

class Injected extends SparqError {
  override name = 'Injected';
}

/**
 * The engine, with a fault: its op calls are counted, and call number `failAt`
 * (0-based, over every op) throws Injected before it runs. Infinity: no fault.
 */
function faulty(engine: Engine, failAt: number): { engine: Engine; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(engine, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function' || typeof key !== 'string' || ['has', 'info'].includes(key)) return value;
      return (...args: unknown[]) => {
        if (calls++ === failAt) throw new Injected(`injected failure in ${key}`);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { engine: proxy, calls: () => calls };
}

/** Everything a forward call may change, copied. */
function snapshot(s: Session) {
  return {
    pos: s.pos,
    nPast: s.caches.map((c) => [...c.nPast]),
    vSum: s.caches.map((c) => [...c.vSum]),
    h2o: s.h2o.map((h) => (h ? [...h.acc, ...h.evicted] : null)),
    counters: [s.decodeSteps, s.methodCost, s.denseCost, s.stats.total, s.stats.calls],
  };
}

const loaded = randomLlama({ ...SMALL, seed: 7 }).loaded;
const model = buildModel(referenceEngine, loaded);
const PROMPT = [1, 40, 41, 42, 43, 44, 45, 46, 47, 48];

/** A session on `engine` with the prompt's first 3 tokens already in it. */
function started(engine: Engine, attention: AttentionConfig): Session {
  const s = new Session(engine, model, { capacity: 32, maxPrefill: 4, attention });
  s.prefill(PROMPT.slice(0, 3));
  return s;
}

describe('forward calls are all or nothing', () => {
  it('a chunked prefill that fails at any op call leaves the session as it was, and then runs as if it never failed', () => {
    const expected = started(referenceEngine, DENSE).prefill(PROMPT.slice(3)).slice();
    const probe = faulty(referenceEngine, Infinity);
    const s0 = started(probe.engine, DENSE);
    const before = probe.calls();
    s0.prefill(PROMPT.slice(3));
    const callsPerPrefill = probe.calls() - before;
    // 7 tokens in chunks of 4: two forward passes, every op of both.
    expect(callsPerPrefill).toBeGreaterThan(40);
    for (let i = 0; i < callsPerPrefill; i++) {
      const s = started(referenceEngine, DENSE);
      const saved = snapshot(s);
      Object.assign(s, { engine: faulty(referenceEngine, i).engine });
      expect(() => s.prefill(PROMPT.slice(3)), `failure at op call ${i}`).toThrow(Injected);
      expect(snapshot(s), `state after a failure at op call ${i}`).toEqual(saved);
      Object.assign(s, { engine: referenceEngine });
      expect(s.prefill(PROMPT.slice(3))).toEqual(expected);
    }
  });

  it('an H2O decode that fails midway restores the cache, the accumulated scores and the counters', () => {
    const clean = started(referenceEngine, H2O);
    const expected = [clean.decode(50).slice(), clean.decode(51).slice()];
    const s = started(referenceEngine, H2O);
    s.decode(50);
    const saved = snapshot(s);
    const probe = faulty(referenceEngine, Infinity);
    const counted = started(probe.engine, H2O);
    const before = probe.calls();
    counted.decode(50);
    const callsPerDecode = probe.calls() - before;
    for (const failAt of [0, Math.floor(callsPerDecode / 2), callsPerDecode - 1]) {
      Object.assign(s, { engine: faulty(referenceEngine, failAt).engine });
      expect(() => s.decode(51)).toThrow(Injected);
      expect(snapshot(s)).toEqual(saved);
    }
    Object.assign(s, { engine: referenceEngine });
    expect(s.decode(51)).toEqual(expected[1]);
  });

  it('TextSession.generate that fails in a later prefill chunk keeps no chunk, and the next call gives what a fresh session gives', async () => {
    const { tokenizer } = randomLlama({ ...SMALL, seed: 7 });
    const options = { contextSize: 32, attention: DENSE, prefillChunk: 3 };
    const fresh = await new TextSession(referenceEngine, model, tokenizer, options)
      .generate(PROMPT, { maxTokens: 4, temperature: 0 })
      .collect();
    const session = new TextSession(referenceEngine, model, tokenizer, options);
    // Fail deep in the third chunk (each chunk's forward makes well over 20 op calls).
    Object.assign(session.forward, { engine: faulty(referenceEngine, 2 * 25 + 10).engine });
    await expect(session.generate(PROMPT, { maxTokens: 4, temperature: 0 }).collect()).rejects.toThrow(Injected);
    expect(session.position).toBe(0);
    expect(session.history).toEqual([]);
    Object.assign(session.forward, { engine: referenceEngine });
    const again = await session.generate(PROMPT, { maxTokens: 4, temperature: 0 }).collect();
    expect(again.text).toBe(fresh.text);
    expect(session.position).toBe(PROMPT.length + 3);
  });
});

/** `loaded` with element `index` of tensor `name` set to `value` (a copy; the others shared). */
function withValue(source: LoadedModel, name: string, index: number, value: number): LoadedModel {
  const t = source.tensors.get(name)! as Tensor<'f32'>;
  const copy = Tensor.f32(t.shape, t.data.subarray(t.offset, t.offset + t.size));
  copy.data[index] = value;
  return { ...source, tensors: new Map([...source.tensors, [name, copy]]) };
}

describe('non-finite values', () => {
  it('a NaN weight in layer 1 stops generation with NonFiniteError naming the step and layer 1; the session is rolled back', () => {
    const bad = buildModel(referenceEngine, withValue(loaded, 'blk.1.ffn_down.weight', 5, NaN));
    const s = new Session(referenceEngine, bad, { capacity: 32, maxPrefill: 4, attention: DENSE });
    expect(() => s.prefill(PROMPT.slice(0, 6))).toThrow(NonFiniteError);
    expect(() => s.prefill(PROMPT.slice(0, 6))).toThrow(/positions 0\.\.3: layer 1 output holds NaN/);
    expect(s.pos).toBe(0);
    expect(s.caches.map((c) => c.nPast[0])).toEqual([0, 0]);
  });

  it('an infinite classifier weight is reported as the logits, not a layer', () => {
    const bad = buildModel(referenceEngine, withValue(loaded, 'output.weight', 3, Infinity));
    const s = new Session(referenceEngine, bad, { capacity: 32, maxPrefill: 4, attention: DENSE });
    expect(() => s.prefill([1])).toThrow(/position 0: logits \(final norm and classifier\) holds (NaN|-?Infinity)/);
  });

  it('checkTensors names the tensor and element of a NaN f32 weight, an infinite f16 weight and a NaN Q4_0 scale', () => {
    expect(() => checkTensors(referenceEngine, loaded)).not.toThrow();
    expect(() => checkTensors(referenceEngine, withValue(loaded, 'blk.0.attn_k.weight', 64 * 2 + 5, NaN))).toThrow(
      new NonFiniteError(
        'tensor "blk.0.attn_k.weight" (f32, shape [32, 64]): element [2, 5] is NaN, expected finite weights',
      ),
    );
    const half = Tensor.zeros('f16', [4, 64]);
    half.data[64 + 7] = f32ToF16(Infinity);
    const f16 = { ...loaded, tensors: new Map([['h', half]]) };
    expect(() => checkTensors(referenceEngine, f16)).toThrow(
      /tensor "h" \(f16, shape \[4, 64\]\): element \[1, 7\] is Infinity/,
    );
    const q = Tensor.zeros('q4_0', [2, 64]);
    // Q4_0 block: f16 scale d then 16 bytes of nibbles (18 bytes). Block 3 = row 1, columns 32..63.
    new DataView(q.data.buffer, q.data.byteOffset).setUint16(3 * 18, 0x7e00, true); // f16 NaN
    const q40 = { ...loaded, tensors: new Map([['q', q]]) };
    expect(() => checkTensors(referenceEngine, q40)).toThrow(
      /tensor "q" \(q4_0, shape \[2, 64\]\): element \[1, 32\] is NaN \(in the block of columns 32\.\., its scale or values\)/,
    );
  });

  it('quantizing on load or convert refuses a value its scale cannot hold, naming the tensor', () => {
    const huge = withValue(loaded, 'blk.0.attn_v.weight', 9, 1e6);
    expect(() => buildModel(referenceEngine, huge, 'q4_0')).toThrow(SparqRangeError);
    expect(() => buildModel(referenceEngine, huge, 'q4_0')).toThrow(
      /^tensor "blk\.0\.attn_v\.weight": quantize: x element 9 is 1000000/,
    );
    expect(() => ggufTensors(referenceEngine, huge, 'q4_1')).toThrow(
      /^tensor "blk\.0\.attn_v\.weight": quantize: x element 9 is 1000000, expected \|x\| <= 65504 for q4_1/,
    );
    expect(() => ggufTensors(referenceEngine, huge, 'f16')).toThrow(
      /^tensor "blk\.0\.attn_v\.weight": convert: element 9 is 1000000, expected a finite \|x\| < 65520 to fit f16/,
    );
    const nan = withValue(loaded, 'blk.1.attn_q.weight', 0, NaN);
    expect(() => buildModel(referenceEngine, nan, 'int4')).toThrow(
      /^tensor "blk\.1\.attn_q\.weight": quantizeInt4: x element 0 is NaN/,
    );
  });
});
