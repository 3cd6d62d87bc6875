/**
 * Integer q · K over q8_0 / q4_0 rows (the reference's int8-key-scores.ts; native
 * src/attention_int8_simd.h) on every kernel path this CPU has, against the reference, through the
 * addon's attnKeyScores test hook: the scores the attention ops compute before the softmax, unscaled.
 *
 * - Integer sums bit for bit: keys and queries whose every block has the step 1 (integer values, one
 *   of them 127 or -127 per block, or -8 for q4_0 keys, so that the quantizers keep the values as
 *   codes). Every score is then an integer below 2^24, which f32 holds exactly whatever the order of
 *   summation, so native must equal the reference exactly; a wrong code, lane, sign or bias moves a
 *   block's sum by at least 1.
 * - Random values: the kernels scale each block's exact sum in f32 lanes, so they differ from the
 *   reference's f64 sum by f32 rounding only. A lane takes one fma per block step and the lanes are
 *   added in a tree of at most log2(16) levels before the final sum, so with T = sum_i |k_i q_i| (the
 *   dequantized key and query) |native - reference| <= TOL_ROUNDINGS(d) * U * T, TOL_ROUNDINGS(d) =
 *   d / 32 + 4 + 2 (the product dk dq is exact; one rounding per fma, per tree level, and the last
 *   f32 store); dotBound's second-order margin is inside the + 2.
 */
import { KVCache, Tensor, type KVDType } from '@sparq/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { attentionAddon } from '../../packages/native/lib/attention-ops.ts';
import { readRow } from '../../packages/reference/src/attention/cache-read.ts';
import { int8KeyScores } from '../../packages/reference/src/attention/int8-key-scores.ts';
import { quantizeQ8_0 } from '../../packages/reference/src/ops/activations-q8-0.ts';
import { quantizeBytes } from '../../packages/reference/src/ops/quantize.ts';
import { U, seeded } from '../conformance/numeric.ts';
import { addon, missing } from '../support/addon.ts';
import { fcRuns } from '../support/runs.ts';

const RUNS = fcRuns(40);
const TOL_ROUNDINGS = (d: number) => d / 32 + 6;
const PATHS = addon ? addon.kernelPaths().supported : [];
const attn = addon ? attentionAddon(addon) : null;

type BlockKV = Extract<KVDType, 'q8_0' | 'q4_0'>;

interface Case {
  dtype: BlockKV;
  d: number;
  n: number;
  g: number;
  seed: number;
}

// d: one block, odd and even block counts (AVX-512 takes blocks in pairs), the usual 64 and 128, and 256;
// g past 8 takes native's tiles of rows (with n past one tile for d = 256).
const caseArb = fc.record({
  dtype: fc.constantFrom<BlockKV>('q8_0', 'q4_0'),
  d: fc.constantFrom(32, 64, 96, 128, 160, 256),
  n: fc.integer({ min: 1, max: 150 }),
  g: fc.integer({ min: 1, max: 12 }),
  seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
});

/** Values whose blocks all quantize with step 1: integers in [-top, top], the block's first `top * sign`. */
function unitBlocks(rand: () => number, count: number, top: number, low: number): Float32Array {
  const x = new Float32Array(count);
  for (let i = 0; i < count; i++) x[i] = Math.floor(rand() * (top - low + 1)) + low;
  for (let b = 0; b < count; b += 32) x[b] = low === -8 ? -8 : rand() < 0.5 ? top : -top;
  return x;
}

/** A cache of n K rows from keys (n, d), the reference's scores (g, n) of q (g, d), and T = sum |k q| per score. */
function referenceScores(c: Case, keys: Float32Array, q: Float32Array) {
  const { dtype, d, n, g } = c;
  const cache = new KVCache({ nKvHeads: 1, headDim: d, capacity: n, dtype });
  const k = cache.k as Uint8Array;
  for (let j = 0; j < n; j++) quantizeBytes(dtype, k, cache.kRowOffset(0, 0, j), keys, j * d, d);
  const scores = new Float32Array(g * n);
  const group = { seq: 0, kvh: 0, g, d, q, qAt: 0, out: new Float32Array(g * d), outAt: 0 };
  const positions = Int32Array.from({ length: n }, (_, j) => j);
  int8KeyScores(scores, group, cache, positions, 1);
  // T from the dequantized key rows and the dequantized query blocks.
  const acts = quantizeQ8_0(new Tensor('f32', q, [g, d]), g, d);
  const row = new Float32Array(d);
  const abs = new Float64Array(g * n);
  for (let j = 0; j < n; j++) {
    readRow(row, cache, 'k', cache.kRowOffset(0, 0, j));
    for (let t = 0; t < g; t++)
      for (let i = 0; i < d; i++)
        abs[t * n + j] += Math.abs(row[i] * acts.q[t * d + i] * acts.dx[((t * d + i) / 32) | 0]);
  }
  return { bytes: k.subarray(0, cache.kRowOffset(0, 0, n - 1) + cache.kRowStride), scores, abs };
}

function nativeScores(c: Case, bytes: Uint8Array, q: Float32Array, path: string): Float32Array {
  const scores = new Float32Array(c.g * c.n).fill(NaN);
  expect(attn!.attnKeyScores(c.dtype, bytes, c.d, c.n, q, c.g, scores)).toBe(path);
  return scores;
}

describe.skipIf(!addon)(`integer key scores (native vs reference)${addon ? '' : `: skipped, ${missing}`}`, () => {
  afterAll(() => {
    addon!.forceKernelPath(null);
  });

  for (const path of PATHS) {
    it(`[${path}] unit-step blocks: every score equals the reference's exactly (the integer sums)`, () => {
      expect(addon!.forceKernelPath(path)).toBe(path);
      fc.assert(
        fc.property(caseArb, (c) => {
          const rand = seeded(c.seed);
          const keys = c.dtype === 'q8_0' ? unitBlocks(rand, c.n * c.d, 127, -127) : unitBlocks(rand, c.n * c.d, 7, -8);
          const q = unitBlocks(rand, c.g * c.d, 127, -127);
          const ref = referenceScores(c, keys, q);
          expect(Array.from(nativeScores(c, ref.bytes, q, path))).toEqual(Array.from(ref.scores));
        }),
        { numRuns: RUNS },
      );
    });

    it(`[${path}] random values: within f32 rounding of the reference`, () => {
      expect(addon!.forceKernelPath(path)).toBe(path);
      fc.assert(
        fc.property(caseArb, (c) => {
          const rand = seeded(c.seed);
          const keys = Float32Array.from({ length: c.n * c.d }, () => (rand() * 2 - 1) * 3);
          const q = Float32Array.from({ length: c.g * c.d }, () => (rand() * 2 - 1) * 5);
          const ref = referenceScores(c, keys, q);
          const got = nativeScores(c, ref.bytes, q, path);
          for (let e = 0; e < got.length; e++)
            expect(Math.abs(got[e] - ref.scores[e])).toBeLessThanOrEqual(TOL_ROUNDINGS(c.d) * U * ref.abs[e]);
        }),
        { numRuns: RUNS },
      );
    });
  }

  it('refuses a head dimension that is not whole blocks, naming it', () => {
    expect(() =>
      attn!.attnKeyScores('q8_0', new Uint8Array(68), 48, 1, new Float32Array(48), 1, new Float32Array(1)),
    ).toThrow(/d must be a positive multiple of 32/);
  });
});
