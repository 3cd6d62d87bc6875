/**
 * The full comparison of issue 14 for one model variant (weights and KV
 * type): perplexity, greedy agreement and attention statistics for dense and
 * each method at each target compression, parameters by budget.ts's rule.
 */
import type { AttentionMethod } from '@sparq/core';
import type { AttentionConfig } from '../attention-method.ts';
import { defaultAttention } from '../attention-method.ts';
import { attentionStatistics, type AttentionStatsResult, type StatsSweep } from './attention-stats.ts';
import { configForTarget, meanCompression } from './budget.ts';
import { agreementSummary, greedySteps, greedyTokens } from './greedy.ts';
import { denseNll, methodNll, scoredSteps, summarize, type NllSummary, type PerplexityProtocol } from './perplexity.ts';
import { evalSession, type EvalModel } from './run-model.ts';

export type EvalTask = 'ppl' | 'greedy' | 'stats';
export const EVAL_TASKS: readonly EvalTask[] = ['ppl', 'greedy', 'stats'];

export interface GreedyProtocol {
  /** Prompts (stories) and their length in tokens, BOS included. */
  prompts: number;
  promptLength: number;
  /** Tokens generated per prompt. */
  count: number;
}

export const GREEDY_PROTOCOL: GreedyProtocol = { prompts: 50, promptLength: 16, count: 256 };

export interface SweepOptions {
  tasks: readonly EvalTask[];
  /** Methods compared with dense (not 'dense'). */
  methods: readonly AttentionMethod[];
  targets: readonly number[];
  ppl: PerplexityProtocol;
  greedy: GreedyProtocol;
  /** Windows of the statistics run (from the first), and its r/k sweep. */
  stats: { windows: number; sweep: StatsSweep };
  /** Progress of the current step: what runs, and units done of total. */
  onProgress?: (label: string, done: number, total: number) => void;
}

/** A configuration at a target ratio, with the ratio it reaches (spec.md §3, averaged over the task's steps). */
export interface PlannedConfig {
  target: number;
  config: AttentionConfig;
  compression: number;
}

export interface PerplexityRow extends PlannedConfig, NllSummary {
  countedRatio: number;
}

export interface GreedyRow extends PlannedConfig {
  mean: number;
  median: number;
  /** Agreement length per prompt. */
  lengths: number[];
}

export interface SweepResult {
  ppl?: { dense: NllSummary; rows: PerplexityRow[] };
  greedy?: { prompts: number; promptLength: number; count: number; rows: GreedyRow[] };
  stats?: AttentionStatsResult;
}

/** Every method at every target for a task whose decode steps have `steps` valid positions. */
export function plan(
  methods: readonly AttentionMethod[],
  targets: readonly number[],
  steps: readonly number[],
  d: number,
): PlannedConfig[] {
  return targets.flatMap((target) =>
    methods.map((method) => {
      const config = configForTarget(method, target, steps, d);
      return { target, config, compression: meanCompression(config, steps, d) };
    }),
  );
}

/** A short name of a configuration: "sparq r=2 k=16 l=4", "h2o k=40". */
export function configLabel(a: AttentionConfig): string {
  if (a.method === 'dense') return 'dense';
  if (a.method === 'sparq') return `sparq r=${a.r} k=${a.k} l=${a.l}${a.reallocate ? '' : ' no-reallocate'}`;
  return `${a.method} k=${a.k}`;
}

export function runSweep(
  m: EvalModel,
  tokens: readonly number[],
  prompts: readonly (readonly number[])[],
  o: SweepOptions,
): SweepResult {
  const d = m.model.config.headDim;
  const progress = (label: string) => (done: number, total: number) => o.onProgress?.(label, done, total);
  const result: SweepResult = {};
  const pplPlan = plan(o.methods, o.targets, scoredSteps(tokens.length, o.ppl), d);
  if (o.tasks.includes('ppl')) {
    const dense = denseNll(m, tokens, o.ppl, progress('ppl dense'));
    const rows = pplPlan.map((planned) => {
      const run = methodNll(m, tokens, planned.config, o.ppl, progress(`ppl ${configLabel(planned.config)}`));
      return { ...planned, ...summarize(run.nll, dense), countedRatio: run.countedRatio };
    });
    result.ppl = { dense: summarize(dense, dense), rows };
  }
  if (o.tasks.includes('greedy')) {
    const g = o.greedy;
    const capacity = g.promptLength + g.count - 1;
    const denseSession = evalSession(m, defaultAttention('dense', d, capacity), capacity);
    const reference = prompts.map((prompt, i) => {
      o.onProgress?.('greedy dense', i + 1, prompts.length);
      return greedyTokens(denseSession, prompt, g.count);
    });
    const rows = plan(o.methods, o.targets, greedySteps(g.promptLength, g.count), d).map((planned) => {
      const session = evalSession(m, planned.config, capacity);
      const lengths = prompts.map((prompt, i) => {
        o.onProgress?.(`greedy ${configLabel(planned.config)}`, i + 1, prompts.length);
        return greedyTokens(session, prompt, g.count, reference[i]).length;
      });
      return { ...planned, ...agreementSummary(lengths), lengths };
    });
    result.greedy = { prompts: prompts.length, promptLength: g.promptLength, count: g.count, rows };
  }
  if (o.tasks.includes('stats')) {
    const configs = pplPlan.map((x) => ({ label: configLabel(x.config), config: x.config }));
    result.stats = attentionStatistics(
      m,
      tokens,
      { ...o.ppl, windows: o.stats.windows },
      configs,
      o.stats.sweep,
      progress('stats'),
    );
  }
  return result;
}
