/**
 * Conformance: add (out = a + b, the residual connection) on every backend and, for native, on
 * every kernel path this CPU has. Tolerance: none. An f32 addition is correctly rounded (IEEE 754),
 * so every backend's sum of two f32 values is the one f32 nearest their exact sum. Math.fround(a + b)
 * gives it too: f64 carries more than twice f32's precision (53 >= 2 * 24 + 2 bits), so rounding to
 * f64 first never changes the f32 result. Compared with Object.is: -0 and NaN too.
 */
import { Tensor, type Engine } from '@sparq/core';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { forEachBackend, forEachNativePath, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { seeded, uniform } from './numeric.ts';

function addOf(engine: Engine, a: Float32Array, b: Float32Array): Float32Array {
  const out = Tensor.zeros('f32', [a.length]);
  engine.add(out, Tensor.f32([a.length], a), Tensor.f32([b.length], b));
  return out.data;
}

function expectExact(got: Float32Array, a: Float32Array, b: Float32Array): void {
  for (let i = 0; i < a.length; i++) {
    const want = Math.fround(a[i] + b[i]);
    if (!Object.is(got[i], want)) expect.fail(`element ${i}: ${a[i]} + ${b[i]} = ${got[i]}, expected ${want}`);
  }
}

/** n values over magnitudes 2^-20 .. 2^20, both signs, so sums round, cancel and carry. */
function values(seed: number, n: number): Float32Array {
  const random = seeded(seed);
  return uniform(random, n).map((u) => u * 2 ** Math.floor(40 * random() - 20));
}

const cases = fc.record({
  n: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(1023, 65537, 140001)),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
});

/** `runs` random cases: the engine's sums are the correctly rounded f32 sums. */
function randomSums(engine: Engine, runs: number): void {
  fc.assert(
    fc.property(cases, ({ n, seed }) => {
      const a = values(seed, n);
      const b = values(seed + 1, n);
      expectExact(addOf(engine, a, b), a, b);
    }),
    { numRuns: runs },
  );
}

forEachBackend('add', (engine) => {
  opIt(engine, 'add', 'hand-worked: rounding, signed zeros, overflow to infinity, NaN and inf - inf', () => {
    const a = new Float32Array([1, 2 ** 24, -0, 0, 3e38, Infinity, NaN, -1.5]);
    const b = new Float32Array([2 ** -30, 1, -0, -0, 3e38, -Infinity, 1, 1.5]);
    const got = addOf(engine, a, b);
    expect(got[0]).toBe(1); // 2^-30 is below half of 1's ulp
    expect(got[1]).toBe(2 ** 24); // 2^24 + 1 is a tie: to even
    expect(Object.is(got[2], -0)).toBe(true);
    expect(Object.is(got[3], 0)).toBe(true);
    expect(got[4]).toBe(Infinity);
    expect(got[5]).toBeNaN();
    expect(got[6]).toBeNaN();
    expect(Object.is(got[7], 0)).toBe(true);
  });

  opIt(engine, 'add', "random lengths (SIMD tails, several threads' chunks): the correctly rounded f32 sums", () => {
    randomSums(engine, fcRuns(30));
  });

  opIt(engine, 'add', 'out may be a or b, and views at an offset', () => {
    const a = values(3, 101);
    const b = values(4, 101);
    const want = addOf(engine, a, b);
    const ta = Tensor.f32([101], a);
    engine.add(ta, ta, Tensor.f32([101], b));
    expect(ta.data).toEqual(want);
    const tb = Tensor.f32([101], b);
    engine.add(tb, Tensor.f32([101], a), tb);
    expect(tb.data).toEqual(want);
    const storage = new Float32Array(3 * 101);
    storage.set(a, 0);
    storage.set(b, 101);
    const view = (at: number) => new Tensor('f32', storage, [101], undefined, at);
    engine.add(view(202), view(0), view(101));
    expect(storage.subarray(202)).toEqual(want);
  });

  opIt(engine, 'add', 'bad input: shapes named, partial overlap, dtype; out untouched', () => {
    const out = Tensor.f32([2, 3], [9, 9, 9, 9, 9, 9]);
    expect(() => engine.add(out, Tensor.zeros('f32', [2, 3]), Tensor.zeros('f32', [6]))).toThrow(
      'add: b has shape [6], expected [2, 3]',
    );
    expect(() => engine.add(out, Tensor.zeros('f32', [3, 2]), Tensor.zeros('f32', [3, 2]))).toThrow(
      'add: out has shape [2, 3], expected [3, 2]',
    );
    const storage = new Float32Array(8);
    const shifted = new Tensor('f32', storage, [6], undefined, 1);
    expect(() => engine.add(shifted, new Tensor('f32', storage, [6]), Tensor.zeros('f32', [6]))).toThrow(/overlaps a/);
    expect(() => engine.add(out, Tensor.zeros('f16', [2, 3]) as never, Tensor.zeros('f32', [2, 3]))).toThrow(
      /add: a has dtype f16/,
    );
    expect(Array.from(out.data)).toEqual([9, 9, 9, 9, 9, 9]);
  });
});

// Every native kernel path (scalar, AVX2, AVX-512), forced one by one.
forEachNativePath('add', (native) => {
  it('random lengths: the correctly rounded f32 sums', () => {
    randomSums(native, fcRuns(20));
  });
});
