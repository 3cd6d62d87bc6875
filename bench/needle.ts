/**
 * The kernel-level needle (issue 25): no model. A KV cache of S random positions (f16, one KV head,
 * d 128, values uniform in [-1, 1)) with one planted key at a random position p, aligned with the
 * group's queries (the direction of their sum) and scaled so that its mean logit over the group
 * stands PLANT_SIGMAS standard deviations of the random logits above zero. One decode step per
 * trial; recall = share of trials whose attended set held p:
 *   sparq    SparQ's i2 (l 0) at r, k
 *   oracle   SparQ with r = d (its approximate scores are then the exact ones: spec.md §2), at k
 *   h2o      positions not evicted after the step, its scores seeded by h2oSeed from 16 random
 *            prefill queries at the end of the cache (none aligned with the needle)
 *   lminf    by its definition: p among the 16 sinks or the k - 16 newest
 * One random cache per S and trial serves every group size: each writes its needle's key into it
 * and puts back the key it replaced (filling 1M positions is most of the bench's time).
 *   pnpm exec tsx bench/needle.ts [--quick]        (--quick: S up to 64k, 2 trials)
 * Needs the native backend. At S = 1M the cache takes 768 MB.
 */
import { H2OState, KVCache, SparqTrace, Tensor, f16ToF32, f32ToF16, loadBackends } from '@sparq/core';
import { LM_INFINITE_SINKS, mulberry32 } from '@sparq/llm';
import '@sparq/native';
import { markdownTable, type Cell } from '../packages/cli/src/report/markdown-table.ts';

const quick = process.argv.includes('--quick');
const D = 128;
const PLANT_SIGMAS = 6;
const SIZES = quick ? [4096, 65536] : [4096, 65536, 1 << 20];
const GROUPS = [1, 4, 8];
const RS = [8, 16, 32, 64];
const KS = [64, 1024];
const TRIALS = quick ? 2 : 4;
const PREFILL_ROWS = 16;
const CHUNK = 4096;

const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native');
if (!engine) throw new Error('bench/needle.ts needs the native backend (pnpm build:native)');

/**
 * S random positions: keys and values uniform in [-1, 1). Built once per S and trial (the fill is
 * most of the bench's time at 1M positions); each group size then plants its needle in it.
 */
function randomCache(S: number, seed: number): KVCache {
  const random = mulberry32(seed);
  const cache = new KVCache({ nKvHeads: 1, headDim: D, capacity: S, dtype: 'f16', layout: 'k-twice' });
  const k = Tensor.zeros('f32', [CHUNK, 1, D]);
  const v = Tensor.zeros('f32', [CHUNK, 1, D]);
  for (let pos = 0; pos < S; pos += CHUNK) {
    const n = Math.min(CHUNK, S - pos);
    for (let i = 0; i < n * D; i++) {
      k.data[i] = 2 * random() - 1;
      v.data[i] = 2 * random() - 1;
    }
    engine!.kvAppend(cache, 0, n === CHUNK ? k : k.slice(0, 0, n), n === CHUNK ? v : v.slice(0, 0, n));
  }
  return cache;
}

/**
 * The needle's key for the group q (1, g, d): c u, u the direction of the group's summed query, c
 * setting its mean logit over the group PLANT_SIGMAS standard deviations of the random logits above zero.
 */
function needleKey(q: Tensor<'f32'>): Float32Array {
  const g = q.shape[1];
  const u = new Float64Array(D);
  for (let t = 0; t < g; t++) for (let i = 0; i < D; i++) u[i] += q.data[t * D + i];
  const norm = Math.hypot(...u);
  let meanDot = 0; // mean over the group of q_t . u
  let sigma = 0; // mean std of a random logit: |q_t| sqrt(1/3) / sqrt(d)
  for (let t = 0; t < g; t++) {
    let dot = 0;
    let sq = 0;
    for (let i = 0; i < D; i++) {
      dot += (q.data[t * D + i] * u[i]) / norm;
      sq += q.data[t * D + i] ** 2;
    }
    meanDot += dot / g;
    sigma += Math.sqrt(sq / 3 / D) / g;
  }
  const c = (PLANT_SIGMAS * sigma * Math.sqrt(D)) / meanDot;
  return Float32Array.from(u, (x) => (c * x) / norm);
}

/**
 * Writes `key` at position p of both copies of K (the rows and K transposed, f16 as kvAppend
 * rounds it) and returns the key it replaced. V and its running sum are untouched.
 */
function writeKey(cache: KVCache, p: number, key: Float32Array): Float32Array {
  const row = cache.kRowOffset(0, 0, p);
  const old = new Float32Array(D);
  for (let i = 0; i < D; i++) {
    old[i] = f16ToF32(cache.k[row + i]);
    cache.k[row + i] = cache.kT![cache.columnOffset(0, 0, i) + p] = f32ToF16(key[i]);
  }
  return old;
}

function randomRows(rows: number, heads: number, seed: number): Tensor<'f32'> {
  const random = mulberry32(seed);
  const t = Tensor.zeros('f32', [rows, heads, D]);
  for (let i = 0; i < t.size; i++) t.data[i] = 2 * random() - 1;
  return t;
}

/** Whether SparQ (r, k, l 0) selected p. */
function sparqHolds(cache: KVCache, q: Tensor<'f32'>, r: number, k: number, p: number): boolean {
  const trace = new SparqTrace(1, q.shape[1], 1, r, k);
  engine!.sparqDecode(Tensor.zeros('f32', q.shape), q, cache, { r, k, l: 0, reallocate: true }, { trace });
  return trace.i2.subarray(0, trace.i2Count[0]).includes(p);
}

/** Whether H2O, seeded from PREFILL_ROWS random queries, keeps p through one decode step at budget k. */
function h2oHolds(cache: KVCache, q: Tensor<'f32'>, k: number, p: number, seed: number): boolean {
  const state = new H2OState(cache);
  engine!.h2oSeed(state, randomRows(PREFILL_ROWS, q.shape[1], seed), cache, 0);
  engine!.h2oDecode(Tensor.zeros('f32', q.shape), q, cache, state, { k });
  return state.evicted[p] === 0;
}

const lminfHolds = (S: number, k: number, p: number) =>
  k >= S || p < Math.min(LM_INFINITE_SINKS, k - 1) || p >= S - (k - Math.min(LM_INFINITE_SINKS, k - 1));

const header = ['S', 'g', 'k', ...RS.map((r) => `sparq r=${r}`), 'oracle', 'h2o', 'lminf'];
const rows: Cell[][] = [];
for (const S of SIZES) {
  // hits[g][k][column]
  const hits = GROUPS.map(() => KS.map(() => new Array(RS.length + 3).fill(0)));
  const started = performance.now();
  for (let trial = 0; trial < TRIALS; trial++) {
    const cache = randomCache(S, 1000 * trial + 11);
    GROUPS.forEach((g, gi) => {
      const seed = 1000 * trial + g;
      const q = randomRows(1, g, seed);
      // The needle anywhere but the 16 sinks and the last 1024 positions (where LM-Infinite sees it trivially).
      const p = 16 + Math.floor(mulberry32(seed + 7)() * (S - 16 - 1024));
      const replaced = writeKey(cache, p, needleKey(q));
      KS.forEach((k, ki) => {
        const h = hits[gi][ki];
        RS.forEach((r, ri) => (h[ri] += sparqHolds(cache, q, r, k, p) ? 1 : 0));
        h[RS.length] += sparqHolds(cache, q, D, k, p) ? 1 : 0;
        h[RS.length + 1] += h2oHolds(cache, q, k, p, seed + 13) ? 1 : 0;
        h[RS.length + 2] += lminfHolds(S, k, p) ? 1 : 0;
      });
      writeKey(cache, p, replaced);
    });
  }
  GROUPS.forEach((g, gi) =>
    KS.forEach((k, ki) => rows.push([S, g, k, ...hits[gi][ki].map((h: number) => (h / TRIALS).toFixed(2))])),
  );
  process.stderr.write(`S ${S}: ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
process.stdout.write(
  `Recall of the planted position (${TRIALS} trials per row; needle at ${PLANT_SIGMAS} sigma; f16 KV, d ${D})\n\n`,
);
process.stdout.write(markdownTable(header, rows) + '\n');
