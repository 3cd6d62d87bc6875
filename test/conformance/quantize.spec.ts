/**
 * Conformance: ggml block quantization (Q4_0, Q4_1, Q8_0; byte-exact with ggml) and the engine's
 * group-wise INT4 (spec.md §5), on every backend.
 * - Hand-worked blocks: the expected bytes were worked out by hand from ggml's formulas (shown in
 *   the comments), not by running any implementation.
 * - Round trips as fast-check properties with bounds derived from each format's arithmetic.
 */
import {
  BLOCK_DTYPES,
  Int4Matrix,
  Tensor,
  f16ToF32,
  f32ToF16,
  type BlockDType,
  type Engine,
  type Int4GroupSize,
} from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const f32 = Math.fround;

/** Quantizes `values` (one row) to `dtype` and returns the raw block bytes. */
function blockBytes(engine: Engine, dtype: BlockDType, values: number[]): number[] {
  const out = Tensor.zeros(dtype, [values.length]);
  engine.quantize(out, Tensor.f32([values.length], values));
  return Array.from(out.data);
}

function dequantized(engine: Engine, q: Tensor<BlockDType>): number[] {
  const out = Tensor.zeros('f32', q.shape);
  engine.dequantize(out, q);
  return Array.from(out.data);
}

/** The little-endian f16 at bytes[at] as a number. */
const f16At = (bytes: ArrayLike<number>, at: number) => f16ToF32(bytes[at] | (bytes[at + 1] << 8));

/**
 * Rows of 32-element blocks: uniform values times 2^e (odd magnitudes), some zeros, some constant rows.
 * |u| below 2^-20 becomes 0: for a block of subnormal f32 values the f32 scale d itself underflows to 0
 * (ggml's arithmetic, and below anything an f16 d can hold), which no bound in terms of d describes.
 */
const blockRows = fc
  .record({
    blocks: fc.integer({ min: 1, max: 3 }),
    e: fc.integer({ min: -8, max: 13 }), // keeps every d and m inside f16's range
    kind: fc.constantFrom('random', 'random', 'sparse', 'constant', 'zero'),
    values: fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 96, maxLength: 96 }),
  })
  .map(({ blocks, e, kind, values }) =>
    Float32Array.from({ length: blocks * 32 }, (_, i) => {
      const u = kind === 'constant' ? values[0] : values[i];
      if (kind === 'zero' || Math.abs(u) < 2 ** -20) return 0;
      if (kind === 'sparse' && i % 3 !== 0) return 0;
      return u * 2 ** e;
    }),
  );

/**
 * Round-trip bounds per format, for element j of a block: d is the f32 scale the quantizer computes,
 * d16 (and m16) what the block stores. An element is within half a step of d, plus the f16 storage
 * error of d times its largest code (and of m), plus f32 rounding of x * id (a few ulps of the at most
 * 16 or 128 steps the block spans: 2^-19 d for 4 bits, 2^-16 d for 8).
 */
const ROUND_TRIP: Record<
  'q4_0' | 'q4_1' | 'q8_0',
  { bytes: number; rule: string; bound: (block: Float32Array, bytes: Uint8Array, at: number) => (j: number) => number }
> = {
  q4_0: {
    bytes: 18,
    rule: 'within half a step (one step for the clamped far extreme)',
    bound: (block, bytes, at) => {
      let max = 0;
      for (const v of block) if (Math.abs(v) > Math.abs(max)) max = v;
      const d = f32(max / -8);
      const slack = 8 * Math.abs(Math.abs(f16At(bytes, at)) - Math.abs(d)) + 2 ** -19 * Math.abs(d);
      // x / d beyond +7.25 steps, on the side opposite max, can clamp at code 15: one step.
      return (j) => (d !== 0 && block[j] / d > 7.25 ? 1 : 0.5) * Math.abs(d) + slack;
    },
  },
  q4_1: {
    bytes: 20,
    rule: 'within half a step plus the f16 error of d and m',
    bound: (block, bytes, at) => {
      const min = Math.min(...block);
      const d = f32(f32(Math.max(...block) - min) / 15);
      const slack = 15 * Math.abs(f16At(bytes, at) - d) + Math.abs(f16At(bytes, at + 2) - min) + 2 ** -19 * d;
      // The final q * d + m rounds to f32: 2^-23 |x| covers it.
      return (j) => 0.5 * d + slack + 2 ** -23 * Math.abs(block[j]);
    },
  },
  q8_0: {
    bytes: 34,
    rule: 'within half a step plus the f16 error of d',
    bound: (block, bytes, at) => {
      const d = f32(Math.max(...block.map(Math.abs)) / 127);
      const bound = 0.5 * d + 127 * Math.abs(f16At(bytes, at) - d) + 2 ** -16 * d;
      return () => bound;
    },
  },
};

forEachBackend('quantize ggml blocks', (engine) => {
  opIt(
    engine,
    'quantize',
    'Q4_0: hand-worked block x[j] = j - 16',
    () => {
      // max = x[0] = -16 (largest magnitude) -> d = -16 / -8 = 2, f16 0x4000 -> bytes 00 40; id = 0.5.
      // q[j] = min(15, trunc((j - 16) * 0.5 + 8.5)) = min(15, trunc(j/2 + 0.5)):
      //   j  0..15 -> 0 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8
      //   j 16..31 -> 8 9 9 10 10 11 11 12 12 13 13 14 14 15 15 15 (j = 31: 16 clamps to 15)
      // byte j = q[j] | q[j + 16] << 4.
      const x = Array.from({ length: 32 }, (_, j) => j - 16);
      const expected = [
        0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8,
      ];
      expect(blockBytes(engine, 'q4_0', x)).toEqual(expected);
      // Dequantized: (q - 8) * 2. x[31] = 15 clamped to code 15 -> 14.
      const q = Tensor.zeros('q4_0', [32]);
      engine.quantize(q, Tensor.f32([32], x));
      const qs = [
        0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 15,
      ];
      expect(dequantized(engine, q)).toEqual(qs.map((v) => (v - 8) * 2));
    },
    'q4_0',
  );

  opIt(
    engine,
    'quantize',
    'Q4_0: the f16 rounding of d (one value -0.3, the rest 0)',
    () => {
      // d = -0.3f / -8 = 0.0375 = 1.2 * 2^-5: f16 exponent 10, mantissa 0.2 * 1024 = 204.8 -> 205,
      // bits (10 << 10) | 205 = 0x28cd -> bytes cd 28. x[0] * id = -8 -> trunc(0.5) = 0; zeros -> 8.
      // byte 0 = 0 | 8 << 4 = 0x80, bytes 1..15 = 0x88.
      // Dequantized x[0] = -8 * (1 + 205/1024) * 2^-5 = -8 * 0.037506103515625 = -0.300048828125.
      const x = [-0.3, ...new Array<number>(31).fill(0)];
      expect(blockBytes(engine, 'q4_0', x)).toEqual([0xcd, 0x28, 0x80, ...new Array<number>(15).fill(0x88)]);
      const q = Tensor.zeros('q4_0', [32]);
      engine.quantize(q, Tensor.f32([32], x));
      expect(dequantized(engine, q)).toEqual([-0.300048828125, ...new Array<number>(31).fill(0)]);
    },
    'q4_0',
  );

  opIt(
    engine,
    'quantize',
    'Q4_1: hand-worked block x[j] = (j mod 16) - 4, with x[16] = -3.75, x[17] = -2.5',
    () => {
      // min = -4, max = 11 -> d = 15 / 15 = 1 (f16 0x3c00 -> 00 3c), m = -4 (f16 0xc400 -> 00 c4), id = 1.
      // q = trunc(x + 4 + 0.5): j < 16 -> j; x[16] -> trunc(0.75) = 0; x[17] -> trunc(2.0) = 2; j >= 18 -> j - 16.
      // byte 0 = 0 | 0 << 4 = 0x00, byte 1 = 1 | 2 << 4 = 0x21, byte j = j | j << 4 = 0x11 * j for j >= 2.
      const x = Array.from({ length: 32 }, (_, j) => (j % 16) - 4);
      x[16] = -3.75;
      x[17] = -2.5;
      const qs = [0x00, 0x21, ...Array.from({ length: 14 }, (_, i) => 0x11 * (i + 2))];
      expect(blockBytes(engine, 'q4_1', x)).toEqual([0x00, 0x3c, 0x00, 0xc4, ...qs]);
      // Dequantized q * 1 - 4: x[16] -> -4 (0.25 off), x[17] -> -2 (the tie -2.5 rounds up).
      const q = Tensor.zeros('q4_1', [32]);
      engine.quantize(q, Tensor.f32([32], x));
      const want = x.slice();
      want[16] = -4;
      want[17] = -2;
      expect(dequantized(engine, q)).toEqual(want);
    },
    'q4_1',
  );

  opIt(
    engine,
    'quantize',
    'Q8_0: hand-worked block with halves rounded away from zero',
    () => {
      // amax = 127 -> d = 1 (f16 0x3c00 -> 00 3c), id = 1; q = roundf(x):
      // -127 -> 0x81, 2.5 -> 3, -2.5 -> -3 = 0xfd, 0.49 -> 0, -0.5 -> -1 = 0xff, 126.5 -> 127 = 0x7f, 100.25 -> 100 = 0x64.
      const x = [-127, 2.5, -2.5, 0.49, -0.5, 126.5, 100.25, ...new Array<number>(25).fill(0)];
      const expected = [0x00, 0x3c, 0x81, 0x03, 0xfd, 0x00, 0xff, 0x7f, 0x64, ...new Array<number>(25).fill(0)];
      expect(blockBytes(engine, 'q8_0', x)).toEqual(expected);
      const q = Tensor.zeros('q8_0', [32]);
      engine.quantize(q, Tensor.f32([32], x));
      expect(dequantized(engine, q)).toEqual([-127, 3, -3, 0, -1, 127, 100, ...new Array<number>(25).fill(0)]);
    },
    'q8_0',
  );

  for (const dtype of BLOCK_DTYPES) {
    opIt(
      engine,
      'quantize',
      `${dtype}: writes and reads at tensor offsets (views of a larger buffer)`,
      () => {
        // Rows 1..2 of a (3, 512) f32 tensor into rows 1..2 of a (3, 512) block tensor; row 0 untouched.
        const x = Tensor.f32(
          [3, 512],
          Array.from({ length: 3 * 512 }, (_, i) => Math.sin(i)),
        );
        const whole = Tensor.zeros(dtype, [3, 512]);
        engine.quantize(whole.slice(0, 1, 3), x.slice(0, 1, 3));
        const alone = Tensor.zeros(dtype, [2, 512]);
        engine.quantize(alone, x.slice(0, 1, 3).contiguous());
        const rowBytes = whole.data.length / 3;
        expect(Array.from(whole.data.subarray(0, rowBytes)).every((b) => b === 0)).toBe(true);
        expect(Array.from(whole.data.subarray(rowBytes))).toEqual(Array.from(alone.data));
        const back = Tensor.zeros('f32', [3, 512]);
        engine.dequantize(back.slice(0, 1, 3), whole.slice(0, 1, 3));
        expect(Array.from(back.data.subarray(512))).toEqual(dequantized(engine, alone));
      },
      dtype,
    );
  }

  for (const dtype of ['q4_0', 'q4_1', 'q8_0'] as const) {
    const { bytes, rule } = ROUND_TRIP[dtype];
    opIt(
      engine,
      'quantize',
      `${dtype} round trip: ${rule} (property)`,
      () => {
        fc.assert(
          fc.property(blockRows, (x) => {
            const q = Tensor.zeros(dtype, [x.length]);
            engine.quantize(q, Tensor.f32([x.length], x));
            const back = dequantized(engine, q);
            let worst = -Infinity; // largest (error - bound) over all elements
            for (let b = 0; b < x.length / 32; b++) {
              const bound = ROUND_TRIP[dtype].bound(x.subarray(32 * b, 32 * b + 32), q.data, bytes * b);
              for (let j = 0; j < 32; j++)
                worst = Math.max(worst, Math.abs(back[32 * b + j] - x[32 * b + j]) - bound(j));
            }
            expect(worst).toBeLessThanOrEqual(0);
          }),
        );
      },
      dtype,
    );
  }

  opIt(
    engine,
    'quantize',
    'stores d as the round-to-nearest-even f16 of the f32 scale',
    () => {
      fc.assert(
        fc.property(blockRows, (x) => {
          const q = Tensor.zeros('q8_0', [32]);
          engine.quantize(q, Tensor.f32([32], x.subarray(0, 32)));
          const d = f32(Math.max(...x.subarray(0, 32).map(Math.abs)) / 127);
          expect(q.data[0] | (q.data[1] << 8)).toBe(f32ToF16(d));
        }),
      );
    },
    'q8_0',
  );
});

// ---------------------------------------------------------------------------------------------
// The engine's group-wise INT4.

/**
 * Round-trip slack, in steps (scales): half a step, plus f32 rounding of x / scale (at most 16 steps
 * spanned, U relative: 16 * 2^-24) and of (q - zero) * scale (|q - zero| <= 15: 15 * 2^-24), so under
 * 2^-19 steps in all.
 */
const INT4_HALF_STEP = 0.5 + 2 ** -19;

function quantizeInt4(
  engine: Engine,
  x: Float32Array,
  rows: number,
  cols: number,
  groupSize: Int4GroupSize,
  symmetric: boolean,
): { w: Int4Matrix; back: Float32Array } {
  const w = new Int4Matrix(rows, cols, { groupSize, symmetric });
  engine.quantizeInt4(w, Tensor.f32([rows, cols], x));
  const back = Tensor.zeros('f32', [rows, cols]);
  engine.dequantizeInt4(back, w);
  return { w, back: back.data };
}

/** Matrices with rows of cols = 128 * k, magnitudes 2^e from subnormal to near FLT_MAX, zeros, constant groups. */
const int4Matrices = fc
  .record({
    rows: fc.integer({ min: 1, max: 3 }),
    k: fc.integer({ min: 1, max: 3 }),
    e: fc.oneof(fc.integer({ min: -149, max: 127 }), fc.integer({ min: -4, max: 4 })),
    kind: fc.constantFrom('random', 'random', 'sparse', 'constant', 'zero', 'positive'),
    groupSize: fc.constantFrom<Int4GroupSize>(32, 64, 128, 'row'),
    symmetric: fc.boolean(),
    seed: fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 64, maxLength: 64 }),
  })
  .map((m) => {
    const cols = 128 * m.k;
    const x = Float32Array.from({ length: m.rows * cols }, (_, i) => {
      const u = m.seed[(i * 7) % 64];
      if (m.kind === 'zero' || (m.kind === 'sparse' && i % 5 !== 0)) return 0;
      if (m.kind === 'constant') return m.seed[Math.floor(i / 32) % 64] * 2 ** m.e; // constant over each 32
      return (m.kind === 'positive' ? 0.5 + Math.abs(u) / 2 : u) * 2 ** m.e; // |x| <= 2^127: finite
    });
    return { ...m, cols, x };
  });

forEachBackend('quantizeInt4 group-wise', (engine) => {
  opIt(engine, 'quantizeInt4', 'symmetric: hand-worked group', () => {
    // amax = 7 -> scale 1, zero 0; q = round(x): 7, -7, 4 (3.5 away from zero), -4, 2, -1 (-0.5), 0 (0.49), 0...
    // Nibbles (two's complement): 7 = 0x7, -7 = 0x9, 4 = 0x4, -4 = 0xc, 2 = 0x2, -1 = 0xf, 0 = 0x0.
    // Byte j = element 2j | element 2j+1 << 4: 0x97, 0xc4, 0xf2, 0x00, then zeros.
    const x = new Float32Array(32);
    x.set([7, -7, 3.5, -3.5, 2.4, -0.5, 0.49]);
    const { w, back } = quantizeInt4(engine, x, 1, 32, 32, true);
    expect(Array.from(w.packed)).toEqual([0x97, 0xc4, 0xf2, ...new Array<number>(13).fill(0)]);
    expect(Array.from(w.scales)).toEqual([1]);
    expect(Array.from(w.zeros)).toEqual([0]);
    expect(Array.from(back)).toEqual([7, -7, 4, -4, 2, -1, 0, ...new Array<number>(25).fill(0)]);
  });

  opIt(engine, 'quantizeInt4', 'asymmetric: hand-worked group', () => {
    // lo = -3, hi = 12 -> scale = 15 / 15 = 1, zero = round(-8 - (-3)) = -5; q = round(x) - 5:
    // 12 -> 7, -3 -> -8, 0 -> -5, 5.5 -> 6 - 5 = 1, -2.5 -> -3 - 5 = -8, 1 -> -4, zeros -> -5.
    // Nibbles: 7, 8, b, 1, 8, c, b...; bytes 0x87, 0x1b, 0xc8, then 0xbb.
    const x = new Float32Array(32);
    x.set([12, -3, 0, 5.5, -2.5, 1]);
    const { w, back } = quantizeInt4(engine, x, 1, 32, 'row', false);
    expect(Array.from(w.packed)).toEqual([0x87, 0x1b, 0xc8, ...new Array<number>(13).fill(0xbb)]);
    expect(Array.from(w.scales)).toEqual([1]);
    expect(Array.from(w.zeros)).toEqual([-5]);
    expect(Array.from(back)).toEqual([12, -3, 0, 6, -3, 1, ...new Array<number>(26).fill(0)]);
  });

  opIt(
    engine,
    'quantizeInt4',
    'all-zero groups get scale 2^-126 and decode to exactly 0; constant groups round-trip',
    () => {
      for (const symmetric of [true, false]) {
        const x = new Float32Array(64);
        x.fill(5, 32); // group 0 all zero, group 1 constant 5
        const { w, back } = quantizeInt4(engine, x, 1, 64, 32, symmetric);
        expect(w.scales[0]).toBe(2 ** -126);
        expect(Array.from(back.subarray(0, 32)).every((v) => v === 0)).toBe(true);
        for (let i = 32; i < 64; i++) expect(Math.abs(back[i] - 5)).toBeLessThanOrEqual(w.scales[1] * INT4_HALF_STEP);
      }
    },
  );

  opIt(engine, 'quantizeInt4', 'round trip within half a step, every group size, sym and asym (property)', () => {
    fc.assert(
      fc.property(int4Matrices, ({ rows, cols, x, groupSize, symmetric }) => {
        const { w, back } = quantizeInt4(engine, x, rows, cols, groupSize, symmetric);
        for (let g = 0; g < w.scales.length; g++) {
          expect(w.scales[g]).toBeGreaterThanOrEqual(2 ** -126);
          expect(Number.isFinite(w.scales[g])).toBe(true);
          expect(w.zeros[g]).toBeGreaterThanOrEqual(-8);
          expect(w.zeros[g]).toBeLessThanOrEqual(7);
          if (symmetric) expect(w.zeros[g]).toBe(0);
        }
        let worst = 0; // largest error in steps (scales) over all elements
        for (let i = 0; i < x.length; i++) {
          const g = Math.floor(i / cols) * w.groupsPerRow + Math.floor((i % cols) / w.groupSize);
          worst = Math.max(worst, Math.abs(back[i] - x[i]) / w.scales[g]);
        }
        expect(worst).toBeLessThanOrEqual(INT4_HALF_STEP);
      }),
      { numRuns: fcRuns(300) },
    );
  });

  opIt(engine, 'quantizeInt4', 'asymmetric range near the f32 limits does not overflow', () => {
    const x = new Float32Array(32);
    x[0] = 3e38;
    x[1] = -3e38;
    x[2] = 1e38;
    const { w, back } = quantizeInt4(engine, x, 1, 32, 32, false);
    expect(Number.isFinite(w.scales[0])).toBe(true);
    for (let i = 0; i < 32; i++) expect(Math.abs(back[i] - x[i])).toBeLessThanOrEqual(w.scales[0] * INT4_HALF_STEP);
  });
});
