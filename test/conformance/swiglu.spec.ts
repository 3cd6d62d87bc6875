/**
 * Conformance: swiglu (out = silu(gate) * up, silu(v) = v / (1 + e^-v)) on every backend and, for
 * native, on every kernel path this CPU has, against f64, within a bound from the f32 arithmetic.
 *
 * SWIGLU_REL, relative per element (U = 2^-24): e = e^-|v| is off by at most EXP_REL (the reference
 * rounds the exact exp once, U; native's polynomial exp_ps is taken as 4 U: the whole op measured
 * 4.1 U on native and 3.1 U on the reference at 2M points of [-87.3, 20], against the bound's 13 U);
 * 1 + e adds U and passes on at most e's error; the reciprocal adds U; for v < 0 the
 * product e * r adds U and e's error again; v * sigmoid and * up add U each:
 * 2 EXP_REL + 5 U = 13 U.
 * SILU_FLUSH, absolute (times |up|): below v = -87.3 both backends' e^v underflows f32 or is flushed
 * to 0 (native's exp_ps clamps there), so silu(v) becomes -0 where its exact value is v e^v, at most
 * 87.3 e^-87.3 in size (|v| e^v falls as v goes further down).
 */
import { Tensor, type Engine } from '@sparq/core';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { forEachBackend, forEachNativePath, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { U, seeded, uniform } from './numeric.ts';

const EXP_REL = 4 * U;
const SWIGLU_REL = 2 * EXP_REL + 5 * U;
const SILU_FLUSH = 87.3 * Math.exp(-87.3);

/** silu(v) * u in f64. */
const exact = (v: number, u: number) => (v / (1 + Math.exp(-v))) * u;

function swigluOf(engine: Engine, gate: Float32Array, up: Float32Array): Float32Array {
  const out = Tensor.zeros('f32', [gate.length]);
  engine.swiglu(out, Tensor.f32([gate.length], gate), Tensor.f32([up.length], up));
  return out.data;
}

function expectWithinBound(got: Float32Array, gate: Float32Array, up: Float32Array): void {
  for (let i = 0; i < gate.length; i++) {
    const want = exact(gate[i], up[i]);
    const bound = SWIGLU_REL * Math.abs(want) + SILU_FLUSH * Math.abs(up[i]);
    if (!(Math.abs(got[i] - want) <= bound)) {
      expect.fail(`element ${i}: swiglu(${gate[i]}, ${up[i]}) = ${got[i]}, f64 ${want}, bound ${bound}`);
    }
  }
}

/** n values spread over [-spread, spread), with the cases at the formulas' seams mixed in. */
function gates(seed: number, n: number, spread: number): Float32Array {
  const g = uniform(seeded(seed), n).map((v) => v * spread);
  const seams = [0, -0, 1e-30, -1e-30, 87.3, -87.3, -88.8, -200, 89, 1e6, -1e6];
  seams.forEach((v, i) => {
    if (i * 7 < n) g[i * 7] = v;
  });
  return g;
}

const cases = fc.record({
  n: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(1023, 65537, 140001)),
  spread: fc.constantFrom(1, 8, 100),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
});

/** `runs` random cases: the engine's products within the bound of f64's. */
function randomProducts(engine: Engine, runs: number): void {
  fc.assert(
    fc.property(cases, ({ n, spread, seed }) => {
      const gate = gates(seed, n, spread);
      const up = uniform(seeded(seed + 1), n);
      expectWithinBound(swigluOf(engine, gate, up), gate, up);
    }),
    { numRuns: runs },
  );
}

forEachBackend('swiglu', (engine) => {
  opIt(engine, 'swiglu', 'hand-worked values: silu(0) = 0, silu(v) - silu(-v) = v, large |v|', () => {
    const got = swigluOf(
      engine,
      new Float32Array([0, 2, -2, 30, -30, -100, 100]),
      new Float32Array([5, 1, 1, 0.5, 1, 3, -1]),
    );
    expect(got[0]).toBe(0);
    expect(Math.abs(got[1] - got[2] - 2)).toBeLessThanOrEqual(2 * SWIGLU_REL * 2); // silu(v) - silu(-v) = v
    expect(Math.abs(got[3] - 15)).toBeLessThanOrEqual(SWIGLU_REL * 15); // sigmoid(30) rounds to 1 in f32
    expect(Math.abs(got[4])).toBeLessThanOrEqual(30 * Math.exp(-30) * (1 + SWIGLU_REL));
    expect(Math.abs(got[5])).toBeLessThanOrEqual(SILU_FLUSH * 3);
    expect(got[6]).toBe(-100);
  });

  opIt(engine, 'swiglu', "random lengths (SIMD tails, several threads' chunks) against f64", () => {
    randomProducts(engine, fcRuns(30));
  });

  opIt(engine, 'swiglu', 'out may be gate or up: the same values as separate storage', () => {
    const gate = gates(5, 37, 8);
    const up = uniform(seeded(6), 37);
    const want = swigluOf(engine, gate, up);
    const g = Tensor.f32([37], gate);
    engine.swiglu(g, g, Tensor.f32([37], up));
    expect(g.data).toEqual(want);
    const u = Tensor.f32([37], up);
    engine.swiglu(u, Tensor.f32([37], gate), u);
    expect(u.data).toEqual(want);
  });

  opIt(engine, 'swiglu', 'bad input: both shapes named, partial overlap, non-finite gate; out untouched', () => {
    const out = Tensor.f32([2, 3], [9, 9, 9, 9, 9, 9]);
    expect(() => engine.swiglu(out, Tensor.zeros('f32', [2, 3]), Tensor.zeros('f32', [3, 2]))).toThrow(
      'up has shape [3, 2], expected [2, 3]',
    );
    const storage = new Float32Array(8);
    const shifted = new Tensor('f32', storage, [6], undefined, 1);
    expect(() => engine.swiglu(shifted, new Tensor('f32', storage, [6]), Tensor.zeros('f32', [6]))).toThrow(
      /overlaps gate/,
    );
    expect(() => engine.swiglu(out, Tensor.f32([2, 3], [0, 1, NaN, 0, 0, 0]), Tensor.zeros('f32', [2, 3]))).toThrow(
      /gate element 2 is NaN/,
    );
    expect(Array.from(out.data)).toEqual([9, 9, 9, 9, 9, 9]);
  });
});

// Every native kernel path (scalar, AVX2, AVX-512) against f64, forced one by one.
forEachNativePath('swiglu', (native) => {
  it('random lengths against f64', () => {
    randomProducts(native, fcRuns(20));
  });
});
