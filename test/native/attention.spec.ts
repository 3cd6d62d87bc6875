/**
 * Native attention ops vs the reference engine (the oracle), on every kernel path
 * this CPU has (forced with the addon's forceKernelPath test hook), over random
 * shapes: odd d, S = 1, k >= S, r = d, GQA g in {1, 2, 4}, left padding, batch 2
 * with different lengths, f32 / f16 / q8_0 / q4_0 rows with every kT type they allow, both layouts.
 *
 * Tolerances (named, from the math):
 *   TOL_Y      outputs are convex combinations of V rows; f32 dot products of d terms
 *              (error <= d * U * sum|q_i k_i|, U = 2^-24) and a SIMD exp within 2 ulp move
 *              each weight by ~1e-6 relative at these sizes, so |dy| <= TOL_Y * (1 + max|V|)
 *              with TOL_Y = 1e-5 (the tolerance of spec.md §7's vectors).
 *   TOL_ALPHA  alpha is a sum of approximate probabilities: the same argument, 1e-5.
 *   EPS_SCORE  near-tie rule for index sets: native ranks f32 scores, the reference f64 sums
 *              of f32 probabilities, so a position may be swapped only if its reference score
 *              is within EPS_SCORE * (k'-th score) + 1e-12 of the k'-th score (1e-4: two
 *              orders above the score error, far below the gaps of random data).
 * Everything else must be exact: i1 (f64 sums in the reference's order), tau, the cache
 * contents after kvAppend (incl. the f64 vSum), H2O's evictions, and AttentionStats.
 */
import {
  AttentionStats,
  H2OState,
  KVCache,
  SparqTrace,
  Tensor,
  type Engine,
  type KTDType,
  type KVDType,
  type KVLayout,
} from '@sparq/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import { attentionAddon, type AttentionAddon } from '../../packages/native/lib/attention-ops.ts';
import { seeded } from '../conformance/numeric.ts';
import { kTFor } from '../conformance/oracle.ts';
import { keyScores } from '../../packages/reference/src/attention/attend.ts';
import { readKeyComponent, validPositions } from '../../packages/reference/src/attention/cache-read.ts';
import { forEachDecodeGroup } from '../../packages/reference/src/attention/group.ts';
import { softmaxRows } from '../../packages/reference/src/attention/softmax.ts';
import { engines, referenceEngine } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const TOL_Y = 1e-5;
const TOL_ALPHA = 1e-5;
const EPS_SCORE = 1e-4;
const RUNS = fcRuns(40);

const native = engines.find((e) => e.name === 'native');
const raw = native ? loadAddon() : null;
const addon: AttentionAddon | null = raw ? attentionAddon(raw) : null;
const PATHS = raw ? raw.kernelPaths().supported : [];

// ---------------------------------------------------------------- fixtures

interface Config {
  nKv: number;
  g: number;
  d: number;
  batch: number;
  lens: number[]; // appended tokens per sequence (padding included)
  pads: number[];
  dtype: KVDType;
  /** K transposed's type ('k-twice'); core's default for the dtype when absent. */
  kT?: KTDType;
  layout: KVLayout;
  seed: number;
}

/**
 * Random shapes. The defaults keep the reference fast; `long` draws the shapes where native
 * splits the work: prefills of more tokens than one block of query rows (kPrefillRows 16 in
 * attention_ops.cc), K / V longer than one 16 KB tile of rows, GQA groups past one block of 4 heads.
 * Block rows (q8_0, q4_0) take d in whole blocks of 32; integer kT columns longer than 64
 * positions (several scale blocks, vectors on both sides of a block edge) come with maxLen > 64.
 */
const configArb = (maxLen = 40, long = false): fc.Arbitrary<Config> =>
  fc.constantFrom<KVDType>('f32', 'f16', 'q8_0', 'q4_0').chain((dtype) =>
    fc
      .record({
        nKv: fc.integer({ min: 1, max: 2 }),
        g: long ? fc.constantFrom(1, 3, 5, 8) : fc.constantFrom(1, 2, 4),
        d:
          dtype === 'q8_0' || dtype === 'q4_0'
            ? fc.constantFrom(32, 64, 128)
            : long
              ? fc.constantFrom(31, 64, 128)
              : fc.oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(16, 33, 64)),
        batch: fc.integer({ min: 1, max: 2 }),
        lens: fc.array(fc.integer({ min: 1, max: maxLen }), { minLength: 2, maxLength: 2 }),
        padFrac: fc.array(fc.double({ min: 0, max: 0.5, noNaN: true }), { minLength: 2, maxLength: 2 }),
        dtype: fc.constant(dtype),
        kT: fc.constantFrom(...kTFor(dtype)),
        layout: fc.constantFrom<KVLayout>('k-twice', 'single-k'),
        seed: fc.integer({ min: 1, max: 2 ** 30 }),
      })
      .map(({ padFrac, ...c }) => ({ ...c, pads: c.lens.map((n, b) => Math.min(n - 1, Math.floor(padFrac[b] * n))) })),
  );

function values(rand: () => number, n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (2 * rand() - 1) * scale;
  return a;
}

/** The same cache built by the reference and by native (appended in up to 3 chunks per sequence). */
function buildPair(c: Config, extra = 0): { ref: KVCache; nat: KVCache; rand: () => number } {
  const rand = seeded(c.seed);
  const make = () =>
    new KVCache({
      nKvHeads: c.nKv,
      headDim: c.d,
      capacity: Math.max(...c.lens) + extra + 1,
      batch: c.batch,
      dtype: c.dtype,
      kTDType: c.layout === 'k-twice' ? c.kT : null,
      layout: c.layout,
    });
  const ref = make();
  const nat = make();
  for (let b = 0; b < c.batch; b++) {
    ref.reset(b, c.pads[b]);
    nat.reset(b, c.pads[b]);
    let done = 0;
    while (done < c.lens[b]) {
      const n = Math.min(c.lens[b] - done, 1 + Math.floor(rand() * c.lens[b]));
      const k = Tensor.f32([n, c.nKv, c.d], values(rand, n * c.nKv * c.d));
      const v = Tensor.f32([n, c.nKv, c.d], values(rand, n * c.nKv * c.d));
      referenceEngine.kvAppend(ref, b, k, v);
      native!.kvAppend(nat, b, k, v);
      done += n;
    }
  }
  return { ref, nat, rand };
}

function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]));
  return m;
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return Number.isNaN(m) ? Infinity : m;
}

function expectClose(ref: Tensor<'f32'>, nat: Tensor<'f32'>, cache: KVCache, what: string): void {
  const bound = TOL_Y * (1 + maxAbs(cache.vDType === 'f32' ? (cache.v as Float32Array) : new Float32Array([1])));
  const diff = maxDiff(ref.data, nat.data);
  expect(diff, `${what}: max|y_native - y_ref| ${diff} > ${bound}`).toBeLessThanOrEqual(bound);
}

function expectStats(ref: AttentionStats, nat: AttentionStats): void {
  expect({ ...nat }).toEqual({ ...ref });
}

function decodeQ(c: Config, rand: () => number, scale = 1): Tensor<'f32'> {
  return Tensor.f32([c.batch, c.nKv * c.g, c.d], values(rand, c.batch * c.nKv * c.g * c.d, scale));
}

/**
 * The near-tie rule, checked on the reference's own scores: positions in one set and not the
 * other must score within EPS_SCORE of the boundary (the k'-th best score among the positions
 * competing for the non-window slots). Returns the number of swapped positions.
 */
export function checkNearTies(
  score: (j: number) => number,
  refSet: readonly number[],
  natSet: readonly number[],
  competing: readonly number[],
  slots: number,
): number {
  const a = new Set(refSet);
  const b = new Set(natSet);
  const swapped = [...refSet.filter((j) => !b.has(j)), ...natSet.filter((j) => !a.has(j))];
  if (swapped.length === 0) return 0;
  const sorted = competing.map(score).sort((x, y) => y - x);
  const kth = sorted[slots - 1];
  for (const j of swapped) {
    const gap = Math.abs(score(j) - kth);
    if (gap > EPS_SCORE * Math.abs(kth) + 1e-12)
      throw new Error(`position ${j} differs but scores ${score(j)}, k'-th score ${kth}: gap ${gap} beyond EPS_SCORE`);
  }
  return swapped.length;
}

/**
 * Whether the reference's top-k ranking (topkDecode: each position's probabilities summed over the
 * group, computed as the reference computes them) has, for some KV head, its k'-th and (k'+1)-th
 * scores within EPS_SCORE of each other: native ranks by its own f32 probabilities (a SIMD exp),
 * so there it may keep the other position, and the outputs then differ by a whole term.
 */
function topkNearTie(cache: KVCache, q: Tensor<'f32'>, k: number): boolean {
  let near = false;
  forEachDecodeGroup(Tensor.zeros('f32', q.shape), q, cache, undefined, (group) => {
    const valid = validPositions(cache, group.seq);
    const n = valid.length;
    if (k >= n) return;
    const probs = new Float32Array(group.g * n); // (g, n)
    keyScores(probs, group, cache, valid, 1 / Math.sqrt(group.d));
    softmaxRows(probs, group.g, n);
    const score = Array.from({ length: n }, (_, j) => {
      let s = 0;
      for (let t = 0; t < group.g; t++) s += probs[t * n + j];
      return s;
    }).sort((a, b) => b - a);
    if (score[k - 1] - score[k] <= EPS_SCORE * score[k - 1] + 1e-12) near = true;
  });
  return near;
}

/**
 * Whether the reference's next H2O step has a near tie among its victims (h2o-decode.ts: per KV head,
 * the positions outside the recent window with the smallest accumulated weight, ties to the lowest
 * index): the last victim's and the first survivor's weights within `tol`, the bound the test puts
 * on native's weights, so native may evict the other. Two weights both exactly 0 (positions never
 * attended) tie alike in both engines and do not count.
 */
function h2oNearTie(cache: KVCache, state: H2OState, k: number, tol: number): boolean {
  const window = Math.max(1, Math.floor(k / 4));
  for (let b = 0; b < cache.batch; b++) {
    for (let h = 0; h < cache.nKvHeads; h++) {
      const base = (b * cache.nKvHeads + h) * cache.capacity;
      const alive = Array.from(validPositions(cache, b)).filter((j) => state.evicted[base + j] === 0);
      const victims = alive.length - k;
      const windowStart = cache.nPast[b] - window;
      const weights = alive
        .filter((j) => j < windowStart)
        .map((j) => state.acc[base + j])
        .sort((x, y) => x - y);
      if (victims <= 0 || victims >= weights.length) continue;
      const [last, next] = [weights[victims - 1], weights[victims]];
      if (next - last <= tol && !(last === 0 && next === 0)) return true;
    }
  }
  return false;
}

/** The reference's SparQ ranking scores (sum over the group of s_hat) for KV head (b, h), recomputed in f64 from its trace. */
function sparqScores(cache: KVCache, q: Tensor<'f32'>, trace: SparqTrace, b: number, h: number): Map<number, number> {
  const { nKvHeads, headDim: d } = cache;
  const g = q.shape[1] / nKvHeads;
  const i1 = Array.from(trace.i1.subarray((b * nKvHeads + h) * trace.r, (b * nKvHeads + h + 1) * trace.r));
  const first = cache.nPad[b];
  const last = cache.nPast[b];
  const score = new Map<number, number>();
  for (let t = 0; t < g; t++) {
    const head = h * g + t;
    const tau = trace.tau[b * q.shape[1] + head];
    const logits: number[] = [];
    for (let j = first; j < last; j++) {
      let s = 0;
      for (const i of i1) s += q.data[(b * q.shape[1] + head) * d + i] * readKeyComponent(cache, b, h, i, j);
      logits.push(s / tau);
    }
    const m = Math.max(...logits);
    const e = logits.map((x) => Math.exp(x - m));
    const z = e.reduce((x, y) => x + y, 0);
    e.forEach((x, idx) => score.set(first + idx, (score.get(first + idx) ?? 0) + x / z));
  }
  return score;
}

function runSparq(
  engine: Engine,
  cache: KVCache,
  q: Tensor<'f32'>,
  params: { r: number; k: number; l: number; reallocate: boolean },
) {
  const out = Tensor.zeros('f32', q.shape);
  const stats = new AttentionStats();
  const trace = new SparqTrace(cache.batch, q.shape[1], cache.nKvHeads, params.r, params.k);
  engine.sparqDecode(out, q, cache, params, { stats, trace });
  return { out, stats, trace };
}

/** Compares one SparQ call: exact i1 / tau / stats, i2 up to near ties, y and alpha within tolerance when i2 agrees. */
function compareSparq(
  ref: KVCache,
  nat: KVCache,
  q: Tensor<'f32'>,
  params: { r: number; k: number; l: number; reallocate: boolean },
): number {
  const a = runSparq(referenceEngine, ref, q, params);
  const b = runSparq(native!, nat, q, params);
  expect(Array.from(b.trace.i1)).toEqual(Array.from(a.trace.i1));
  expect(Array.from(b.trace.tau)).toEqual(Array.from(a.trace.tau));
  expect(Array.from(b.trace.i2Count)).toEqual(Array.from(a.trace.i2Count));
  expectStats(a.stats, b.stats);
  let swapped = 0;
  const g = q.shape[1] / ref.nKvHeads;
  for (let bb = 0; bb < ref.batch; bb++) {
    for (let h = 0; h < ref.nKvHeads; h++) {
      const bh = bb * ref.nKvHeads + h;
      const count = a.trace.i2Count[bh];
      const setA = Array.from(a.trace.i2.subarray(bh * params.k, bh * params.k + count));
      const setB = Array.from(b.trace.i2.subarray(bh * params.k, bh * params.k + count));
      if (setA.join() === setB.join()) {
        for (let t = 0; t < g; t++) {
          const head = bb * q.shape[1] + h * g + t;
          expect(Math.abs(a.trace.alpha[head] - b.trace.alpha[head])).toBeLessThanOrEqual(TOL_ALPHA);
          const at = head * ref.headDim;
          const dy = maxDiff(a.out.data.subarray(at, at + ref.headDim), b.out.data.subarray(at, at + ref.headDim));
          expect(dy).toBeLessThanOrEqual(TOL_Y * (1 + maxAbs(ref.v as Float32Array) + 1));
        }
        continue;
      }
      // Different sets: allowed only at near ties of the non-window ranking.
      const score = sparqScores(ref, q, a.trace, bb, h);
      const n = ref.nValid(bb);
      const local = Math.min(params.l, n);
      const windowStart = ref.nPast[bb] - local;
      const competing = [...score.keys()].filter((j) => (count <= local ? j >= windowStart : j < windowStart));
      const slots = count <= local ? count : count - local;
      swapped += checkNearTies((j) => score.get(j)!, setA, setB, competing, slots);
    }
  }
  return swapped;
}

// ---------------------------------------------------------------- suites

if (!native || !addon) {
  describe.skip('native attention (native backend unavailable)', () => it('needs the native backend', () => {}));
} else {
  describe('native attention: near-tie rule (the checker itself)', () => {
    it('accepts swaps within EPS_SCORE of the k-th score and rejects others', () => {
      const scores = [0.5, 0.3, 0.3 * (1 + 1e-6), 0.1];
      expect(checkNearTies((j) => scores[j], [0, 1], [0, 2], [0, 1, 2, 3], 2)).toBe(2);
      expect(() => checkNearTies((j) => scores[j], [0, 1], [0, 3], [0, 1, 2, 3], 2)).toThrow(/beyond EPS_SCORE/);
    });
  });

  for (const path of PATHS) {
    describe(`native attention [${path}]`, () => {
      beforeAll(() => {
        expect(raw!.forceKernelPath(path)).toBe(path);
        expect(addon!.attnKernel()).toBe(path);
      });
      afterAll(() => {
        raw!.forceKernelPath(null);
      });

      it('kvAppend writes the same rows, columns, kT scales and f64 vSum as the reference (bit-exact)', () => {
        fc.assert(
          fc.property(fc.oneof(configArb(), configArb(200, true)), (c) => {
            const { ref, nat } = buildPair(c);
            expect(Array.from(nat.nPast)).toEqual(Array.from(ref.nPast));
            expect(nat.k).toEqual(ref.k);
            expect(nat.v).toEqual(ref.v);
            expect(nat.kT).toEqual(ref.kT);
            expect(nat.kTScale).toEqual(ref.kTScale);
            expect(nat.vSum).toEqual(ref.vSum);
          }),
          { numRuns: RUNS },
        );
      });

      const denseCases = [
        ['', configArb(), RUNS],
        [' (long prompts, several tiles, GQA groups up to 8)', configArb(200, true), Math.ceil(RUNS / 4)],
      ] as const;
      for (const [what, arb, runs] of denseCases)
        it(`attentionDecode and attentionPrefill match the reference, stats equal${what}`, () => {
          fc.assert(
            fc.property(arb, fc.integer({ min: 0, max: 1000 }), (c, pick) => {
              const { ref, nat, rand } = buildPair(c);
              const q = decodeQ(c, rand, 2);
              for (const op of ['decode', 'prefill'] as const) {
                const seq = pick % c.batch;
                const rows = op === 'decode' ? c.batch : 1 + (pick % ref.nValid(seq));
                const qq =
                  op === 'decode' ? q : Tensor.f32([rows, c.nKv * c.g, c.d], values(rand, rows * c.nKv * c.g * c.d, 2));
                const [outA, outB] = [Tensor.zeros('f32', qq.shape), Tensor.zeros('f32', qq.shape)];
                const [sa, sb] = [new AttentionStats(), new AttentionStats()];
                if (op === 'decode') {
                  referenceEngine.attentionDecode(outA, qq, ref, { stats: sa });
                  native.attentionDecode(outB, qq, nat, { stats: sb });
                } else {
                  referenceEngine.attentionPrefill(outA, qq, ref, seq, { stats: sa });
                  native.attentionPrefill(outB, qq, nat, seq, { stats: sb });
                }
                expectClose(outA, outB, ref, op);
                expectStats(sa, sb);
              }
            }),
            { numRuns: runs },
          );
        });

      it('attentionPrefill: a token never weighs a later position (an infinite V there leaves its row finite)', () => {
        // f16 KV turns 1e5 into infinity. Only the last token sees the last position; native
        // scores a block of tokens together, so a zero weight times infinity would give NaN.
        const c: Config = {
          nKv: 1,
          g: 2,
          d: 16,
          batch: 1,
          lens: [40],
          pads: [0],
          dtype: 'f16',
          layout: 'single-k',
          seed: 7,
        };
        const { ref, nat, rand } = buildPair(c);
        const k = Tensor.f32([1, 1, c.d], values(rand, c.d));
        const v = Tensor.f32([1, 1, c.d], values(rand, c.d).fill(1e5, 0, 1));
        referenceEngine.kvAppend(ref, 0, k, v);
        native!.kvAppend(nat, 0, k, v);
        const rows = 20;
        const q = Tensor.f32([rows, c.g, c.d], values(rand, rows * c.g * c.d));
        const [outA, outB] = [Tensor.zeros('f32', q.shape), Tensor.zeros('f32', q.shape)];
        referenceEngine.attentionPrefill(outA, q, ref, 0);
        native!.attentionPrefill(outB, q, nat, 0);
        const before = (rows - 1) * c.g * c.d; // every row but the last token's
        expect(outB.data.subarray(0, before).every(Number.isFinite)).toBe(true);
        expect(maxDiff(outA.data.subarray(0, before), outB.data.subarray(0, before))).toBeLessThanOrEqual(TOL_Y * 2);
        expect(outB.data[before]).toBe(outA.data[before]); // the last token's first element: infinite in both
      });

      it('sparqDecode: i1, tau, stats exact; i2 equal except near ties; y, alpha within tolerance', () => {
        let swapped = 0;
        fc.assert(
          fc.property(
            configArb(),
            fc.record({
              r: fc.integer({ min: 1, max: 64 }),
              k: fc.integer({ min: 1, max: 50 }),
              l: fc.integer({ min: 0, max: 12 }),
              reallocate: fc.boolean(),
            }),
            (c, p) => {
              const { ref, nat, rand } = buildPair(c);
              swapped += compareSparq(ref, nat, decodeQ(c, rand, 2), { ...p, r: Math.min(p.r, c.d) });
            },
          ),
          { numRuns: RUNS },
        );
        expect(swapped).toBeLessThanOrEqual(RUNS); // near ties are rare in random data
      });

      it('sparqDecode with r = d and k >= nValid equals dense attention (reallocate on and off)', () => {
        fc.assert(
          fc.property(configArb(), fc.boolean(), (c, reallocate) => {
            const { nat, rand } = buildPair(c);
            const q = decodeQ(c, rand);
            const dense = Tensor.zeros('f32', q.shape);
            native.attentionDecode(dense, q, nat);
            const { out } = runSparq(native, nat, q, { r: c.d, k: Math.max(...c.lens) + 3, l: 0, reallocate });
            expect(maxDiff(dense.data, out.data)).toBeLessThanOrEqual(TOL_Y * 2);
          }),
          { numRuns: RUNS },
        );
      });

      it('topkDecode and lmInfiniteDecode match the reference, stats equal (topkDecode: except at near ties)', () => {
        let ties = 0;
        fc.assert(
          fc.property(configArb(), fc.integer({ min: 1, max: 50 }), (c, k) => {
            const { ref, nat, rand } = buildPair(c);
            const q = decodeQ(c, rand, 2);
            const tie = topkNearTie(ref, q, k);
            ties += tie ? 1 : 0;
            for (const op of ['topkDecode', 'lmInfiniteDecode'] as const) {
              const [outA, outB] = [Tensor.zeros('f32', q.shape), Tensor.zeros('f32', q.shape)];
              const [sa, sb] = [new AttentionStats(), new AttentionStats()];
              referenceEngine[op](outA, q, ref, { k }, { stats: sa });
              native[op](outB, q, nat, { k }, { stats: sb });
              if (!(tie && op === 'topkDecode')) expectClose(outA, outB, ref, op);
              expectStats(sa, sb);
            }
          }),
          { numRuns: RUNS },
        );
        expect(ties).toBeLessThanOrEqual(RUNS / 4); // near ties are rare in random data
      });

      it('h2oDecode over several steps: same outputs, same evictions, acc within tolerance (up to a near tie)', () => {
        let ties = 0;
        fc.assert(
          fc.property(configArb(24), fc.integer({ min: 1, max: 20 }), (c, k) => {
            const steps = 4;
            const { ref, nat, rand } = buildPair(c, steps);
            const [stA, stB] = [new H2OState(ref), new H2OState(nat)];
            for (let step = 0; step < steps; step++) {
              // A near tie among the victims: either eviction is right, and the runs part here.
              if (h2oNearTie(ref, stA, k, TOL_ALPHA * steps)) {
                ties++;
                return;
              }
              const q = decodeQ(c, rand, 2);
              const [outA, outB] = [Tensor.zeros('f32', q.shape), Tensor.zeros('f32', q.shape)];
              const [sa, sb] = [new AttentionStats(), new AttentionStats()];
              referenceEngine.h2oDecode(outA, q, ref, stA, { k }, { stats: sa });
              native.h2oDecode(outB, q, nat, stB, { k }, { stats: sb });
              expectClose(outA, outB, ref, `h2o step ${step}`);
              expectStats(sa, sb);
              expect(Array.from(stB.evicted)).toEqual(Array.from(stA.evicted));
              expect(maxDiff(stA.acc, stB.acc)).toBeLessThanOrEqual(TOL_ALPHA * steps);
              // The next token for every sequence.
              for (let b = 0; b < c.batch; b++) {
                const kv = [0, 1].map(() => Tensor.f32([1, c.nKv, c.d], values(rand, c.nKv * c.d)));
                referenceEngine.kvAppend(ref, b, kv[0], kv[1]);
                native.kvAppend(nat, b, kv[0], kv[1]);
              }
            }
          }),
          { numRuns: Math.ceil(RUNS / 2) },
        );
        expect(ties).toBeLessThanOrEqual(RUNS / 4); // near ties are rare in random data
      });

      it('exact ties go to the lowest index: duplicated keys give the reference i2 exactly', () => {
        // Keys repeat with period 3, so every score appears (at least) S/3 times: the k-th is always tied.
        // g = 1 ranks the logits themselves (negative ones too), g = 2 the summed probabilities.
        const cases = [
          [30, 7, 0],
          [30, 8, 2],
          [3000, 100, 5],
          [5000, 64, 0],
          [6000, 750, 0],
          [8200, 1025, 3],
        ];
        for (const [g, [S, k, l]] of [1, 2].flatMap((g) => cases.map((x) => [g, x] as const))) {
          const c: Config = {
            nKv: 1,
            g,
            d: 9,
            batch: 1,
            lens: [S, S],
            pads: [0, 0],
            dtype: 'f32',
            layout: 'k-twice',
            seed: 7,
          };
          const rand = seeded(11);
          const base = values(rand, 3 * c.d);
          const kData = new Float32Array(S * c.d);
          for (let j = 0; j < S; j++) kData.set(base.subarray((j % 3) * c.d, ((j % 3) + 1) * c.d), j * c.d);
          const vData = values(rand, S * c.d);
          const caches = [referenceEngine, native].map((e) => {
            const cache = new KVCache({ nKvHeads: 1, headDim: c.d, capacity: S });
            e.kvAppend(cache, 0, Tensor.f32([S, 1, c.d], kData), Tensor.f32([S, 1, c.d], vData));
            return cache;
          });
          const q = decodeQ(c, rand);
          const params = { r: 4, k, l, reallocate: true };
          const a = runSparq(referenceEngine, caches[0], q, params);
          const b = runSparq(native, caches[1], q, params);
          expect(Array.from(b.trace.i2)).toEqual(Array.from(a.trace.i2));
          expect(maxDiff(a.out.data, b.out.data)).toBeLessThanOrEqual(TOL_Y * 2);
        }
      });

      it('long rows take the sampled-threshold selection: i2 equals the reference up to near ties', () => {
        // Rows over 4096 scores are sampled (topk_select.cc); k small or a realistic share (S/16 .. S/2).
        const kArb = fc.oneof(
          fc.integer({ min: 1, max: 200 }),
          fc.constantFrom(16, 8, 4, 2).map((div) => -div),
        );
        fc.assert(
          fc.property(
            fc.integer({ min: 4100, max: 9000 }),
            kArb,
            fc.integer({ min: 0, max: 40 }),
            fc.integer({ min: 1, max: 1e6 }),
            (S, kOrDiv, l, seed) => {
              const k = kOrDiv > 0 ? kOrDiv : Math.floor(S / -kOrDiv);
              const c: Config = {
                nKv: 1,
                g: 1,
                d: 16,
                batch: 1,
                lens: [S, S],
                pads: [0, 0],
                dtype: 'f32',
                layout: 'k-twice',
                seed,
              };
              const { ref, nat, rand } = buildPair(c);
              compareSparq(ref, nat, decodeQ(c, rand, 4), { r: 4, k, l, reallocate: true });
            },
          ),
          { numRuns: fcRuns(8) },
        );
      });
    });
  }

  describe('native attention: threads', () => {
    it('1 and 2 threads give identical results (work split by sequence and KV head)', () => {
      // Large enough to use the pool: calls under 2^16 K/V elements run on the calling thread
      // (attention_ops.cc); here 2 * (2 sequences * 2 KV heads) * 1197 positions * 24 = 229,824.
      const c: Config = {
        nKv: 2,
        g: 2,
        d: 24,
        batch: 2,
        lens: [1200, 800],
        pads: [3, 0],
        dtype: 'f16',
        layout: 'k-twice',
        seed: 5,
      };
      const { nat, rand } = buildPair(c);
      const q = decodeQ(c, rand);
      const before = addon.attnThreads();
      const run = (threads: number) => {
        addon.attnSetThreads(threads);
        const dense = Tensor.zeros('f32', q.shape);
        native.attentionDecode(dense, q, nat);
        return [
          Array.from(dense.data),
          Array.from(runSparq(native, nat, q, { r: 8, k: 32, l: 4, reallocate: true }).out.data),
        ];
      };
      expect(run(2)).toEqual(run(1));
      addon.attnSetThreads(before);
      expect(native.info().threads).toBeGreaterThanOrEqual(1);
    });

    it('attentionPrefill with H2O scores equals attentionPrefill then h2oSeed bit for bit, fused or not', () => {
      // The prefill seeds in one pass over K when the KV heads cover the threads (1 or 2 threads
      // here), and runs the two ops apart otherwise (4 threads); 40 tokens are several blocks of
      // query rows (16 / g tokens each), and the call is large enough for the pool.
      const c: Config = {
        nKv: 2,
        g: 2,
        d: 64,
        batch: 1,
        lens: [700],
        pads: [5],
        dtype: 'f16',
        layout: 'k-twice',
        seed: 9,
      };
      const { nat, rand } = buildPair(c);
      const rows = 40;
      const q = Tensor.f32([rows, c.nKv * c.g, c.d], values(rand, rows * c.nKv * c.g * c.d, 2));
      const seeded = (apart: boolean) => {
        const out = Tensor.zeros('f32', q.shape);
        const state = new H2OState(nat);
        state.acc.fill(0.25); // seeding adds to what is there
        const stats = new AttentionStats();
        if (apart) {
          native.attentionPrefill(out, q, nat, 0, { stats });
          native.h2oSeed(state, q, nat, 0);
        } else native.attentionPrefill(out, q, nat, 0, { stats, h2o: state });
        return [Array.from(out.data), Array.from(state.acc), stats.kElements, stats.vElements, stats.ioElements];
      };
      const before = addon.attnThreads();
      addon.attnSetThreads(1);
      const want = seeded(true);
      for (const threads of [1, 2, 4]) {
        addon.attnSetThreads(threads);
        expect(seeded(false), `${threads} threads`).toEqual(want);
      }
      addon.attnSetThreads(before);
    });
  });

  describe('native attention: bad buffers passed straight to the addon throw, never crash', () => {
    const cache = new KVCache({ nKvHeads: 2, headDim: 8, capacity: 16, batch: 1 });
    cache.nPast[0] = 4;
    const q = new Float32Array(4 * 8);
    const out = new Float32Array(4 * 8);
    it('short q / out', () => {
      expect(() => addon.attnDecode(cache, q.subarray(1), out, 4)).toThrow(RangeError);
      expect(() => addon.attnSparq(cache, q, out.subarray(0, 8), 4, 2, 2, 0, true)).toThrow(RangeError);
      expect(() => addon.attnPrefill(cache, 0, q, out, 2, 4)).toThrow(RangeError);
    });
    it('cache buffers shorter than their dims, or of the wrong type', () => {
      expect(() => addon.attnDecode({ ...cache, k: new Float32Array(3) } as unknown as KVCache, q, out, 4)).toThrow(
        RangeError,
      );
      expect(() =>
        addon.attnDecode({ ...cache, v: new Uint16Array(cache.v.length) } as unknown as KVCache, q, out, 4),
      ).toThrow(TypeError);
      expect(() => addon.attnDecode({ ...cache, kT: new Float32Array(5) } as unknown as KVCache, q, out, 4)).toThrow(
        RangeError,
      );
      expect(() => addon.attnDecode({ ...cache, vSum: new Float64Array(1) } as unknown as KVCache, q, out, 4)).toThrow(
        RangeError,
      );
      expect(() =>
        addon.attnDecode({ ...cache, nPast: new Int32Array([99]) } as unknown as KVCache, q, out, 4),
      ).toThrow(RangeError);
      expect(() => addon.attnDecode({ ...cache, kDType: 'f16' } as unknown as KVCache, q, out, 4)).toThrow(TypeError);
      expect(() => addon.attnDecode({ ...cache, vDType: 'f16' } as unknown as KVCache, q, out, 4)).toThrow(TypeError);
      expect(() => addon.attnDecode({ ...cache, vDType: 'q4_0' } as unknown as KVCache, q, out, 4)).toThrow(
        'cache.headDim 8 must be a multiple of 32 with vDType q4_0',
      );
      expect(() => addon.attnDecode({ ...cache, vDType: 'q5_0' } as unknown as KVCache, q, out, 4)).toThrow(
        'cache.vDType q5_0, expected f32 | f16 | q8_0 | q4_0',
      );
      expect(() => addon.attnDecode(null as unknown as KVCache, q, out, 4)).toThrow(TypeError);
    });
    it('trace, H2O state, stats and appended rows too short; bad counts', () => {
      const trace = {
        i1: new Int32Array(1),
        i2: new Int32Array(64),
        i2Count: new Int32Array(2),
        alpha: new Float32Array(4),
        tau: new Float32Array(4),
      };
      expect(() => addon.attnSparq(cache, q, out, 4, 4, 8, 0, true, null, trace)).toThrow(RangeError);
      expect(() => addon.attnH2O(cache, q, out, 4, 4, new Float32Array(3), new Uint8Array(32))).toThrow(RangeError);
      expect(() => addon.attnPrefill(cache, 0, q, out, 1, 4, null, new Float32Array(3))).toThrow(RangeError);
      expect(() => addon.attnTopk(cache, q, out, 4, 2, new Float64Array(2))).toThrow(RangeError);
      expect(() => addon.attnKvAppend(cache, 0, new Float32Array(8), new Float32Array(16), 1)).toThrow(RangeError);
      expect(() => addon.attnKvAppend(cache, 0, new Float32Array(16 * 13), new Float32Array(16 * 13), 13)).toThrow(
        RangeError,
      );
      expect(() => addon.attnDecode(cache, q, out, 3)).toThrow(RangeError);
      expect(() => addon.attnLmInfinite(cache, q, out, 4, -1)).toThrow(RangeError);
      expect(cache.nPast[0]).toBe(4);
    });
  });
}
