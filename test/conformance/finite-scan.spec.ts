/**
 * Conformance: the scan every finite-value check runs (Engine.firstAbove: the backend's
 * Backend.firstAbove when it has one, else validate.ts's firstAbove) gives validate.ts's answer
 * on every backend and, for native, on every kernel path: the index of the first element that is
 * NaN, infinite or above maxAbs in magnitude, or -1. Exact: it is an index.
 *
 * Cases: one to three bad values planted anywhere (first and last element, SIMD tails, either
 * side of the native scan's 65,536-element chunks, several chunks holding one, the earliest in a
 * later chunk than a task might reach first), views at an offset, and limits a float cannot hold
 * (1.1, 2^56 + 1) or at the edge (maxAbs itself is inside, the next float above it outside).
 */
import { Tensor, firstAbove, type Engine } from '@sparq/core';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { forEachBackend, forEachNativePath } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { seeded, uniform } from './numeric.ts';

/** The f32 next to v (a float32 value >= 0) upwards (step 1) or downwards (step -1). */
function stepFloat(v: number, step: 1 | -1): number {
  const f = new Float32Array([v]);
  new Uint32Array(f.buffer)[0] += step;
  return f[0];
}
const nextFloat = (v: number) => stepFloat(v, 1);

const F32_MAX = 3.4028234663852886e38;

/** The largest f32 <= m (m >= 0): the largest magnitude inside the limit m. */
function insideEdge(m: number): number {
  if (m >= F32_MAX) return F32_MAX;
  const f = Math.fround(m);
  return f <= m ? f : stepFloat(f, -1);
}

/** The smallest magnitude outside the limit m: the next f32 past insideEdge(m), or infinity. */
const outsideEdge = (m: number) => (m >= F32_MAX ? Infinity : nextFloat(insideEdge(m)));

const LIMITS = [Number.MAX_VALUE, 2 ** 56, 2 ** 56 + 2 ** 10, 1.1, 1.5, 0] as const;

const cases = fc.record({
  n: fc.oneof(
    fc.integer({ min: 1, max: 200 }),
    fc.integer({ min: 400, max: 5000 }),
    fc.integer({ min: 65_530, max: 65_545 }),
    fc.constantFrom(140_001, 300_000),
  ),
  offset: fc.constantFrom(0, 3, 17),
  maxAbs: fc.constantFrom(...LIMITS),
  bad: fc.array(
    fc.tuple(fc.integer({ min: 0, max: 2 ** 30 }), fc.constantFrom('nan', 'inf', '-inf', 'above', 'edge')),
    {
      maxLength: 3,
    },
  ),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
});

/** Values inside [-maxAbs, maxAbs] (maxAbs itself among them), the planted ones at their positions. */
function planted(c: {
  n: number;
  offset: number;
  maxAbs: number;
  bad: [number, string][];
  seed: number;
}): Float32Array {
  const data = new Float32Array(c.offset + c.n + 5).fill(NaN); // NaN around the view: never read
  const scale = Math.min(1, c.maxAbs);
  data.set(
    uniform(seeded(c.seed), c.n).map((u) => u * scale),
    c.offset,
  );
  const edge = insideEdge(c.maxAbs);
  data[c.offset + (c.seed % c.n)] = c.seed & 1 ? edge : -edge;
  const above = outsideEdge(c.maxAbs);
  for (const [at, kind] of c.bad) {
    const i = c.offset + (at % c.n);
    data[i] = { nan: NaN, inf: Infinity, '-inf': -Infinity, above, edge: -above }[kind]!;
  }
  return data;
}

function expectSameScan(engine: Engine, c: Parameters<typeof planted>[0]): void {
  const data = planted(c);
  const want = firstAbove(data, c.offset, c.n, c.maxAbs);
  const got = engine.firstAbove(new Tensor('f32', data, [c.n], undefined, c.offset), c.maxAbs);
  if (got !== want)
    expect.fail(
      `n ${c.n}, offset ${c.offset}, maxAbs ${c.maxAbs}, bad ${JSON.stringify(c.bad)}: ${got}, expected ${want}`,
    );
}

forEachBackend('finite scan', (engine) => {
  it('hand-worked: clean, NaN, infinities, the limit itself inside, the next float above it outside', () => {
    const t = (values: number[]) => Tensor.f32([values.length], values);
    expect(engine.firstAbove(t([0, -1, 2]))).toBe(-1);
    expect(engine.firstAbove(t([0, NaN, Infinity]))).toBe(1);
    expect(engine.firstAbove(t([0, 1, -Infinity]))).toBe(2);
    expect(engine.firstAbove(t([3.4e38, -3.4e38]))).toBe(-1);
    expect(engine.firstAbove(t([2 ** 56, -(2 ** 56)]), 2 ** 56)).toBe(-1);
    expect(engine.firstAbove(t([1, -nextFloat(2 ** 56)]), 2 ** 56)).toBe(1);
    expect(engine.firstAbove(t([1, Math.fround(1.1)]), 1.1)).toBe(1); // fround(1.1) > 1.1
    expect(engine.firstAbove(t([insideEdge(1.1), -insideEdge(1.1)]), 1.1)).toBe(-1);
  });

  it('random placements, lengths, offsets and limits: the index validate.ts finds', () => {
    fc.assert(
      fc.property(cases, (c) => expectSameScan(engine, c)),
      { numRuns: fcRuns(60) },
    );
  });

  it("a check's message names the element the scan found, past the native scan's size threshold", () => {
    const n = 200_000;
    const gate = Tensor.zeros('f32', [n]);
    gate.data[150_001] = NaN;
    gate.data[190_000] = Infinity;
    expect(() => engine.swiglu(Tensor.zeros('f32', [n]), gate, Tensor.zeros('f32', [n]))).toThrow(
      'swiglu: gate element 150001 is NaN, expected a finite number',
    );
  });
});

// Every native kernel path (scalar, AVX2, AVX-512), forced one by one.
forEachNativePath('finite scan', (native) => {
  it('random placements, lengths, offsets and limits: the index validate.ts finds', () => {
    fc.assert(
      fc.property(cases, (c) => expectSameScan(native, c)),
      { numRuns: fcRuns(40) },
    );
  });
});
