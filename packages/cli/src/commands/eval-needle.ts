/**
 * `sparq eval --task needle` (issue 25): passkey and multi-key needles in filler text through the
 * whole engine, on the hand-built retrieval model (docs/retrieval-model.md) or a given GGUF file.
 *
 *   sparq eval --task needle [--quick] [--out DIR]                      the sweep: needle.json, needle.md, SVG heatmaps
 *   sparq eval --task needle --attention sparq --length 8192 --depth 0.5 --json   one configuration, one JSON line per task
 *
 * The library does the work (packages/llm/src/eval/needle*.ts); this file reads flags, shows
 * progress on stderr and writes the outputs.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KV_DTYPES, kvLabel, selectBackend, type AttentionMethod, type Engine } from '@sparq/core';
import { parseKvFlag } from '@sparq/llm/options';
import {
  ATTENTION_METHODS,
  NEEDLE_TARGETS,
  NEEDLE_TASKS,
  buildModel,
  fillerTokens,
  findTokenizer,
  readModelFile,
  readTokenizerFile,
  retrievalModel,
  needleConfigs,
  needleModelContext,
  runNeedleSweep,
  type Model,
  type NeedleRecord,
  type NeedleTask,
  type Tokenizer,
  MAX_NGRAM,
  MIN_NGRAM,
  MULTIKEY_NEEDLES,
} from '@sparq/llm';
import { UsageError } from '../command.ts';
import { asUsage, choice, isInt, number } from '../flags.ts';
import { progress } from '../progress.ts';
import { writeNeedleReport, type NeedleReport } from '../report/needle-report.ts';
import { sharedPath } from '../shared-path.ts';

const FULL = {
  lengths: [4096, 8192, 16384, 32768, 65536, 131072],
  depths: Array.from({ length: 11 }, (_, i) => i / 10),
};
const QUICK = { lengths: [4096], depths: [0, 0.5, 1] };

export const NEEDLE_USAGE = `sparq eval --task needle [--model FILE] [--ngram N] [--tokenizer FILE] [--data FILE] [--backend NAME]
           [--needle-tasks passkey,multikey] [--lengths LIST] [--depths LIST] [--methods LIST]
           [--targets LIST] [--kv LIST] [--seed N] [--quick] [--out DIR] [--resume] [--json]
sparq eval --task needle --attention METHOD [--targets RATIO] [--length N] [--depth D] [--json]

Needle in a haystack (issue 25): a passkey, or one of ${MULTIKEY_NEEDLES} RULER-style keyed needles, hidden at a
depth of filler text (default ../shared/data/tinystories_val.txt), then asked for. Prefill is
dense and chunked; each method then decodes the answer greedily from that same prefill.
Reports exact-answer accuracy, and per layer and head the share of decode steps whose
attended positions held the one the step copies.

Default model: the hand-built retrieval model (sparq retrieval-model; --ngram N, default 4),
built in memory for the longest length. --model takes a GGUF file instead (its tokenizer is
read from the file unless --tokenizer is given).

  --lengths LIST    prompt lengths in tokens, default ${FULL.lengths.join(',')}
  --depths LIST     needle depths in [0, 1], default 0,0.1,...,1
  --methods LIST    default sparq,h2o,lminf,oracle (dense always runs)
  --targets LIST    spec.md §3 ratios to dense, default 0.25,0.125,0.0625 (budget.ts's rule picks r, k)
  --kv LIST         KV element types, default f16; each of ${KV_DTYPES.join(', ')}, or K/V of them
                    (e.g. q8_0/q4_0: K rows q8_0, V rows q4_0)
  --quick           4096 tokens, depths 0, 0.5, 1 (about a minute)
  --attention M     one method (its parameters for --targets' first ratio, default 0.125) at one
                    --length (default 4096) and --depth (default 0.5): one line per task and KV
                    type, JSON with --json
  --out DIR         default needle-results: needle.json, needle.md, needle-KV-METHOD-RATIO.svg,
                    written again after each case
  --resume          keep the cases DIR/needle.json already holds (same model, seed and
                    configurations) and run the rest`;

export interface NeedleValues {
  model?: string;
  tokenizer?: string;
  data?: string;
  backend?: string;
  attention?: string;
  r?: string;
  k?: string;
  l?: string;
  kv?: string;
  json?: boolean;
  methods?: string;
  targets?: string;
  quick?: boolean;
  out?: string;
  ngram?: string;
  'needle-tasks'?: string;
  lengths?: string;
  depths?: string;
  length?: string;
  depth?: string;
  seed?: string;
  resume?: boolean;
}

const list = (raw: string | undefined) =>
  raw
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);

export async function needleEval(values: NeedleValues, argv: readonly string[]): Promise<number> {
  const defaults = values.quick ? QUICK : FULL;
  const single = values.attention !== undefined;
  const lengths = single
    ? [number('length', values.length, 4096, isInt(64), 'an integer >= 64')]
    : (list(values.lengths) ?? defaults.lengths.map(String)).map((x) =>
        number('lengths', x, 0, isInt(64), 'integers >= 64'),
      );
  const depths = single
    ? [number('depth', values.depth, 0.5, (x) => x >= 0 && x <= 1, 'a number in [0, 1]')]
    : (list(values.depths) ?? defaults.depths.map(String)).map((x) =>
        number('depths', x, 0, (v) => v >= 0 && v <= 1, 'numbers in [0, 1]'),
      );
  const tasks = (list(values['needle-tasks']) ?? NEEDLE_TASKS).map((t) =>
    choice<NeedleTask>('needle-tasks', t, NEEDLE_TASKS, 'passkey'),
  );
  // Each entry as --kv spells it (the records' key), checked by the library's parser.
  const kvs = (list(values.kv) ?? ['f16']).map((x) => kvLabel(asUsage(() => parseKvFlag('--kv', x))));
  const ngram = number(
    'ngram',
    values.ngram,
    4,
    isInt(MIN_NGRAM, MAX_NGRAM),
    `an integer in [${MIN_NGRAM}, ${MAX_NGRAM}]`,
  );
  const seed = number('seed', values.seed, 1, isInt(0, 2 ** 31), 'an integer in [0, 2^31]');
  const dataPath = values.data ?? sharedPath('data/tinystories_val.txt');
  if (!existsSync(dataPath))
    throw new UsageError(`--data ${dataPath}: no such file${values.data ? '' : ' (the default; give the flag)'}`);
  const backend =
    values.backend === undefined ? undefined : choice('backend', values.backend, ['reference', 'native'], 'native');
  const engine = await selectBackend(backend ? { backend } : {});
  const longest = Math.max(...lengths);
  const { model, tokenizer, source } = loadModel(engine, values, ngram, longest);
  const filler = fillerTokens(tokenizer, readFileSync(dataPath, 'utf8'), longest);

  let methods: AttentionMethod[];
  let targets: number[];
  if (single) {
    const method = choice<AttentionMethod>('attention', values.attention, ATTENTION_METHODS, 'dense');
    methods = [method];
    targets = [number('targets', list(values.targets)?.[0], 1 / 8, (x) => x > 0 && x <= 1, 'a ratio in (0, 1]')];
  } else {
    methods = (list(values.methods) ?? ['sparq', 'h2o', 'lminf', 'oracle']).map((m) =>
      choice<AttentionMethod>(
        'methods',
        m,
        ATTENTION_METHODS.filter((x) => x !== 'dense'),
        'sparq',
      ),
    );
    targets = (list(values.targets) ?? NEEDLE_TARGETS.map(String)).map((t) =>
      number('targets', t, 0, (x) => x > 0 && x <= 1, 'ratios in (0, 1]'),
    );
  }
  const bar = progress('needle', process.stderr);
  const report: NeedleReport = {
    command: `sparq eval ${argv.join(' ')}`.trim(),
    model: source,
    data: dataPath,
    backend: engine.name,
    ngram,
    seed,
    tasks,
    lengths,
    depths,
    results: [],
  };
  const out = values.out ?? 'needle-results';
  const labels = needleConfigs(methods, targets, 64, 1, model.config.headDim).map((x) => x.label);
  const kept = values.resume && !single ? finishedCases(report, out, labels) : new Map<string, NeedleRecord[]>();
  const caseKey = (kv: string, task: string, length: number, depth: number) => `${kv} ${task} ${length} ${depth}`;
  // Time left: a case's work grows as length^2 (the prefill's attention and H2O's seed).
  let workLeft = 0;
  for (const kv of kvs)
    for (const length of lengths)
      for (const task of tasks)
        for (const depth of depths) if (!kept.has(caseKey(kv, task, length, depth))) workLeft += length ** 2;
  let workDone = 0;
  const started = performance.now();
  const eta = () => {
    const seconds = (performance.now() - started) / 1000;
    const left = workDone > 0 ? `, about ${Math.ceil(((seconds / workDone) * workLeft) / 60)} min left` : '';
    return `(${seconds.toFixed(0)} s${left})`;
  };
  for (const kv of kvs) {
    const result: NeedleReport['results'][number] = { kv, seconds: 0, records: [] };
    report.results.push(result);
    for (const length of lengths)
      for (const task of tasks)
        for (const depth of depths) result.records.push(...(kept.get(caseKey(kv, task, length, depth)) ?? []));
    const kvStarted = performance.now();
    // One length at a time, the files rewritten after each case: a long sweep stopped early keeps
    // the cases it finished (--resume runs the rest).
    for (const length of lengths) {
      runNeedleSweep({ engine, model, kvDType: parseKvFlag('--kv', kv) }, tokenizer, filler, {
        tasks,
        lengths: [length],
        depths,
        methods,
        targets,
        ngram,
        seed,
        skip: (task, length, depth) => kept.has(caseKey(kv, task, length, depth)),
        onCase: (done, total, label) => bar.update(done, total, `KV ${kv} ${label} ${eta()}`),
        onRecords: (records) => {
          workDone += length ** 2;
          workLeft -= length ** 2;
          result.records.push(...records);
          sortRecords(result.records, report);
          result.seconds = (performance.now() - kvStarted) / 1000;
          if (!single) writeReport(report, out);
        },
      });
    }
  }
  bar.end();
  if (single) {
    const method = methods[0];
    for (const { kv, records } of report.results) {
      for (const r of records.filter((x) => x.method === method)) {
        const line = {
          task: r.task,
          length: r.length,
          depth: r.depth,
          kv,
          method,
          r: r.r,
          k: r.k,
          exact: r.exact,
          answer: r.answer,
          output: r.output,
          compression: r.compression,
          recall: r.recall,
        };
        process.stdout.write(
          values.json
            ? JSON.stringify(line) + '\n'
            : `${r.task} ${r.length} depth ${r.depth} ${r.label}: ${r.exact ? 'exact' : 'wrong'} (${JSON.stringify(r.output)}, answer ${r.answer})\n`,
        );
      }
    }
    return 0;
  }
  const written = writeReport(report, out);
  process.stdout.write(values.json ? JSON.stringify(report) + '\n' : readFileSync(join(out, 'needle.md'), 'utf8'));
  process.stderr.write(`wrote ${written.length} files to ${out}\n`);
  return 0;
}

/** Records in the report's order: length, task, depth (each case's configurations as they ran). */
function sortRecords(records: NeedleRecord[], report: NeedleReport): void {
  const rank = (r: NeedleRecord) =>
    (report.lengths.indexOf(r.length) * report.tasks.length + report.tasks.indexOf(r.task)) * report.depths.length +
    report.depths.indexOf(r.depth);
  records.sort((a, b) => rank(a) - rank(b));
}

/**
 * --resume: the cases out/needle.json holds with every configuration in `labels`, by 'kv task length
 * depth'; a report of another model, n-gram, backend or seed is refused, not mixed in.
 */
function finishedCases(report: NeedleReport, out: string, labels: readonly string[]): Map<string, NeedleRecord[]> {
  const kept = new Map<string, NeedleRecord[]>();
  const path = join(out, 'needle.json');
  if (!existsSync(path)) return kept;
  const old = JSON.parse(readFileSync(path, 'utf8')) as NeedleReport;
  old.seed ??= 1; // reports written before --resume: the default seed, the only one they ran
  for (const field of ['model', 'data', 'backend', 'ngram', 'seed'] as const)
    if (old[field] !== report[field])
      throw new UsageError(
        `--resume: ${path} has ${field} ${JSON.stringify(old[field])}, this run ${JSON.stringify(report[field])}; give another --out`,
      );
  for (const { kv, records } of old.results) {
    const byCase = new Map<string, NeedleRecord[]>();
    for (const r of records) {
      const key = `${kv} ${r.task} ${r.length} ${r.depth}`;
      byCase.set(key, [...(byCase.get(key) ?? []), r]);
    }
    for (const [key, rs] of byCase)
      if (rs.length === labels.length && rs.every((r, i) => r.label === labels[i])) kept.set(key, rs);
  }
  return kept;
}

function writeReport(report: NeedleReport, out: string): string[] {
  mkdirSync(out, { recursive: true });
  return writeNeedleReport(report, out);
}

/** The retrieval model built for `longest` positions, or --model's file; and the tokenizer. */
function loadModel(
  engine: Engine,
  values: NeedleValues,
  ngram: number,
  longest: number,
): { model: Model; tokenizer: Tokenizer; source: string } {
  const tokPath = values.tokenizer ?? sharedPath('models/tok512.bin');
  if (values.model === undefined && !existsSync(tokPath))
    throw new UsageError(
      `--tokenizer ${tokPath}: no such file${values.tokenizer ? '' : ' (the default; give the flag)'}`,
    );
  if (values.model === undefined) {
    const tokenizer = readTokenizerFile(tokPath);
    const { loaded } = retrievalModel({ ngram, ctx: needleModelContext(longest), vocabSize: tokenizer.vocabSize });
    return { model: buildModel(engine, loaded), tokenizer, source: `retrieval model (built in memory, ${ngram}-gram)` };
  }
  if (!existsSync(values.model)) throw new UsageError(`--model ${values.model}: no such file`);
  const file = readModelFile(values.model, engine);
  if (file.loaded.config.seqLen < longest + 64)
    throw new UsageError(
      `--lengths: ${longest} tokens and the answer exceed the model's context of ${file.loaded.config.seqLen}`,
    );
  const { tokenizer } = findTokenizer(file, values.tokenizer);
  return { model: buildModel(engine, file.loaded), tokenizer, source: values.model };
}
