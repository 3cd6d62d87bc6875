/**
 * Runs needle cases (needle.ts) through the engine: one dense prefill per case (chunked, so no
 * buffer grows with S^2), then for every method configuration, from that same prefill, greedy
 * decoding of the answer. Reports:
 *   exact   the greedy tokens spell the answer
 *   recall  per layer and query head, the share of decode steps whose attended set held the
 *           position that step must copy (the answer token's position in the needle); the set is
 *           per KV head: what SparQ's i2 held, oracle's top-k of the group's exact weights,
 *           H2O's positions not yet evicted, LM-Infinite's sinks and window, all for dense
 * The answer's first token comes from the prefill's last row (dense for every method, as prefill
 * is); the methods decode the rest.
 */
import {
  Engine,
  SparqTrace,
  Tensor,
  f16ToF32,
  type AttentionOptions,
  type BudgetParams,
  type H2OState,
  type KVCache,
  type KVDType,
  type SparqOptions,
  type SparqParams,
} from '@sparq/core';
import { attentionCost, type AttentionConfig } from '../attention-method.ts';
import { Session } from '../forward.ts';
import { argmax } from '../sampler.ts';
import type { Tokenizer } from '../tokenizer.ts';
import type { Model } from '../weights.ts';
import { configForTarget } from './budget.ts';
import { LM_INFINITE_SINKS } from './attention-stats.ts';
import { needleCase, type NeedleCase, type NeedleTask } from './needle.ts';

/** Prefill rows per forward call: the run state and the native prefill's score block stay small at 128k. */
export const NEEDLE_PREFILL_CHUNK = 512;
/** Compression targets of the needle sweep (spec.md §3's ratio to dense). */
export const NEEDLE_TARGETS: readonly number[] = [1 / 4, 1 / 8, 1 / 16];

export interface NeedleConfig {
  /** e.g. 'sparq 1/8'. */
  label: string;
  /** spec.md §3 ratio the parameters were chosen for (1 for dense). */
  target: number;
  config: AttentionConfig;
}

export interface NeedleOutcome {
  label: string;
  exact: boolean;
  output: string;
  /** (layers, heads) share of decode steps whose attended set held the step's answer position. */
  recall: number[][];
  /** spec.md §3 ratio to dense over the decode steps. */
  compression: number;
}

/** The configurations at each target for a case of `length` tokens and `steps` decode steps; dense first. */
export function needleConfigs(
  methods: readonly AttentionConfig['method'][],
  targets: readonly number[],
  length: number,
  steps: number,
  d: number,
): NeedleConfig[] {
  const sizes = Array.from({ length: Math.max(1, steps) }, (_, i) => length + 1 + i);
  const out: NeedleConfig[] = [{ label: 'dense', target: 1, config: configForTarget('dense', 1, sizes, d) }];
  for (const method of methods) {
    if (method === 'dense') continue;
    for (const target of targets)
      out.push({
        label: `${method} 1/${Math.round(1 / target)}`,
        target,
        config: configForTarget(method, target, sizes, d),
      });
  }
  return out;
}

/** An engine that records, per layer and KV head, whether each decode call's attended set held `target`. */
class RecallProbe extends Engine {
  target = -1;
  caches: readonly KVCache[] = [];
  /** (layers, kvHeads) decode calls that held the target, and calls. */
  held: Float64Array = new Float64Array(0);
  calls = 0;
  private nKvHeads = 1;

  start(caches: readonly KVCache[], target: number): void {
    this.caches = caches;
    this.nKvHeads = caches[0].nKvHeads;
    this.held = new Float64Array(caches.length * this.nKvHeads);
    this.calls = 0;
    this.target = target;
  }

  private record(cache: KVCache, holds: (kvh: number) => boolean): void {
    const layer = this.caches.indexOf(cache);
    if (layer < 0) return;
    if (layer === 0) this.calls++;
    for (let kvh = 0; kvh < this.nKvHeads; kvh++) if (holds(kvh)) this.held[layer * this.nKvHeads + kvh]++;
  }

  override attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void {
    super.attentionDecode(out, q, cache, options);
    this.record(cache, () => this.target < cache.nValid(0));
  }

  override sparqDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: SparqParams,
    options?: SparqOptions,
  ): void {
    const trace = options?.trace ?? new SparqTrace(1, q.shape[1], cache.nKvHeads, params.r, params.k);
    super.sparqDecode(out, q, cache, params, { ...options, trace });
    this.record(cache, (kvh) =>
      trace.i2.subarray(kvh * params.k, kvh * params.k + trace.i2Count[kvh]).includes(this.target),
    );
  }

  override topkDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    super.topkDecode(out, q, cache, params, options);
    this.record(cache, (kvh) => groupRank(this, q, cache, kvh, this.target) < Math.min(params.k, cache.nValid(0)));
  }

  override h2oDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    state: H2OState,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    const kept = Array.from(
      { length: this.nKvHeads },
      (_, kvh) => state.evicted[kvh * state.capacity + this.target] === 0,
    );
    super.h2oDecode(out, q, cache, state, params, options);
    this.record(cache, (kvh) => kept[kvh]);
  }

  override lmInfiniteDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    super.lmInfiniteDecode(out, q, cache, params, options);
    const S = cache.nValid(0);
    const k = Math.min(params.k, S);
    const sinks = Math.min(LM_INFINITE_SINKS, k - 1);
    this.record(cache, () => k >= S || this.target < sinks || this.target >= S - (k - sinks));
  }
}

/**
 * Rank of position `target` (0 = first) among the valid positions of KV head kvh by the group's summed
 * exact softmax weights (ties: the lower index first): oracle top-k keeps it when the rank is below k.
 */
function groupRank(engine: Engine, q: Tensor<'f32'>, cache: KVCache, kvh: number, target: number): number {
  const S = cache.nValid(0);
  const d = cache.headDim;
  const g = q.shape[1] / cache.nKvHeads;
  const keys = keyRows(engine, cache, kvh, S); // (S, d) as attention reads them
  const score = new Float64Array(S);
  const logits = new Float64Array(S);
  for (let t = 0; t < g; t++) {
    const qh = q.offset + (kvh * g + t) * d; // q (1, nHeads, d): head kvh * g + t
    let max = -Infinity;
    for (let j = 0; j < S; j++) {
      let dot = 0;
      for (let i = 0; i < d; i++) dot += q.data[qh + i] * keys[j * d + i];
      logits[j] = dot / Math.sqrt(d);
      max = Math.max(max, logits[j]);
    }
    let sum = 0;
    for (let j = 0; j < S; j++) sum += logits[j] = Math.exp(logits[j] - max);
    for (let j = 0; j < S; j++) score[j] += logits[j] / sum;
  }
  let rank = 0;
  for (let j = 0; j < S; j++) if (score[j] > score[target] || (score[j] === score[target] && j < target)) rank++;
  return rank;
}

/** f16 bits -> f32, all 65536 of them: widening is exact, and a table is faster than decoding each element. */
let f16Table: Float32Array | null = null;

/** The first S key rows of sequence 0, KV head kvh, decoded to f32 (S, d): block rows by the engine's dequantize. */
function keyRows(engine: Engine, cache: KVCache, kvh: number, S: number): Float32Array {
  const d = cache.headDim;
  const out = new Float32Array(S * d);
  const at = cache.rowOffset(0, kvh, 0); // a head's rows are contiguous
  if (cache.dtype === 'q8_0' || cache.dtype === 'q4_0') {
    engine.dequantize(
      Tensor.wrap('f32', out, [S * d]),
      Tensor.wrap(cache.dtype, (cache.k as Uint8Array).subarray(at, at + S * cache.rowStride), [S * d]),
    );
  } else if (cache.dtype === 'f16') {
    f16Table ??= Float32Array.from({ length: 65536 }, (_, bits) => f16ToF32(bits));
    for (let j = 0; j < S; j++)
      for (let i = 0; i < d; i++) out[j * d + i] = f16Table[cache.k[at + j * cache.rowStride + i]];
  } else {
    for (let j = 0; j < S; j++) for (let i = 0; i < d; i++) out[j * d + i] = cache.k[at + j * cache.rowStride + i];
  }
  return out;
}

export interface NeedleRunModel {
  engine: Engine;
  model: Model;
  kvDType: KVDType;
}

/** Every configuration on one case, from one shared dense prefill. */
export function runNeedleCase(
  m: NeedleRunModel,
  tokenizer: Tokenizer,
  c: NeedleCase,
  configs: readonly NeedleConfig[],
): NeedleOutcome[] {
  const { nLayers, nHeads, nKvHeads, headDim: d } = m.model.config;
  const g = nHeads / nKvHeads;
  const steps = c.answerTokens.length;
  const probe = new RecallProbe(m.engine.backend);
  // H2O's score state exists only in a session created for it; every other method runs on the same session.
  const h2o = configs.find((x) => x.config.method === 'h2o')?.config ?? configs[0].config;
  const session = new Session(probe, m.model, {
    capacity: c.prompt.length + steps,
    maxPrefill: NEEDLE_PREFILL_CHUNK,
    attention: h2o,
    kvDType: m.kvDType,
    kvLayout: 'k-twice',
  });
  const first = argmax(session.prefill(c.prompt));
  const afterPrefill = session.checkpoint();
  return configs.map(({ label, config }) => {
    session.restore(afterPrefill);
    session.setAttention(config);
    const out = [first];
    const held = new Float64Array(nLayers * nKvHeads);
    let calls = 0;
    for (let i = 1; i < steps; i++) {
      probe.start(session.caches, c.answerPositions[i]);
      out.push(argmax(session.decode(out[i - 1])));
      probe.held.forEach((v, j) => (held[j] += v));
      calls += probe.calls;
    }
    const recall = Array.from({ length: nLayers }, (_, l) =>
      Array.from({ length: nHeads }, (_, h) =>
        calls > 0 ? held[l * nKvHeads + Math.floor(h / g)] / calls : Number.NaN,
      ),
    );
    const output = tokenizer.decode(out);
    let compression = 0;
    for (let i = 1; i < steps; i++)
      compression +=
        attentionCost(config, c.prompt.length + i, d) /
        attentionCost({ ...config, method: 'dense' }, c.prompt.length + i, d);
    return {
      label,
      exact: output.trim() === c.answer,
      output,
      recall,
      compression: steps > 1 ? compression / (steps - 1) : 1,
    };
  });
}

export interface NeedleSweepOptions {
  tasks: readonly NeedleTask[];
  lengths: readonly number[];
  depths: readonly number[];
  methods: readonly AttentionConfig['method'][];
  targets: readonly number[];
  ngram: number;
  /** Seed of the keys and distractor depths (the case at index i of a length uses seed + i). */
  seed?: number;
  onCase?: (done: number, total: number, label: string) => void;
}

/** One configuration's outcome on one case. */
export interface NeedleRecord extends NeedleOutcome {
  task: NeedleTask;
  length: number;
  depth: number;
  method: AttentionConfig['method'];
  target: number;
  r: number;
  k: number;
  answer: string;
  /** The distractor needles' numbers (multikey; empty for passkey), to tell a wrong answer's source. */
  distractors: string[];
}

/** Every task x length x depth case, each with every configuration. */
export function runNeedleSweep(
  m: NeedleRunModel,
  tokenizer: Tokenizer,
  filler: readonly number[],
  o: NeedleSweepOptions,
): NeedleRecord[] {
  const records: NeedleRecord[] = [];
  const total = o.tasks.length * o.lengths.length * o.depths.length;
  let done = 0;
  for (const task of o.tasks) {
    for (const length of o.lengths) {
      o.depths.forEach((depth, i) => {
        o.onCase?.(done, total, `${task} ${length} depth ${Math.round(depth * 100)}%`);
        const c = needleCase(tokenizer, filler, task, length, depth, (o.seed ?? 1) + i, o.ngram);
        const configs = needleConfigs(o.methods, o.targets, length, c.answerTokens.length - 1, m.model.config.headDim);
        runNeedleCase(m, tokenizer, c, configs).forEach((outcome, j) => {
          const { config, target } = configs[j];
          records.push({
            task,
            length,
            depth,
            method: config.method,
            target,
            r: config.r,
            k: config.k,
            answer: c.answer,
            distractors: c.distractors.map((x) => x.value),
            ...outcome,
          });
        });
        done++;
      });
    }
  }
  o.onCase?.(done, total, 'done');
  return records;
}
