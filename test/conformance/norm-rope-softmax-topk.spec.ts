/**
 * Conformance: rmsnorm, rope, softmax and topk on every backend, against hand computations in f64
 * with tolerances derived from the f32 arithmetic (each bound's derivation beside it; U = 2^-24).
 */
import { Tensor, type Engine } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';
import { U, seeded, uniform } from './numeric.ts';

/**
 * rmsnorm, relative per element: the sum of dim positive squares (dim U), / dim and + eps (2 U) give
 * ss within (dim + 2) U; the square root halves that and adds U; the reciprocal and the two
 * products add 3 U: (dim / 2 + 5) U.
 */
const rmsnormRel = (dim: number) => (dim / 2 + 5) * U;

/**
 * rope, absolute per element, for a pair of norm `norm` rotated by `angle`: the angle is off by at most
 * angle * (ln theta + 3) U (the exponent's, powf's, the reciprocal's and pos * freq's roundings, the
 * exponent's amplified by ln theta); cos and sin by U each; the products and the sum by
 * (sqrt 2 + 1) U * norm. So norm * (5 + 1.5 * angle * (ln theta + 3)) U.
 */
const ropeAbs = (norm: number, angle: number, theta: number) => norm * (5 + 1.5 * angle * (Math.log(theta) + 3)) * U;

/**
 * rope with given frequencies and a scale, absolute per element: the angle pos * freq rounds once
 * (angle U); cos and sin add U each and the scale's product U each; the products and the sum
 * (sqrt 2 + 1) U, all relative to scale * norm. So scale * norm * (7 + 1.5 * angle) U.
 */
const ropeFreqsAbs = (norm: number, angle: number, scale: number) => scale * norm * (7 + 1.5 * angle) * U;

/** rope keeps each pair's norm up to the roundings of cos^2 + sin^2 and of the products: 5 U relative. */
const ROPE_NORM_REL = 5 * U;

/**
 * softmax, relative per element, for a row of length len spanning `range` = max - min: x - max rounds
 * (so exp is off by |x - max| U + its own U), the sum adds (len - 1) U plus its largest term's error,
 * the division U: (2 * range + len + 3) U.
 */
const softmaxRel = (len: number, range: number) => (2 * range + len + 3) * U;

function rmsnormExpected(x: ArrayLike<number>, weight: ArrayLike<number>, dim: number, eps: number): number[] {
  const out: number[] = [];
  for (let t = 0; t < x.length / dim; t++) {
    let ss = 0;
    for (let j = 0; j < dim; j++) ss += x[t * dim + j] ** 2;
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let j = 0; j < dim; j++) out.push(weight[j] * x[t * dim + j] * inv);
  }
  return out;
}

function softmaxOf(engine: Engine, rows: number, len: number, values: ArrayLike<number>): Float32Array {
  const x = Tensor.f32([rows, len], values);
  engine.softmax(x);
  return x.data;
}

function topkOf(engine: Engine, rows: number, len: number, k: number, values: ArrayLike<number>): number[] {
  const out = Tensor.zeros('i32', [rows, k]);
  engine.topk(out, Tensor.f32([rows, len], values));
  return Array.from(out.data);
}

const shapes = fc.record({
  n: fc.integer({ min: 1, max: 4 }),
  len: fc.integer({ min: 1, max: 97 }),
  seed: fc.integer(),
});

forEachBackend('rmsnorm', (engine) => {
  opIt(engine, 'rmsnorm', 'hand-worked row, and in place (out = x) gives the same values', () => {
    // x = [1, 2, 3, 4]: mean of squares 30 / 4 = 7.5; out = weight * x / sqrt(7.5 + 1e-5).
    const x = Tensor.f32([1, 4], [1, 2, 3, 4]);
    const weight = Tensor.f32([4], [1, 0.5, 2, -1]);
    const out = Tensor.zeros('f32', [1, 4]);
    engine.rmsnorm(out, x, weight, 1e-5);
    const s = Math.sqrt(7.5 + 1e-5);
    [1 / s, 1 / s, 6 / s, -4 / s].forEach((want, j) =>
      expect(Math.abs(out.data[j] - want)).toBeLessThanOrEqual(rmsnormRel(4) * Math.abs(want)),
    );
    engine.rmsnorm(x, x, weight, 1e-5);
    expect(Array.from(x.data)).toEqual(Array.from(out.data));
  });

  opIt(engine, 'rmsnorm', 'random shapes: each row normalised on its own, within the f32 bound', () => {
    fc.assert(
      fc.property(shapes, ({ n, len, seed }) => {
        const random = seeded(seed);
        const x = uniform(random, n * len);
        const weight = uniform(random, len);
        const out = Tensor.zeros('f32', [n, len]);
        engine.rmsnorm(out, Tensor.f32([n, len], x), Tensor.f32([len], weight), 1e-5);
        rmsnormExpected(x, weight, len, 1e-5).forEach((want, i) =>
          expect(Math.abs(out.data[i] - want)).toBeLessThanOrEqual(rmsnormRel(len) * Math.abs(want)),
        );
      }),
      { numRuns: fcRuns(50) },
    );
  });
});

forEachBackend('rope', (engine) => {
  opIt(engine, 'rope', 'hand-worked: headDim 4, two heads, positions 1 and 3', () => {
    // Pair 0 turns by pos * 10000^0 = pos radians, pair 1 by pos * 10000^(-2/4) = pos / 100.
    const values = [1, 0, 0.5, -2, 3, 4, 1, 1, /* token at pos 3: */ -1, 2, 0, 1, 2, 2, -0.5, 0.25];
    const x = Tensor.f32([2, 2, 4], values);
    engine.rope(x, Tensor.wrap('i32', Int32Array.from([1, 3]), [2]), 10000);
    for (let t = 0; t < 2; t++) {
      const pos = [1, 3][t];
      for (let h = 0; h < 2; h++) {
        for (let i = 0; i < 2; i++) {
          const at = (t * 2 + h) * 4 + 2 * i;
          const [x0, x1] = [values[at], values[at + 1]];
          const angle = pos * 10000 ** (-(2 * i) / 4);
          const bound = ropeAbs(Math.hypot(x0, x1), angle, 10000);
          expect(Math.abs(x.data[at] - (x0 * Math.cos(angle) - x1 * Math.sin(angle)))).toBeLessThanOrEqual(bound);
          expect(Math.abs(x.data[at + 1] - (x0 * Math.sin(angle) + x1 * Math.cos(angle)))).toBeLessThanOrEqual(bound);
        }
      }
    }
  });

  opIt(engine, 'rope', 'position 0 is the identity; every position keeps pair norms (random shapes)', () => {
    fc.assert(
      fc.property(
        fc.record({
          n: fc.integer({ min: 1, max: 3 }),
          nHeads: fc.integer({ min: 1, max: 5 }),
          half: fc.integer({ min: 1, max: 9 }),
          seed: fc.integer(),
          pos: fc.integer({ min: 0, max: 4096 }),
        }),
        ({ n, nHeads, half, seed, pos }) => {
          const headDim = 2 * half;
          const values = uniform(seeded(seed), n * nHeads * headDim);
          const x = Tensor.f32([n, nHeads, headDim], values);
          // Token 0 at position 0, the others at `pos`.
          engine.rope(
            x,
            Tensor.wrap(
              'i32',
              Int32Array.from({ length: n }, (_, t) => (t === 0 ? 0 : pos)),
              [n],
            ),
            10000,
          );
          for (let i = 0; i < values.length; i += 2) {
            if (i < nHeads * headDim) {
              expect(x.data[i] === values[i] && x.data[i + 1] === values[i + 1]).toBe(true);
            } else {
              const before = Math.hypot(values[i], values[i + 1]);
              expect(Math.abs(Math.hypot(x.data[i], x.data[i + 1]) - before)).toBeLessThanOrEqual(
                ROPE_NORM_REL * before,
              );
            }
          }
        },
      ),
      { numRuns: fcRuns(50) },
    );
  });
});

forEachBackend('rope with frequencies, scale and pair layout', (engine) => {
  opIt(engine, 'rope', "hand-worked 'halves' pairs: headDim 4 pairs (0, 2) and (1, 3)", () => {
    // freqs [1, 0.5], position 2: pair 0 turns by 2 rad, pair 1 by 1 rad; scale 2 doubles the result.
    const x = Tensor.f32([1, 1, 4], [1, 0, 0, 1]);
    engine.rope(x, Tensor.wrap('i32', Int32Array.from([2]), [1]), 10000, {
      freqs: Tensor.f32([2], [1, 0.5]),
      scale: 2,
      pairs: 'halves',
    });
    // (x0, x2) = (1, 0) -> 2 (cos 2, sin 2); (x1, x3) = (0, 1) -> 2 (-sin 1, cos 1).
    const want = [2 * Math.cos(2), -2 * Math.sin(1), 2 * Math.sin(2), 2 * Math.cos(1)];
    want.forEach((w, i) => expect(Math.abs(x.data[i] - w)).toBeLessThanOrEqual(ropeFreqsAbs(1, 2, 2)));
  });

  opIt(
    engine,
    'rope',
    'random shapes, frequencies, scales and layouts: within the f32 bound of the f64 rotation',
    () => {
      fc.assert(
        fc.property(
          fc.record({
            n: fc.integer({ min: 1, max: 3 }),
            nHeads: fc.integer({ min: 1, max: 4 }),
            half: fc.integer({ min: 1, max: 9 }),
            seed: fc.integer(),
            pos: fc.integer({ min: 0, max: 4096 }),
            scale: fc.double({ min: 0.5, max: 2, noNaN: true }),
            pairs: fc.constantFrom('adjacent' as const, 'halves' as const),
          }),
          ({ n, nHeads, half, seed, pos, scale, pairs }) => {
            const headDim = 2 * half;
            const random = seeded(seed);
            const values = uniform(random, n * nHeads * headDim);
            // Frequencies as context-extension schemes make them: from 1 down to 1e-4, some 0.
            const freqs = Tensor.f32(
              [half],
              Array.from({ length: half }, (_, i) => (i === half - 1 && half > 2 ? 0 : 10 ** (-4 * random()))),
            );
            const x = Tensor.f32([n, nHeads, headDim], values);
            const positions = Int32Array.from({ length: n }, (_, t) => pos + t);
            engine.rope(x, Tensor.wrap('i32', positions, [n]), 10000, { freqs, scale, pairs });
            for (let t = 0; t < n; t++) {
              for (let h = 0; h < nHeads; h++) {
                for (let i = 0; i < half; i++) {
                  const base = (t * nHeads + h) * headDim;
                  const [a, b] = pairs === 'halves' ? [base + i, base + i + half] : [base + 2 * i, base + 2 * i + 1];
                  const angle = positions[t] * freqs.data[i];
                  const s = Math.fround(scale);
                  const bound = ropeFreqsAbs(Math.hypot(values[a], values[b]), angle, s);
                  expect(
                    Math.abs(x.data[a] - s * (values[a] * Math.cos(angle) - values[b] * Math.sin(angle))),
                  ).toBeLessThanOrEqual(bound);
                  expect(
                    Math.abs(x.data[b] - s * (values[a] * Math.sin(angle) + values[b] * Math.cos(angle))),
                  ).toBeLessThanOrEqual(bound);
                }
              }
            }
          },
        ),
        { numRuns: fcRuns(50) },
      );
    },
  );
});

forEachBackend('softmax', (engine) => {
  opIt(engine, 'softmax', 'hand-worked rows, a row of length 1, large values, -Infinity (masked) entries', () => {
    // [1, 2, 3] - 3 = [-2, -1, 0]: e^-2, e^-1, 1 over their sum. [1000, 1001] behaves as [0, 1].
    const e = [Math.exp(-2), Math.exp(-1), 1];
    const sum = e[0] + e[1] + e[2];
    const got = softmaxOf(engine, 1, 3, [1, 2, 3]);
    e.forEach((v, j) => expect(Math.abs(got[j] - v / sum)).toBeLessThanOrEqual(softmaxRel(3, 2) * (v / sum)));
    expect(Array.from(softmaxOf(engine, 2, 1, [5, -7]))).toEqual([1, 1]);
    const big = softmaxOf(engine, 1, 2, [1000, 1001]);
    const small = 1 / (1 + Math.E);
    expect(Math.abs(big[0] - small)).toBeLessThanOrEqual(softmaxRel(2, 1) * small);
    expect(Array.from(softmaxOf(engine, 1, 3, [-Infinity, 0, -Infinity]))).toEqual([0, 1, 0]);
  });

  opIt(engine, 'softmax', 'random shapes: each row against f64, within the f32 bound', () => {
    fc.assert(
      fc.property(shapes, fc.integer({ min: 0, max: 30 }), ({ n, len, seed }, spread) => {
        const values = uniform(seeded(seed), n * len).map((v) => v * spread);
        const got = softmaxOf(engine, n, len, values);
        for (let t = 0; t < n; t++) {
          const row = Array.from(values.subarray(t * len, (t + 1) * len));
          const max = Math.max(...row);
          const sum = row.reduce((s, v) => s + Math.exp(v - max), 0);
          const rel = softmaxRel(len, max - Math.min(...row));
          row.forEach((v, j) =>
            expect(Math.abs(got[t * len + j] - Math.exp(v - max) / sum)).toBeLessThanOrEqual(
              rel * (Math.exp(v - max) / sum),
            ),
          );
        }
      }),
      { numRuns: fcRuns(50) },
    );
  });
});

forEachBackend('topk', (engine) => {
  opIt(engine, 'topk', 'largest first, ties to the lowest index, k = len, rows of length 1', () => {
    expect(topkOf(engine, 1, 5, 3, [3, 1, 3, 2, 5])).toEqual([4, 0, 2]);
    expect(topkOf(engine, 1, 5, 5, [3, 1, 3, 2, 5])).toEqual([4, 0, 2, 3, 1]);
    expect(topkOf(engine, 2, 4, 2, [1, 1, 1, 1, -2, 7, 7, -2])).toEqual([0, 1, 1, 2]);
    expect(topkOf(engine, 3, 1, 1, [4, -1, 0])).toEqual([0, 0, 0]);
    expect(topkOf(engine, 1, 3, 2, [-0, 0, -1])).toEqual([0, 1]); // 0 and -0 are equal
    expect(topkOf(engine, 1, 4, 4, [-Infinity, Infinity, 0, Infinity])).toEqual([1, 3, 2, 0]);
  });

  opIt(engine, 'topk', 'NaN ranks above every number (it propagates instead of vanishing), NaN ties by index', () => {
    expect(topkOf(engine, 1, 5, 3, [1, NaN, Infinity, NaN, 2])).toEqual([1, 3, 2]);
  });

  opIt(engine, 'topk', 'random rows with many ties: the k first of a stable sort by value, descending', () => {
    fc.assert(
      fc.property(shapes, fc.integer({ min: 1, max: 97 }), ({ n, len, seed }, kRaw) => {
        const k = 1 + (kRaw % len);
        const random = seeded(seed);
        // Few distinct values, so ties are common.
        const values = Float32Array.from({ length: n * len }, () => Math.floor(random() * 6) - 3);
        const got = topkOf(engine, n, len, k, values);
        for (let t = 0; t < n; t++) {
          const order = Array.from({ length: len }, (_, j) => j).sort(
            (a, b) => values[t * len + b] - values[t * len + a] || a - b,
          );
          expect(got.slice(t * k, (t + 1) * k)).toEqual(order.slice(0, k));
        }
      }),
      { numRuns: fcRuns(100) },
    );
  });
});
