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
  type KVTypeChoice,
  type SparqOptions,
  type SparqParams,
} from '@sparq/core';
import { attentionCost, type AttentionConfig } from '../attention-method.ts';
import { Session } from '../forward.ts';
import type { SessionCheckpoint } from '../session-checkpoint.ts';
import { argmax } from '../sampler.ts';
import type { Tokenizer } from '../tokenizer.ts';
import type { Model } from '../weights.ts';
import { configForTarget } from './budget.ts';
import { LM_INFINITE_SINKS } from './attention-stats.ts';
import {
  commonPrefix,
  needleAnswer,
  needleCases,
  type NeedleCase,
  type NeedleCaseOptions,
  type NeedleTask,
} from './needle.ts';

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
  const { keys, at, stride } = keyRows(engine, cache, kvh, S); // row j at at + j * stride, as attention reads it
  const f16 =
    cache.kDType === 'f16' ? (f16Table ??= Float32Array.from({ length: 65536 }, (_, bits) => f16ToF32(bits))) : null;
  const score = new Float64Array(S);
  const logits = new Float64Array(S);
  const scale = Math.sqrt(d);
  for (let t = 0; t < g; t++) {
    const qh = q.offset + (kvh * g + t) * d; // q (1, nHeads, d): head kvh * g + t
    let max = -Infinity;
    for (let j = 0; j < S; j++) {
      const row = at + j * stride;
      let dot = 0;
      if (f16) for (let i = 0; i < d; i++) dot += q.data[qh + i] * f16[keys[row + i]];
      else for (let i = 0; i < d; i++) dot += q.data[qh + i] * keys[row + i];
      logits[j] = dot / scale;
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

/**
 * The first S key rows of sequence 0, KV head kvh: f32 and f16 rows where the cache holds them
 * (f16 as bits, widened by the caller), block rows decoded to f32 by the engine's dequantize.
 */
function keyRows(
  engine: Engine,
  cache: KVCache,
  kvh: number,
  S: number,
): { keys: ArrayLike<number>; at: number; stride: number } {
  const d = cache.headDim;
  const at = cache.kRowOffset(0, kvh, 0); // a head's rows are contiguous
  if (cache.kDType !== 'q8_0' && cache.kDType !== 'q4_0') return { keys: cache.k, at, stride: cache.kRowStride };
  const out = new Float32Array(S * d);
  engine.dequantize(
    Tensor.wrap('f32', out, [S * d]),
    Tensor.wrap(cache.kDType, (cache.k as Uint8Array).subarray(at, at + S * cache.kRowStride), [S * d]),
  );
  return { keys: out, at: 0, stride: d };
}

export interface NeedleRunModel {
  engine: Engine;
  model: Model;
  kvDType: KVTypeChoice;
}

/** Every configuration on one case, from one shared dense prefill. */
export function runNeedleCase(
  m: NeedleRunModel,
  tokenizer: Tokenizer,
  c: NeedleCase,
  configs: readonly NeedleConfig[],
): NeedleOutcome[] {
  return new NeedleRunner(m, tokenizer, c.prompt.length + c.answerTokens.length).run(c, configs);
}

/**
 * Runs cases one after another on one session. Cases whose prompts begin alike (the filler before
 * the first needle) share the prefill of that prefix: run() saves a checkpoint where its prompt
 * stops agreeing with the next case's, and the next case's prefill starts there. The checkpoint is
 * taken at a multiple of the prefill chunk, so every chunk is the one a prefill from position 0
 * forwards: each case's caches, H2O scores and outputs are those of its own whole prefill, bit for bit.
 */
export class NeedleRunner {
  private session: Session | null = null;
  /** The prefix the session can restore: its tokens (the first `at` of `prompt`) and the checkpoint. */
  private saved: { at: number; prompt: readonly number[]; checkpoint: SessionCheckpoint } | null = null;
  private readonly probe: RecallProbe;
  readonly m: NeedleRunModel;
  readonly tokenizer: Tokenizer;
  /** Positions the session holds: the longest prompt and its answer. */
  readonly capacity: number;
  /** Prompt positions forwarded by the prefills so far (to report the prefix's saving). */
  prefilled = 0;

  constructor(m: NeedleRunModel, tokenizer: Tokenizer, capacity: number) {
    this.m = m;
    this.tokenizer = tokenizer;
    this.capacity = capacity;
    this.probe = new RecallProbe(m.engine.backend);
  }

  /** Every configuration on case c from one dense prefill; `next`, the case that runs after it, decides what to keep. */
  run(c: NeedleCase, configs: readonly NeedleConfig[], next?: NeedleCase): NeedleOutcome[] {
    const { nLayers, nHeads, nKvHeads, headDim: d } = this.m.model.config;
    const g = nHeads / nKvHeads;
    const steps = c.answerTokens.length;
    const probe = this.probe;
    const session = this.sessionFor(configs, c.prompt.length + steps);
    // Resume from the saved prefix when this prompt begins with it; else from position 0.
    const saved = this.saved;
    let from = 0;
    if (saved && commonPrefix(saved.prompt, c.prompt) >= saved.at) {
      session.restore(saved.checkpoint);
      from = saved.at;
    } else session.reset();
    // Keep the prefix this prompt shares with the next one, at a chunk boundary before the last token.
    const keep = next
      ? Math.floor(Math.min(commonPrefix(c.prompt, next.prompt), c.prompt.length - 1) / NEEDLE_PREFILL_CHUNK) *
        NEEDLE_PREFILL_CHUNK
      : 0;
    if (keep > from) {
      session.prefill(c.prompt.slice(from, keep));
      this.saved = { at: keep, prompt: c.prompt, checkpoint: session.checkpoint() };
      this.prefilled += keep - from;
      from = keep;
    }
    const first = argmax(session.prefill(c.prompt.slice(from)));
    this.prefilled += c.prompt.length - from;
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
      const { output, exact } = needleAnswer(this.tokenizer, c, out);
      let compression = 0;
      for (let i = 1; i < steps; i++)
        compression +=
          attentionCost(config, c.prompt.length + i, d) /
          attentionCost({ ...config, method: 'dense' }, c.prompt.length + i, d);
      return {
        label,
        exact,
        output,
        recall,
        compression: steps > 1 ? compression / (steps - 1) : 1,
      };
    });
  }

  /**
   * The session, made on first use for `capacity` positions. H2O's score state exists only in a
   * session created for it; every other method runs on the same session.
   */
  private sessionFor(configs: readonly NeedleConfig[], needed: number): Session {
    const h2o = configs.find((x) => x.config.method === 'h2o')?.config;
    const s = this.session;
    if (s && s.caches[0].capacity >= needed && (h2o === undefined || s.h2o[0] !== null)) return s;
    this.saved = null;
    this.session = new Session(this.probe, this.m.model, {
      capacity: Math.max(this.capacity, needed),
      maxPrefill: NEEDLE_PREFILL_CHUNK,
      attention: h2o ?? configs[0].config,
      kvDType: this.m.kvDType,
      kvLayout: 'k-twice',
    });
    return this.session;
  }
}

export interface NeedleSweepOptions extends NeedleCaseOptions {
  lengths: readonly number[];
  methods: readonly AttentionConfig['method'][];
  targets: readonly number[];
  onCase?: (done: number, total: number, label: string) => void;
  /** Called with each case's records as it finishes (cases run out of order: see runNeedleSweep). */
  onRecords?: (records: NeedleRecord[]) => void;
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

/**
 * Every length x task x depth case, each with every configuration; records in that order. The
 * cases of a length run on one NeedleRunner in order of their first needle's position, so each
 * prompt shares with the one before it the filler up to that needle, prefilled once.
 */
export function runNeedleSweep(
  m: NeedleRunModel,
  tokenizer: Tokenizer,
  filler: readonly number[],
  o: NeedleSweepOptions,
): NeedleRecord[] {
  const byCase: NeedleRecord[][] = [];
  const plans = o.lengths.map((length) => needleCases(tokenizer, filler, length, o));
  const total = plans.reduce((n, p) => n + p.length, 0);
  const perLength = o.tasks.length * o.depths.length;
  let done = 0;
  plans.forEach((plan, li) => {
    if (plan.length === 0) return;
    const length = o.lengths[li];
    const runner = new NeedleRunner(
      m,
      tokenizer,
      Math.max(...plan.map(({ case: c }) => c.prompt.length + c.answerTokens.length)),
    );
    plan.forEach(({ at, case: c }, step) => {
      const { task, depth } = c;
      o.onCase?.(done, total, `${task} ${length} depth ${Math.round(depth * 100)}%`);
      const configs = needleConfigs(o.methods, o.targets, length, c.answerTokens.length - 1, m.model.config.headDim);
      const records = runner.run(c, configs, plan[step + 1]?.case).map((outcome, k) => {
        const { config, target } = configs[k];
        return {
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
        };
      });
      byCase[li * perLength + at] = records;
      o.onRecords?.(records);
      done++;
    });
  });
  o.onCase?.(done, total, 'done');
  return byCase.flat();
}
