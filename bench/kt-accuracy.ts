/**
 * What a coarse copy of K transposed costs SparQ (issue 24; the numbers of docs/kv-cache.md).
 * SparQ's step 1 reads K transposed only to rank positions, so it may hold i8 / i4 / i2 codes
 * with an f16 scale per 64 positions instead of f16. Three measurements:
 *
 * 1. Synthetic top-k agreement: keys of Llama 3 8B's head shape (d 128, GQA group 4) with
 *    outliers as real keys have them (a few channels ~8x the rest, and a fraction of tokens with
 *    larger norms), queries aimed at random earlier keys; S from 512 to 32k, r = d/8, k = S/8.
 *    For each kT: the share of the f16 layout's chosen set i2 that it chooses too, and both
 *    layouts' recall of the exact dense top-k.
 * 2. The same agreement on stories260K's real queries and keys (S to 512, r = d/8 = 1, k = S/8),
 *    teacher-forced over the eval text with an f16 cache; each decode step also runs SparQ on a
 *    mirror cache per integer kT holding the same rows.
 * 3. `sparq eval` perplexity (its protocol: windows of 512, 64 warm-up positions): dense and
 *    SparQ at 1/4 and 1/8 of dense's data, for each KV row type with each kT, and K and V rows
 *    of different types (q8_0 / q4_0: K q8_0, V q4_0, llama.cpp's -ctk q8_0 -ctv q4_0; and the
 *    reverse, to show which half is sensitive). stories260K's head
 *    dim is 8, and q8_0 / q4_0 rows need multiples of 32, so the block types run on the same
 *    model with every head zero-padded to 32 components (the same function: llm's pad-heads.ts;
 *    its f16 perplexity matches the original).
 *    In that model a 32-value block holds one head's 8 values and 24 zeros, so the block scale
 *    is per head: kinder to q8_0 / q4_0 than a real 32-wide head. Said so in the docs.
 *
 *   pnpm exec tsx bench/kt-accuracy.ts [--quick] [--windows N] [--padded]
 * --padded: only the last table (stories260K with heads zero-padded to 32: f16, q8_0, q4_0,
 * q8_0 / q4_0 and q4_0 / q8_0 rows).
 * Default: ../shared/models/stories260K.bin and ../shared/data/tinystories_val.txt.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  Engine,
  KVCache,
  SparqTrace,
  Tensor,
  loadBackends,
  roundToF16,
  kvLabel,
  kvTypes,
  type KTDType,
  type KVTypeChoice,
  type SparqOptions,
  type SparqParams,
} from '@sparq/core';
import '@sparq/native';
import { denseGroupProbs } from '../packages/cli/src/commands/demo.ts';
import {
  PERPLEXITY_PROTOCOL,
  buildModel,
  configForTarget,
  denseNll,
  encodePieces,
  methodNll,
  mulberry32,
  openModel,
  padHeads,
  readModelFile,
  scoredSteps,
  summarize,
  syncMirror,
  textPieces,
  type AttentionConfig,
  type EvalModel,
  type Model,
} from '@sparq/llm';

const { values } = parseArgs({
  options: { quick: { type: 'boolean' }, windows: { type: 'string' }, padded: { type: 'boolean' } },
});
const quick = values.quick === true;
const windows = Number(values.windows ?? (quick ? 1 : 4));
const shared = (p: string) => new URL(`../../shared/${p}`, import.meta.url).pathname;
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native') ?? available[0];
const INTEGER_KT: readonly KTDType[] = ['i8', 'i4', 'i2'];
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

// ---- 1. Synthetic keys with outliers ----

/** A standard normal from a seeded uniform generator (Box-Muller). */
function normal(seed: number): () => number {
  const uniform = mulberry32(seed);
  return () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
}

/** The positions of `trace`'s i2 for KV head 0. */
const chosen = (trace: SparqTrace) => new Set(trace.i2.subarray(0, trace.i2Count[0]));

/** Share of `want` found in `got`. */
function overlap(got: Set<number>, want: Set<number>): number {
  let hits = 0;
  for (const j of want) if (got.has(j)) hits++;
  return want.size > 0 ? hits / want.size : 1;
}

/** Exact top-k of the group-summed dense probabilities (ties: lowest index). */
function denseTopK(K: Float32Array, q: Float32Array, S: number, d: number, g: number, k: number): Set<number> {
  const score = denseGroupProbs(q, K, S, 1, g, d)[0];
  const order = Array.from({ length: S }, (_, j) => j).sort((a, b) => score[b] - score[a] || a - b);
  return new Set(order.slice(0, k));
}

function synthetic(): void {
  const d = 128;
  const g = 4;
  const r = d / 8;
  const sizes = quick ? [512, 4096] : [512, 2048, 8192, 32768];
  const queries = quick ? 4 : 8;
  console.log(
    `\n1. Synthetic keys (d ${d}, GQA group ${g}, r = d/8 = ${r}, k = S/8, ${queries} queries per S; f16 rows)`,
  );
  console.log('   outliers: 4 of 128 channels x8, 2% of tokens x3; queries: a random earlier key x2 plus noise');
  console.log(
    `   ${'S'.padStart(6)}  ${'f16 recall'.padStart(10)}  ${INTEGER_KT.map((t) => `${t} vs f16 / recall`.padStart(20)).join('  ')}`,
  );
  for (const S of sizes) {
    const rand = normal(S);
    const channel = Float32Array.from({ length: d }, (_, i) => (i % 32 === 7 ? 8 : 1));
    const K = new Float32Array(S * d);
    for (let j = 0; j < S; j++) {
      const token = rand() > 2.054 ? 3 : 1; // P(N(0,1) > 2.054) = 2%
      for (let i = 0; i < d; i++) K[j * d + i] = rand() * channel[i] * token;
    }
    const stored = K.map(roundToF16); // what the f16 rows hold: dense attention's keys
    const V = Tensor.f32(
      [S, 1, d],
      Array.from({ length: S * d }, () => rand()),
    );
    const caches = new Map<KTDType, KVCache>();
    for (const kT of ['f16', ...INTEGER_KT] as KTDType[]) {
      const cache = new KVCache({ nKvHeads: 1, headDim: d, capacity: S, dtype: 'f16', kTDType: kT });
      engine.kvAppend(cache, 0, Tensor.f32([S, 1, d], K), V);
      caches.set(kT, cache);
    }
    const sums = { f16: 0, agree: new Map<KTDType, number>(), recall: new Map<KTDType, number>() };
    const k = S / 8;
    for (let n = 0; n < queries; n++) {
      const target = Math.floor((0.5 + 0.5 * Math.abs(Math.sin(n + S))) * (S - 1));
      const q = Float32Array.from({ length: g * d }, (_, e) => (2 * K[target * d + (e % d)]) / 8 + rand() * 0.5);
      const exact = denseTopK(stored, q, S, d, g, k);
      const sets = new Map<KTDType, Set<number>>();
      for (const [kT, cache] of caches) {
        const trace = new SparqTrace(1, g, 1, r, k);
        engine.sparqDecode(Tensor.zeros('f32', [1, g, d]), Tensor.f32([1, g, d], q), cache, { r, k }, { trace });
        sets.set(kT, chosen(trace));
      }
      sums.f16 += overlap(sets.get('f16')!, exact);
      for (const kT of INTEGER_KT) {
        sums.agree.set(kT, (sums.agree.get(kT) ?? 0) + overlap(sets.get(kT)!, sets.get('f16')!));
        sums.recall.set(kT, (sums.recall.get(kT) ?? 0) + overlap(sets.get(kT)!, exact));
      }
    }
    const cells = INTEGER_KT.map((kT) =>
      `${pct(sums.agree.get(kT)! / queries)} / ${pct(sums.recall.get(kT)! / queries)}`.padStart(20),
    );
    console.log(`   ${String(S).padStart(6)}  ${pct(sums.f16 / queries).padStart(10)}  ${cells.join('  ')}`);
  }
}

// ---- 2. Real queries and keys: stories260K ----

/** Runs every SparQ decode also on one mirror cache per integer kT and counts how often they choose as f16 does. */
class AgreementEngine extends Engine {
  readonly mirrors = new Map<KVCache, Map<KTDType, KVCache>>();
  readonly agree = new Map<KTDType, { sum: number; n: number }>(INTEGER_KT.map((t) => [t, { sum: 0, n: 0 }]));

  override sparqDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: SparqParams,
    options?: SparqOptions,
  ): void {
    const H = q.shape[1];
    const trace = new SparqTrace(1, H, cache.nKvHeads, params.r, params.k);
    super.sparqDecode(out, q, cache, params, { ...options, trace });
    const scratch = Tensor.zeros('f32', out.shape);
    for (const kT of INTEGER_KT) {
      const mirror = this.mirrorOf(cache, kT);
      const t2 = new SparqTrace(1, H, cache.nKvHeads, params.r, params.k);
      super.sparqDecode(scratch, q, mirror, params, { trace: t2 });
      const a = this.agree.get(kT)!;
      for (let h = 0; h < cache.nKvHeads; h++) {
        const f16Set = new Set(trace.i2.subarray(h * params.k, h * params.k + trace.i2Count[h]));
        a.sum += overlap(new Set(t2.i2.subarray(h * params.k, h * params.k + t2.i2Count[h])), f16Set);
        a.n++;
      }
    }
  }

  /** The mirror of `cache` (f16 rows) with kT `kT`, holding the same stored rows. */
  private mirrorOf(cache: KVCache, kT: KTDType): KVCache {
    let byKT = this.mirrors.get(cache);
    if (!byKT) this.mirrors.set(cache, (byKT = new Map()));
    let mirror = byKT.get(kT);
    if (!mirror) byKT.set(kT, (mirror = new KVCache({ ...cache.options, kTDType: kT })));
    syncMirror(engine, cache, mirror, () => {});
    return mirror;
  }
}

// ---- 3. Perplexity ----

function perplexity(
  model: Model,
  label: string,
  rows: readonly KVTypeChoice[],
  tokens: readonly number[],
  agreement?: AgreementEngine,
): void {
  const p = { ...PERPLEXITY_PROTOCOL, windows };
  const steps = scoredSteps(tokens.length, p);
  // Budgets of the unpadded model (head dim 8), so both models run the same r and k.
  const sparq = [1 / 4, 1 / 8].map((target) => ({ target, config: configForTarget('sparq', target, steps, 8) }));
  console.log(
    `\n${label}: ${windows} windows of ${p.window}, ${steps.length} scored steps; SparQ ${sparq.map(({ target, config: a }) => `1/${1 / target}: r ${a.r} k ${a.k} l ${a.l}`).join(', ')}`,
  );
  console.log(
    `   ${'KV (K/V)'.padEnd(9)} ${'kT'.padEnd(4)} ${'dense'.padStart(9)} ${sparq.map(({ target }) => `SparQ 1/${1 / target}`.padStart(11)).join(' ')}`,
  );
  for (const dtype of rows) {
    const m: EvalModel = { engine, model, kvDType: dtype, productPath: 'dequant' };
    const kRows = kvTypes(dtype).k; // K transposed is derived from the K rows
    const dense = denseNll(m, tokens, p);
    const densePpl = summarize(dense, dense).ppl;
    for (const kT of kRows === 'f32' ? ['f32', 'f16', ...INTEGER_KT] : ['f16', ...INTEGER_KT]) {
      const cells = sparq.map(({ config }) => {
        const run = methodNll(
          { ...m, kTDType: kT as KTDType, engine: agreement && dtype === 'f16' && kT === 'f16' ? agreement : engine },
          tokens,
          config as AttentionConfig,
          p,
        );
        return summarize(run.nll, dense).ppl.toFixed(4).padStart(11);
      });
      console.log(
        `   ${kvLabel(dtype).padEnd(9)} ${kT.padEnd(4)} ${densePpl.toFixed(4).padStart(9)} ${cells.join(' ')}`,
      );
    }
  }
}

const started = performance.now();
console.log(`kt-accuracy: backend ${engine.name}${quick ? ' (quick)' : ''}`);
const lm = openModel(engine, shared('models/stories260K.bin'));
const tokens = encodePieces(lm.tokenizer, textPieces(readFileSync(shared('data/tinystories_val.txt'), 'utf8')));
if (!values.padded) {
  synthetic();
  const agreement = new AgreementEngine(engine.backend);
  perplexity(lm.model, '3. stories260K (head dim 8)', ['f32', 'f16'], tokens, agreement);
  console.log(
    `\n2. stories260K step-2 agreement with f16 kT (real queries, SparQ runs above with f16 rows): ${INTEGER_KT.map((t) => `${t} ${pct(agreement.agree.get(t)!.sum / agreement.agree.get(t)!.n)}`).join(', ')}`,
  );
}
perplexity(
  buildModel(engine, padHeads(readModelFile(shared('models/stories260K.bin'), engine).loaded, 32)),
  '3. stories260K, heads zero-padded to 32',
  ['f16', 'q8_0', 'q4_0', { k: 'q8_0', v: 'q4_0' }, { k: 'q4_0', v: 'q8_0' }],
  tokens,
);
console.log(`\n${((performance.now() - started) / 1000).toFixed(0)} s`);
