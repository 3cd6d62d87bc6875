/**
 * `sparq eval`: the paper's accuracy comparisons on a real model (issue 14).
 *
 *   sparq eval --task ppl --attention sparq --r 2 --k 16 --json   one configuration, one JSON object on stdout
 *   sparq eval [--quick] [--out DIR]                             the full sweep: every task, method, target
 *                                                                and variant; results.json, results.md and
 *                                                                SVG plots in DIR
 * The library does the work (packages/llm/src/eval); this file reads flags and
 * files, shows progress on stderr and writes the outputs.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { kvLabel, selectBackend, type AttentionMethod, type ProductPath } from '@sparq/core';
import {
  ATTENTION_METHODS,
  COMPRESSION_TARGETS,
  sessionKT,
  EVAL_TASKS,
  GREEDY_PROTOCOL,
  PERPLEXITY_PROTOCOL,
  agreementSummary,
  attentionStatistics,
  configLabel,
  defaultAttention,
  denseNll,
  encodePieces,
  evalSession,
  greedySteps,
  greedyTokens,
  meanCompression,
  methodNll,
  openModel,
  readTextFile,
  runSweep,
  scoredSteps,
  storyPrompts,
  summarize,
  textPieces,
  type AttentionConfig,
  type EvalModel,
  type EvalTask,
  type LanguageModel,
  type SweepOptions,
  type WeightType,
} from '@sparq/llm';
import '../backends.ts';
import { sharedPath } from '../shared-path.ts';
import { UsageError, type Command } from '../command.ts';
import { choice, isInt, number, parseFlags } from '../flags.ts';
import { progress } from '../progress.ts';
import { writeEvalReport, type EvalReport, type VariantResult } from '../report/eval-report.ts';
import { ATTENTION_FLAGS, attention as attentionFlags, storage } from '../run-flags.ts';
import { NEEDLE_USAGE, needleEval } from './eval-needle.ts';

/** The model variants of the sweep: weights converted on load, KV element type. */
export interface Variant {
  name: string;
  weights?: WeightType;
  kv: 'f32' | 'f16';
}

const VARIANTS: readonly Variant[] = [
  { name: 'f32', kv: 'f32' },
  { name: 'int4', weights: 'int4', kv: 'f32' },
  { name: 'q4_0', weights: 'q4_0', kv: 'f32' },
  { name: 'f16-kv', kv: 'f16' },
];

/** The sweep's defaults, and the CI-sized ones of --quick. */
const FULL = {
  windows: undefined as number | undefined,
  prompts: GREEDY_PROTOCOL.prompts,
  tokens: GREEDY_PROTOCOL.count,
  statsWindows: 4,
  sweepK: [8, 16, 32, 64],
};
const QUICK = { windows: 2, prompts: 4, tokens: 32, statsWindows: 1, sweepK: [16] };

/**
 * Eval multiplies quantized weights on the 'dequant' path (weights decoded to f32), not the
 * runtime's 'int8' default (packages/llm/src/linear.ts), so that the documented results
 * (docs/eval, README's tables), measured that way, reproduce.
 */
const EVAL_PRODUCT_PATH: ProductPath = 'dequant';

const USAGE = `sparq eval [--model FILE] [--tokenizer FILE] [--data FILE] [--backend reference|native]
           [--task ppl|greedy|stats|needle] [--attention METHOD [--r R] [--k K] [--l L] [--no-reallocate]]
           [--weights f32|q4_0|int4] [--kv TYPE|K/V] [--kt f32|f16|i8|i4|i2] [--json]
           [--methods LIST] [--targets LIST] [--variants LIST] [--sweep-r LIST] [--sweep-k LIST]
           [--windows N] [--prompts N] [--tokens N] [--stats-windows N] [--quick] [--out DIR]
sparq eval --from results.json [--out DIR]

The accuracy comparisons of the SparQ paper on a real model (default: stories260K
from ../shared/models, text: the first 100,000 characters of ../shared/data/tinystories_val.txt).
Nothing is random: perplexity is teacher-forced and generation greedy.

Tasks:
  ppl     perplexity in windows of 512 positions; dense scores every position of one
          batched prefill per window; a method prefills 64 positions densely (unscored)
          and scores every later position through a decode step with its attention;
          each row shows dense's NLL on the same positions
  greedy  first 16 tokens of 50 stories as prompts, 256 greedy tokens each: tokens
          before the first difference from dense's output (mean, median)
  stats   on the decode steps of the first windows: top-k agreement with dense, the
          softmax mass of the positions attended and SparQ's alpha estimate of it,
          output error vs dense, per-head query kurtosis; SparQ's top-k agreement over r, k

One configuration (--attention given): runs --task (default ppl) with that method and
prints one JSON object (--json) or a line. With --attention dense, ppl is dense over every
position. Defaults of --r, --k, --l as in generate over a 512-position context.

The sweep (no --attention): every task for dense and --methods (default sparq,h2o,lminf,oracle)
at --targets compression ratios (default 0.5,0.25,0.125: spec.md §3's ratio averaged over a
task's decode steps), parameters by the rule in packages/llm/src/eval/budget.ts, for each
of --variants (default f32,int4,q4_0,f16-kv: f32 weights, INT4 group-32 weights, Q4_0
weights, f16 KV cache; quantized weights multiply on the dequant path). Writes results.json, results.md and SVG plots to --out (default
eval-results). --json prints the results JSON on stdout too.

  --windows N        perplexity windows (from the first), default all (92)
  --prompts N        greedy prompts, default 50;  --tokens N  greedy tokens, default 256
  --stats-windows N  windows of the statistics task, default 4
  --sweep-r LIST     r values of the statistics sweep, default 1..head_dim
  --sweep-k LIST     k values of the statistics sweep, default 8,16,32,64
  --quick            CI-sized: 2 windows, 4 prompts of 32 tokens, 1 statistics window, k 16
  --backend NAME     reference or native (default: the fastest available)
  --from FILE        write the tables and plots of a results.json again (no runs)

${NEEDLE_USAGE}`;

export const evalCommand: Command = {
  name: 'eval',
  summary: 'perplexity, greedy agreement and attention statistics of SparQ vs the baselines on a real model',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      model: { type: 'string' },
      tokenizer: { type: 'string' },
      data: { type: 'string' },
      backend: { type: 'string' },
      task: { type: 'string' },
      ...ATTENTION_FLAGS,
      json: { type: 'boolean' },
      methods: { type: 'string' },
      targets: { type: 'string' },
      variants: { type: 'string' },
      'sweep-r': { type: 'string' },
      'sweep-k': { type: 'string' },
      windows: { type: 'string' },
      prompts: { type: 'string' },
      tokens: { type: 'string' },
      'stats-windows': { type: 'string' },
      quick: { type: 'boolean' },
      out: { type: 'string' },
      from: { type: 'string' },
      ngram: { type: 'string' },
      'needle-tasks': { type: 'string' },
      lengths: { type: 'string' },
      depths: { type: 'string' },
      length: { type: 'string' },
      depth: { type: 'string' },
      seed: { type: 'string' },
      resume: { type: 'boolean' },
    });
    if (values.task === 'needle') return needleEval(values, argv);
    if (values.from !== undefined)
      return render(JSON.parse(readTextFile(values.from)) as EvalReport, values.out ?? dirname(values.from), false);
    const defaults = values.quick ? QUICK : FULL;
    const modelPath = values.model ?? sharedPath('models/stories260K.bin');
    const dataPath = values.data ?? sharedPath('data/tinystories_val.txt');
    for (const [flag, path] of [
      ['--model', modelPath],
      ['--data', dataPath],
    ]) {
      if (!existsSync(path))
        throw new UsageError(
          `${flag} ${path}: no such file${values[flag.slice(2) as 'model' | 'data'] ? '' : ' (the default; give the flag)'}`,
        );
    }
    const windows =
      values.windows === undefined
        ? defaults.windows
        : number('windows', values.windows, 0, isInt(1), 'an integer >= 1');
    const promptCount = number('prompts', values.prompts, defaults.prompts, isInt(1), 'an integer >= 1');
    const count = number('tokens', values.tokens, defaults.tokens, isInt(1), 'an integer >= 1');
    const statsWindows = number(
      'stats-windows',
      values['stats-windows'],
      defaults.statsWindows,
      isInt(1),
      'an integer >= 1',
    );
    const backend =
      values.backend === undefined ? undefined : choice('backend', values.backend, ['reference', 'native'], 'native');
    const engine = await selectBackend(backend ? { backend } : {});
    const fallback = backend || process.env.SPARQ_BACKEND ? undefined : await selectBackend({ backend: 'reference' });
    const load = (weights: WeightType | undefined): LanguageModel =>
      openModel(engine, modelPath, { tokenizer: values.tokenizer, weights, fallback });

    const base = load(undefined);
    const c = base.config;
    const ppl = { ...PERPLEXITY_PROTOCOL, window: Math.min(PERPLEXITY_PROTOCOL.window, c.seqLen), windows };
    const greedy = { ...GREEDY_PROTOCOL, prompts: promptCount, count };
    if (greedy.promptLength + count - 1 > c.seqLen)
      throw new UsageError(
        `--tokens ${count}: ${greedy.promptLength} prompt tokens + ${count} exceed the model's ${c.seqLen} positions`,
      );
    const pieces = textPieces(readTextFile(dataPath));
    const tokens = encodePieces(base.tokenizer, pieces);
    const prompts = storyPrompts(base.tokenizer, pieces, promptCount, greedy.promptLength);
    const task = values.task === undefined ? undefined : choice<EvalTask>('task', values.task, EVAL_TASKS, 'ppl');
    const bar = progress('eval', process.stderr);
    const onProgress = (label: string, done: number, total: number) => bar.update(done, total, label);

    if (values.attention !== undefined) {
      const { weights, kv: kvDType, kt: kTDType } = storage(values);
      const lm = weights === undefined ? base : load(weights);
      const m: EvalModel = { engine: lm.engine, model: lm.model, kvDType, kTDType, productPath: EVAL_PRODUCT_PATH };
      const a = attentionFlags(values, c.headDim, ppl.window);
      const one = singleRun(m, a, task ?? 'ppl', tokens, prompts, { ppl, greedy, statsWindows }, onProgress);
      bar.end();
      const record = {
        task: task ?? 'ppl',
        model: modelPath,
        backend: lm.engine.name,
        weights: lm.weightType,
        kv: kvLabel(kvDType),
        kt: kTDType ?? sessionKT(kvDType),
        method: a.method,
        r: a.r,
        k: a.k,
        l: a.l,
        reallocate: a.reallocate,
        ...one,
      };
      if (values.json) process.stdout.write(JSON.stringify(record) + '\n');
      else
        process.stdout.write(
          `${configLabel(a)}: ${Object.entries(one)
            .filter(([, v]) => typeof v === 'number')
            .map(([key, v]) => `${key} ${+(v as number).toPrecision(6)}`)
            .join(', ')}\n`,
        );
      return 0;
    }

    const list = (raw: string | undefined) =>
      raw
        ?.split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    const methods = (list(values.methods) ?? ['sparq', 'h2o', 'lminf', 'oracle']).map((mth) =>
      choice<AttentionMethod>(
        'methods',
        mth,
        ATTENTION_METHODS.filter((x) => x !== 'dense'),
        'sparq',
      ),
    );
    const targets = (list(values.targets) ?? COMPRESSION_TARGETS.map(String)).map((t) =>
      number('targets', t, 0, (x) => x > 0 && x <= 1, 'ratios in (0, 1]'),
    );
    const variants = (list(values.variants) ?? VARIANTS.map((v) => v.name)).map(
      (name) => VARIANTS.find((v) => v.name === name) ?? badVariant(name),
    );
    const ints = (flag: string, raw: string | undefined, fallback: number[], max: number) =>
      (list(raw) ?? fallback.map(String)).map((x) => number(flag, x, 0, isInt(1, max), `integers in [1, ${max}]`));
    const sweep = {
      r: ints(
        'sweep-r',
        values['sweep-r'],
        Array.from({ length: c.headDim }, (_, i) => i + 1),
        c.headDim,
      ),
      k: ints('sweep-k', values['sweep-k'], defaults.sweepK, ppl.window),
    };
    const options: SweepOptions = {
      tasks: task ? [task] : EVAL_TASKS,
      methods,
      targets,
      ppl,
      greedy,
      stats: { windows: statsWindows, sweep },
      onProgress,
    };
    const results: VariantResult[] = [];
    for (const v of variants) {
      const lm = v.weights === undefined ? base : load(v.weights);
      const m: EvalModel = { engine: lm.engine, model: lm.model, kvDType: v.kv, productPath: EVAL_PRODUCT_PATH };
      const started = performance.now();
      const r = runSweep(m, tokens, prompts, {
        ...options,
        onProgress: (label, done, total) => onProgress(`${v.name} ${label}`, done, total),
      });
      results.push({
        variant: v.name,
        weights: lm.weightType,
        kv: v.kv,
        seconds: (performance.now() - started) / 1000,
        ...r,
      });
    }
    bar.end();
    const report: EvalReport = {
      command: `sparq eval ${argv.join(' ')}`.trim(),
      model: modelPath,
      data: dataPath,
      backend: engine.name,
      config: c,
      tokens: tokens.length,
      protocol: { ppl, greedy, stats: options.stats },
      methods,
      targets,
      variants: results,
    };
    return render(report, values.out ?? 'eval-results', !!values.json);
  },
};

/** Writes the report's files to `out`; prints the JSON (json) or the Markdown tables on stdout. */
function render(report: EvalReport, out: string, json: boolean): number {
  mkdirSync(out, { recursive: true });
  const written = writeEvalReport(report, out);
  process.stdout.write(json ? JSON.stringify(report) + '\n' : readFileSync(join(out, 'results.md'), 'utf8'));
  process.stderr.write(`wrote ${written.map((name) => join(out, name)).join(', ')}\n`);
  return 0;
}

function badVariant(name: string): never {
  throw new UsageError(`--variants ${name}, expected some of ${VARIANTS.map((v) => v.name).join(', ')}`);
}

interface SingleProtocol {
  ppl: typeof PERPLEXITY_PROTOCOL;
  greedy: typeof GREEDY_PROTOCOL;
  statsWindows: number;
}

/** One configuration on one task: the numbers of its JSON record. */
function singleRun(
  m: EvalModel,
  a: AttentionConfig,
  task: EvalTask,
  tokens: number[],
  prompts: number[][],
  p: SingleProtocol,
  onProgress: (label: string, done: number, total: number) => void,
): Record<string, unknown> {
  const d = m.model.config.headDim;
  const label = configLabel(a);
  if (task === 'ppl') {
    const dense = denseNll(m, tokens, p.ppl, (done, total) => onProgress('dense', done, total));
    if (a.method === 'dense') {
      const s = summarize(dense, dense);
      return {
        ppl: s.ppl,
        nll: s.nll,
        targets: s.targets,
        dense_ppl: s.densePpl,
        dense_nll: s.denseNll,
        compression: 1,
        counted_ratio: 1,
        counted_bytes_ratio: 1,
      };
    }
    const run = methodNll(m, tokens, a, p.ppl, (done, total) => onProgress(label, done, total));
    const s = summarize(run.nll, dense);
    return {
      ppl: s.ppl,
      nll: s.nll,
      targets: s.targets,
      dense_ppl: s.densePpl,
      dense_nll: s.denseNll,
      compression: meanCompression(a, scoredSteps(tokens.length, p.ppl), d),
      counted_ratio: run.countedRatio,
      counted_bytes_ratio: run.countedBytesRatio,
    };
  }
  if (task === 'greedy') {
    const g = p.greedy;
    const capacity = g.promptLength + g.count - 1;
    const dense = evalSession(m, defaultAttention('dense', d, capacity), capacity);
    const session = evalSession(m, a, capacity);
    const lengths = prompts.map((prompt, i) => {
      onProgress(label, i + 1, prompts.length);
      return greedyTokens(session, prompt, g.count, greedyTokens(dense, prompt, g.count)).length;
    });
    return {
      ...agreementSummary(lengths),
      prompts: prompts.length,
      lengths,
      compression: meanCompression(a, greedySteps(g.promptLength, g.count), d),
    };
  }
  const stats = attentionStatistics(
    m,
    tokens,
    { ...p.ppl, windows: p.statsWindows },
    [{ label, config: a }],
    { r: [], k: [] },
    (done, total) => onProgress(label, done, total),
  );
  const { label: _, config: __, ...numbers } = stats.methods[0];
  return {
    ...numbers,
    steps: stats.steps,
    compression: meanCompression(a, scoredSteps(tokens.length, { ...p.ppl, windows: p.statsWindows }), d),
  };
}
