/**
 * `sparq demo`: a synthetic decode workload comparing dense attention, SparQ and
 * the baselines (spec.md §2 and 3) at compression ratios of about 1/2, 1/4 and 1/8.
 *
 * Workload (seeded, deterministic): values N(0, 1); keys N(0, 1) except d/8
 * outlier channels (scale 4); each query head has a fixed heavy-tailed direction
 * (Student-t, 2 degrees of freedom, per component, and the same outlier
 * channels boosted 4x) mixed with a fresh draw of the same law each step, scaled so dense scores have a
 * spread of about 2.5. Sharing the outlier channels between q and k is what
 * real models show and what SparQ exploits (the paper, section 3): a few
 * components of q carry most of every score q·k. Prefill = appending S prompt tokens' K and V;
 * then 1 warm-up step (not measured: JIT, and H2O's first step sees everything)
 * and T measured decode steps, each appending one token then running every method.
 */
import {
  AttentionStats,
  H2OState,
  KVCache,
  SparqTrace,
  Tensor,
  loadBackends,
  selectBackend,
  type Engine,
  type OpName,
} from '@sparq/core';
import { mulberry32 } from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { isInt, number, parseFlags } from '../flags.ts';

/** The seeded generator of the demo's data (the conformance oracle imports it from here). */
export const prng = mulberry32;

interface Method {
  name: string;
  params: string;
  /** spec.md §3's data-transfer formula over dense's, at the prompt length. */
  formula: number;
  /** Runs one step; returns, per KV head of sequence 0, the positions attended. */
  step(engine: Engine, out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, stats: AttentionStats): number[][];
  stats: AttentionStats;
  seconds: number;
  agree: number;
  agreeTotal: number;
  err2: number;
}

/** Longest synthetic sequence, and most elements of one K or V copy (1 GiB of f32): the demo holds several copies. */
const DEMO_MAX_SEQ = 1 << 20;
const DEMO_MAX_ELEMENTS = 1 << 28;

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);

export const demoCommand: Command = {
  name: 'demo',
  summary: 'compare dense, SparQ and the baselines on a synthetic heavy-tailed decode workload',
  usage: `sparq demo [--backend NAME] [--seq S] [--steps T] [--heads H] [--kv-heads N] [--head-dim D] [--seed N]

Synthetic decode (S prompt tokens, then T measured steps) with heavy-tailed
queries. For compression ratios about 1/2, 1/4, 1/8 it runs SparQ (r = ratio*d,
k = ratio*S/2, l = k/4), oracle top-k (k = ratio*S), H2O and LM-Infinite (k from
their spec.md §3 formulas) and prints, per method: parameters, spec.md §3's formula
ratio, the counted ratio (elements the kernels read / dense's), top-k agreement
(fraction of dense's top-k' positions, by summed group probability, that the
method attended, k' = the method's k), output error vs dense (relative L2) and
time per step. Defaults: S 1024, T 8, H 8, N = H, D 64, seed 1.`,
  async run(argv) {
    const values = parseFlags(argv, {
      backend: { type: 'string' },
      seq: { type: 'string' },
      steps: { type: 'string' },
      heads: { type: 'string' },
      'kv-heads': { type: 'string' },
      'head-dim': { type: 'string' },
      seed: { type: 'string' },
    });
    const int = (flag: keyof typeof values, fallback: number, min: number, max: number): number =>
      number(flag, values[flag] as string | undefined, fallback, isInt(min, max), `an integer in [${min}, ${max}]`);
    const S = int('seq', 1024, 16, DEMO_MAX_SEQ),
      T = int('steps', 8, 1, 100_000),
      H = int('heads', 8, 1, 256),
      d = int('head-dim', 64, 8, 1024);
    // mulberry32 takes 32 bits of seed.
    const seed = int('seed', 1, 0, 2 ** 32 - 1);
    const nKv = int('kv-heads', H, 1, H);
    if (H % nKv !== 0) throw new UsageError(`--heads ${H} must be a multiple of --kv-heads ${nKv}`);
    if ((S + T) * nKv * d > DEMO_MAX_ELEMENTS)
      throw new UsageError(
        `--seq ${S} --steps ${T} --kv-heads ${nKv} --head-dim ${d} need ${(S + T) * nKv * d} cache elements per copy, at most ${DEMO_MAX_ELEMENTS} (1 GiB of f32)`,
      );
    const g = H / nKv;
    const engine = await demoBackend(values.backend);
    process.stderr.write(
      `demo: backend ${engine.name}, S ${S}, T ${T}, heads ${H}, KV heads ${nKv}, d ${d}, seed ${seed}\n`,
    );

    // ---- workload ----
    const rand = prng(seed);
    const normal = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
    const studentT2 = () => normal() / Math.sqrt((normal() ** 2 + normal() ** 2) / 2);
    const capacity = S + 1 + T;
    const heavy = new Float32Array(d).fill(1); // (d) channel scales: 4 on the outlier channels of q and k
    for (let c = 0; c < Math.max(1, d >> 3); c++) heavy[Math.floor(rand() * d)] = 4;
    const keys = new Float32Array(capacity * nKv * d); // (capacity, nKv, d): our copy, for dense top-k
    const base = Float32Array.from({ length: H * d }, (_, e) => studentT2() * heavy[e % d]); // (H, d) heavy-tailed query directions
    const cache = new KVCache({ nKvHeads: nKv, headDim: d, capacity });
    const append = (n: number) => {
      const at = cache.nPast[0];
      const k = Tensor.zeros('f32', [n, nKv, d]);
      const v = Tensor.zeros('f32', [n, nKv, d]);
      for (let e = 0; e < n * nKv * d; e++) {
        k.data[e] = normal() * heavy[e % d];
        v.data[e] = normal();
      }
      keys.set(k.data, at * nKv * d);
      engine.kvAppend(cache, 0, k, v);
    };
    const query = (): Tensor<'f32'> => {
      const q = Tensor.zeros('f32', [1, H, d]);
      for (let h = 0; h < H; h++) {
        // Half a fixed per-head direction, half fresh each step: queries change token to token.
        for (let i = 0; i < d; i++) q.data[h * d + i] = 0.5 * base[h * d + i] + studentT2() * heavy[i];
        // Scale so the score spread q·k / sqrt(d) is about 2.5 (attention neither flat nor one-hot).
        let spread = 0;
        for (let i = 0; i < d; i++) spread += (q.data[h * d + i] * heavy[i]) ** 2;
        for (let i = 0; i < d; i++) q.data[h * d + i] *= (2.5 * Math.sqrt(d)) / Math.sqrt(spread + 1e-30);
      }
      return q;
    };

    // ---- methods, with parameters from spec.md §3's formulas ----
    const dense = 2 * S * d + 2 * d;
    const methods: Method[] = [];
    const add = (name: string, params: string, formula: number, step: Method['step']) =>
      methods.push({
        name,
        params,
        formula: formula / dense,
        step,
        stats: new AttentionStats(),
        seconds: 0,
        agree: 0,
        agreeTotal: 0,
        err2: 0,
      });
    const allValid = () => [range(cache.nPad[0], cache.nPast[0])];
    add(
      'dense',
      '-',
      dense,
      (e, out, q, c, stats) => (e.attentionDecode(out, q, c, { stats }), Array(nKv).fill(allValid()[0])),
    );
    for (const ratio of [1 / 2, 1 / 4, 1 / 8]) {
      const label = `1/${1 / ratio}`;
      const r = Math.max(1, Math.round(ratio * d)),
        k = Math.max(1, Math.round((ratio * S) / 2)),
        l = Math.floor(k / 4);
      add(`sparq ${label}`, `r=${r} k=${k} l=${l}`, S * r + 2 * k * d + 4 * d, (e, out, q, c, stats) => {
        const trace = new SparqTrace(1, H, nKv, r, k);
        e.sparqDecode(out, q, c, { r, k, l }, { stats, trace });
        return range(0, nKv).map((h) => Array.from(trace.i2.subarray(h * k, h * k + trace.i2Count[h])));
      });
      const ko = Math.max(1, Math.round(ratio * S));
      add(`oracle ${label}`, `k=${ko}`, S * d + ko * d + 2 * d, (e, out, q, c, stats) => {
        e.topkDecode(out, q, c, { k: ko }, { stats });
        return range(0, nKv).map(() => null as unknown as number[]); // its choice is dense's top-k by definition
      });
      const kh = Math.max(1, Math.floor((ratio * dense - 2 * d - 2 * S) / (2 * d)));
      const state = new H2OState(cache);
      add(`h2o ${label}`, `k=${kh} l=${Math.floor(kh / 4)}`, 2 * kh * d + 2 * d + 2 * S, (e, out, q, c, stats) => {
        const kept = range(0, nKv).map((h) => allValid()[0].filter((j) => state.evicted[h * capacity + j] === 0));
        e.h2oDecode(out, q, c, state, { k: kh }, { stats });
        return kept;
      });
      const kl = Math.max(1, Math.round((ratio * dense - 2 * d) / (2 * d)));
      add(`lminf ${label}`, `k=${kl} sinks=${Math.min(16, kl - 1)}`, 2 * kl * d + 2 * d, (e, out, q, c, stats) => {
        e.lmInfiniteDecode(out, q, c, { k: kl }, { stats });
        const valid = allValid()[0];
        const sinks = Math.min(16, kl - 1);
        const kept =
          valid.length <= kl ? valid : [...valid.slice(0, sinks), ...valid.slice(valid.length - (kl - sinks))];
        return range(0, nKv).map(() => kept);
      });
    }
    const budget = (m: Method) => Number(/k=(\d+)/.exec(m.params)?.[1] ?? 0);

    // ---- prefill, then decode steps ----
    append(S);
    let denseNorm2 = 0; // sum of |y_dense|^2 over the measured steps
    for (let step = 0; step <= T; step++) {
      append(1);
      const q = query();
      const yDense = Tensor.zeros('f32', [1, H, d]);
      engine.attentionDecode(yDense, q, cache);
      if (step > 0) for (const y of yDense.data) denseNorm2 += y * y;
      const probs = denseGroupProbs(q.data, keys, cache.nPast[0], nKv, g, d); // (nKv, positions)
      for (const m of methods) {
        const out = Tensor.zeros('f32', [1, H, d]);
        const stats = step === 0 ? new AttentionStats() : m.stats; // step 0: warm-up, not counted
        const t0 = performance.now();
        const attended = m.step(engine, out, q, cache, stats);
        if (step === 0) continue;
        m.seconds += (performance.now() - t0) / 1000;
        for (let e = 0; e < H * d; e++) m.err2 += (out.data[e] - yDense.data[e]) ** 2;
        // Agreement: how many of dense's top-k' positions (k' = the method's budget) were attended.
        const kb = m.name === 'dense' ? 0 : Math.min(budget(m), cache.nValid(0));
        for (let h = 0; h < nKv && kb > 0; h++) {
          const top = topPositions(probs[h], kb);
          const seen = new Set(attended[h] ?? top);
          m.agree += top.filter((j) => seen.has(j)).length;
          m.agreeTotal += kb;
        }
      }
      process.stderr.write(`demo: step ${step}/${T}${step === 0 ? ' (warm-up)' : ''}\n`);
    }

    // ---- table ----
    const rows = methods.map((m) => [
      m.name,
      m.params,
      m.formula.toFixed(3),
      (m.stats.total / methods[0].stats.total).toFixed(3),
      m.agreeTotal ? m.agree / m.agreeTotal : 1,
      Math.sqrt(m.err2 / denseNorm2),
      ((m.seconds / T) * 1000).toFixed(2),
    ]);
    const header = ['method', 'params', 'formula', 'counted', 'top-k agree', 'rel L2 err', 'ms/step'];
    const cells = [
      header,
      ...rows.map(
        (r) =>
          [r[0], r[1], r[2], r[3], (r[4] as number).toFixed(3), (r[5] as number).toExponential(2), r[6]] as string[],
      ),
    ];
    const widths = header.map((_, c) => Math.max(...cells.map((r) => r[c].length)));
    for (const r of cells)
      process.stdout.write(
        r
          .map((x, c) => x.padEnd(widths[c]))
          .join('  ')
          .trimEnd() + '\n',
      );
    process.stdout.write(
      `formula = spec.md §3 elements / dense at S ${S}; counted = elements the kernels counted / dense's; top-k agree = fraction of dense's top-k' positions (by summed group probability) the method attended; rel L2 err = ||y - y_dense|| / ||y_dense|| over ${T} steps\n`,
    );
    return 0;
  },
};

/** Dense attention probabilities summed over each KV head's group: (nKv) rows of (n) positions, from our f32 copy of K. */
export function denseGroupProbs(
  q: Float32Array,
  keys: Float32Array,
  n: number,
  nKv: number,
  g: number,
  d: number,
): Float64Array[] {
  return range(0, nKv).map((h) => {
    const sum = new Float64Array(n);
    // Each query head of the group: scores, softmax, added into the group's sum.
    for (let t = 0; t < g; t++) {
      const scores = new Float64Array(n);
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        let dot = 0;
        for (let i = 0; i < d; i++) dot += q[(h * g + t) * d + i] * keys[(j * nKv + h) * d + i];
        max = Math.max(max, (scores[j] = dot / Math.sqrt(d)));
      }
      let total = 0;
      for (let j = 0; j < n; j++) total += scores[j] = Math.exp(scores[j] - max);
      for (let j = 0; j < n; j++) sum[j] += scores[j] / total;
    }
    return sum;
  });
}

/** The k positions of largest p (ties: lowest index). */
function topPositions(p: Float64Array, k: number): number[] {
  return range(0, p.length)
    .sort((a, b) => p[b] - p[a] || a - b)
    .slice(0, k);
}

const DEMO_OPS: OpName[] = [
  'kvAppend',
  'attentionDecode',
  'sparqDecode',
  'topkDecode',
  'h2oDecode',
  'lmInfiniteDecode',
];

/** The named backend, else the best available one that implements every op the demo runs. */
async function demoBackend(name: string | undefined): Promise<Engine> {
  if (name !== undefined || process.env.SPARQ_BACKEND)
    return selectBackend(name !== undefined ? { backend: name } : {});
  const { available } = await loadBackends();
  for (const engine of available) {
    const missing = DEMO_OPS.filter((op) => !engine.has(op));
    if (missing.length === 0) return engine;
    process.stderr.write(`demo: skipping backend ${engine.name}: does not implement ${missing.join(', ')}\n`);
  }
  return selectBackend();
}
