/**
 * padHeads (pad-heads.ts): a model with heads of 8 zero-padded to 32 computes the same function,
 * so q8_0 / q4_0 caches (whole 32-value blocks per head) can run stories260K's shape. A random
 * llama of stories260K's head shape (dim 64, 8 heads of 8 over 4 KV heads) decodes the same
 * logits padded and unpadded on each backend.
 */
import { describe, expect, it } from 'vitest';
import { SparqRangeError } from '@sparq/core';
import { Session, buildModel, defaultAttention, padHeads, randomLlama } from '@sparq/llm';
import { engines } from '../support/backends.ts';

const { loaded } = randomLlama({ dim: 64, hiddenDim: 128, nLayers: 2, nHeads: 8, nKvHeads: 4, seqLen: 64, seed: 7 });
const prompt = Array.from({ length: 20 }, (_, i) => 3 + ((i * 11) % 25));
/**
 * Max |logit difference| over max |logit|. The two models round differently in f32 only: q times
 * sqrt(32 / 8) = 2 (exact) over sqrt(32) against q over sqrt(8) (one rounding each, 6e-8), and
 * RoPE angles pos * theta'^(-2p/32) against pos * theta^(-2p/8) (the same real number, rounded
 * apart by ~1e-7 relative at positions < 64). Through 2 layers that is ~1e-6 of the logits' range;
 * 1e-5 leaves room for the summation order of the padded products. A wrong padding moves logits by
 * more: a RoPE base 1% off by 1.8e-4, a misplaced head or a wrong temperature by far more.
 */
const PADDED_LOGIT_TOLERANCE = 1e-5;

function logits(engine: (typeof engines)[number], padded: boolean): Float32Array[] {
  const model = buildModel(engine, padded ? padHeads(loaded, 32) : loaded);
  const session = new Session(engine, model, {
    capacity: 32,
    maxPrefill: 32,
    attention: defaultAttention('dense', model.config.headDim, 32),
    kvDType: 'f32',
  });
  const out = [session.prefill(prompt).slice()];
  for (const token of [4, 9, 17, 2]) out.push(session.decode(token).slice());
  return out;
}

describe.each(engines.map((e) => [e.name, e] as const))('padHeads [%s]', (_, engine) => {
  it('heads of 8 padded to 32 give the same logits through prefill and decode', () => {
    const a = logits(engine, false);
    const b = logits(engine, true);
    let range = 0;
    let diff = 0;
    a.forEach((row, step) =>
      row.forEach((x, i) => {
        range = Math.max(range, Math.abs(x));
        diff = Math.max(diff, Math.abs(x - b[step][i]));
      }),
    );
    expect(range).toBeGreaterThan(1);
    expect(diff / range).toBeLessThanOrEqual(PADDED_LOGIT_TOLERANCE);
  });
});

describe('padHeads', () => {
  it('places each head at a multiple of the new width, zeros elsewhere, and the RoPE base that keeps every frequency', () => {
    const p = padHeads(loaded, 32);
    expect(p.config).toMatchObject({ headDim: 32, qDim: 256, kvDim: 128, dim: 64 });
    expect(p.config.ropeTheta).toBeCloseTo(1e16, -2);
    const wk = loaded.tensors.get('blk.1.attn_k.weight')!;
    const pk = p.tensors.get('blk.1.attn_k.weight')!;
    expect(pk.shape).toEqual([128, 64]);
    // KV head 3, component 5: row 3 * 8 + 5 of the original, row 3 * 32 + 5 padded; row 3 * 32 + 8 is padding.
    expect(pk.data[(3 * 32 + 5) * 64 + 10]).toBe(wk.data[(3 * 8 + 5) * 64 + 10]);
    expect(pk.data.subarray((3 * 32 + 8) * 64, (3 * 32 + 32) * 64).every((x) => x === 0)).toBe(true);
    // q carries sqrt(32 / 8) = 2 for the temperature; wo's columns move with the heads.
    const wq = loaded.tensors.get('blk.0.attn_q.weight')!;
    expect(p.tensors.get('blk.0.attn_q.weight')!.data[(7 * 32 + 1) * 64]).toBe(2 * wq.data[(7 * 8 + 1) * 64]);
    const wo = loaded.tensors.get('blk.0.attn_output.weight')!;
    expect(p.tensors.get('blk.0.attn_output.weight')!.data[2 * 256 + 6 * 32 + 7]).toBe(wo.data[2 * 64 + 6 * 8 + 7]);
    expect(loaded.tensors.get('blk.1.attn_k.weight')).toBe(wk); // the input is not changed
  });

  it('refuses a width below the head dim or odd, naming it', () => {
    expect(() => padHeads(loaded, 6)).toThrow(SparqRangeError);
    expect(() => padHeads(loaded, 6)).toThrow('padHeads: to 6, expected an even integer >= the head dim 8');
    expect(() => padHeads(loaded, 33)).toThrow('to 33');
  });
});
