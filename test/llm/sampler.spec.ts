/**
 * run.c's sampler: the xorshift64* generator against values printed by a C
 * build of run.c's random_u32/random_f32 (seed 42 and 1234567), greedy
 * argmax with ties to the first, and top-p truncation.
 */
import { describe, expect, it } from 'vitest';
import { Sampler, XorShiftRng, argmax } from '@sparq/llm';

describe('XorShiftRng (run.c random_u32 / random_f32)', () => {
  it('matches run.c bit for bit', () => {
    const a = new XorShiftRng(42);
    expect([a.u32(), a.u32(), a.u32(), a.u32()]).toEqual([1456360119, 3359763283, 3393612768, 4054632243]);
    const b = new XorShiftRng(1234567n);
    expect([b.f32(), b.f32(), b.f32()].map((x) => Math.fround(x))).toEqual(
      [0.824366093, 0.640456557, 0.940166175].map(Math.fround),
    );
  });
});

describe('Sampler', () => {
  it('is greedy at temperature 0, first index on ties', () => {
    const s = new Sampler(4, { temperature: 0, topp: 0.9, seed: 1 });
    expect(s.sample(Float32Array.of(1, 3, 3, 2))).toBe(1);
    expect(argmax(Float32Array.of(-1, -1))).toBe(0);
  });

  it('with top-p keeps only the nucleus', () => {
    // Probabilities about 0.64, 0.24, 0.09, 0.03: top-p 0.5 keeps token 0 alone.
    const logits = Float32Array.of(3, 2, 1, 0);
    const s = new Sampler(4, { temperature: 1, topp: 0.5, seed: 7 });
    for (let i = 0; i < 50; i++) expect(s.sample(logits.slice())).toBe(0);
    // Top-p 0.99 keeps everything: over many draws, every token shows up.
    const all = new Sampler(4, { temperature: 1, topp: 0.99, seed: 7 });
    const seen = new Set(Array.from({ length: 400 }, () => all.sample(logits.slice())));
    expect([...seen].sort()).toEqual([0, 1, 2, 3]);
  });

  it('draws the same tokens for the same seed', () => {
    const draw = (seed: number) => {
      const s = new Sampler(8, { temperature: 0.8, topp: 1, seed });
      return Array.from({ length: 20 }, () => s.sample(Float32Array.of(0, 1, 2, 0.5, 1.5, 0.2, 0.1, 1)));
    };
    expect(draw(5)).toEqual(draw(5));
    expect(draw(5)).not.toEqual(draw(6));
  });
});
