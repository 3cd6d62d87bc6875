/**
 * The needle sweep's cases in llama.cpp (issue 25's "dense: 100% ... in llama.cpp on the same file"):
 * the cases `sparq eval --task needle` builds (needleCases: same tokenizer, filler, prompts, depths,
 * seeds, distractors and answers), on the retrieval model as `sparq retrieval-model` writes it for the
 * context the sweep builds it for (needleModelContext), decoded greedily by llama.cpp (node-llama-cpp's
 * prebuilt CPU build) and scored as sparq's runner scores them (needleAnswer).
 *
 * Consecutive cases of a length share their prompt's prefix as sparq's NeedleRunner does: the context
 * sequence is kept, the tokens after the common prefix with the next prompt are erased, and only the
 * rest is evaluated (llama.cpp keeps KV cells per position, so no chunk alignment is needed).
 *
 *   pnpm exec tsx bench/needle-llamacpp.ts [--quick] [--lengths 4096,...] [--depths 0,0.1,...]
 *     [--tasks passkey,multikey] [--kv f16|q8_0] [--flash on|off] [--threads 2] [--batch 512]
 *     [--share on|off] [--sparq DIR[,DIR]] [--out DIR] [--resume | --report-only] [--ngram 4] [--seed 1]
 *
 * Writes DIR/llamacpp.json and DIR/llamacpp.md after every case (needle-llamacpp-report.ts); --resume
 * keeps the cases DIR/llamacpp.json holds and runs the rest; --report-only runs none and writes the
 * files again (the comparison with --sparq's reports as they are now). --sparq: sparq needle.json
 * files (or folders holding one) whose dense answers are compared case by case.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getModuleVersion } from 'node-llama-cpp';
import {
  NEEDLE_TASKS,
  fillerTokens,
  needleAnswer,
  needleCases,
  needleModelContext,
  readTokenizerFile,
  type NeedleTask,
} from '@sparq/llm';
import { retrievalModelCommand } from '../packages/cli/src/commands/retrieval-model.ts';
import type { NeedleReport } from '../packages/cli/src/report/needle-report.ts';
import { sharedPath } from '../packages/cli/src/shared-path.ts';
import { llama, llamaCppContinue, llamaCppMissing } from '../test/support/llama-cpp.ts';
import {
  compareWithSparq,
  logitMargin,
  llamaNeedleMarkdown,
  resumeMismatch,
  sortLlamaRecords,
  type LlamaNeedleRecord,
  type LlamaNeedleReport,
  type LlamaNeedleSettings,
} from './needle-llamacpp-report.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    lengths: { type: 'string' },
    depths: { type: 'string' },
    tasks: { type: 'string', default: NEEDLE_TASKS.join(',') },
    kv: { type: 'string', default: 'f16' },
    flash: { type: 'string', default: 'on' },
    threads: { type: 'string', default: '2' },
    batch: { type: 'string', default: '512' },
    share: { type: 'string', default: 'on' },
    sparq: { type: 'string' },
    out: { type: 'string', default: 'needle-llamacpp' },
    resume: { type: 'boolean', default: false },
    'report-only': { type: 'boolean', default: false },
    ngram: { type: 'string', default: '4' },
    seed: { type: 'string', default: '1' },
    data: { type: 'string', default: sharedPath('data/tinystories_val.txt') },
    tokenizer: { type: 'string', default: sharedPath('models/tok512.bin') },
  },
});

function fail(message: string): never {
  process.stderr.write(`needle-llamacpp: ${message}\n`);
  process.exit(2);
}
const list = (name: string, raw: string, ok: (x: number) => boolean, range: string) =>
  raw.split(',').map((s) => {
    const x = Number(s.trim());
    if (s.trim() === '' || !ok(x)) fail(`--${name} ${raw}: ${JSON.stringify(s)} is not ${range}`);
    return x;
  });
const oneOf = <T extends string>(name: string, raw: string, allowed: readonly T[]): T => {
  if (!allowed.includes(raw as T)) fail(`--${name} ${raw}: expected one of ${allowed.join(', ')}`);
  return raw as T;
};
const int = (lo: number, hi: number) => (x: number) => Number.isInteger(x) && x >= lo && x <= hi;

const lengths = list(
  'lengths',
  values.lengths ?? (values.quick ? '4096' : '4096,8192,16384,32768'),
  int(64, 1 << 20),
  'an integer in [64, 2^20]',
);
const depths = list(
  'depths',
  values.depths ?? (values.quick ? '0,0.5,1' : '0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1'),
  (x) => x >= 0 && x <= 1,
  'a number in [0, 1]',
);
const tasks = values.tasks.split(',').map((t) => oneOf<NeedleTask>('tasks', t.trim(), NEEDLE_TASKS));
const kv = oneOf('kv', values.kv, ['f16', 'q8_0'] as const);
const flash = oneOf('flash', values.flash, ['on', 'off'] as const) === 'on';
// llama.cpp keeps a quantized V cache only with flash attention (it refuses the context otherwise).
if (kv === 'q8_0' && !flash)
  fail('--kv q8_0 needs --flash on: llama.cpp quantizes the V cache only with flash attention');
const threads = list('threads', values.threads, int(1, 256), 'an integer in [1, 256]')[0];
const batch = list('batch', values.batch, int(1, 1 << 16), 'an integer in [1, 65536]')[0];
const share = oneOf('share', values.share, ['on', 'off'] as const) === 'on';
const ngram = list('ngram', values.ngram, int(2, 5), 'an integer in [2, 5]')[0];
const seed = list('seed', values.seed, int(0, 2 ** 31), 'an integer in [0, 2^31]')[0];
for (const [flag, path] of [
  ['data', values.data],
  ['tokenizer', values.tokenizer],
] as const)
  if (!existsSync(path)) fail(`--${flag} ${path}: no such file`);

const sparqReports = (values.sparq ?? '')
  .split(',')
  .filter(Boolean)
  .map((p) => {
    const path = existsSync(p) && statSync(p).isDirectory() ? join(p, 'needle.json') : p;
    if (!existsSync(path)) fail(`--sparq ${p}: no needle.json there`);
    return { path, report: JSON.parse(readFileSync(path, 'utf8')) as NeedleReport };
  });

const missing = await llamaCppMissing();
if (missing) fail(missing);
const l = await llama();

const settings: LlamaNeedleSettings = {
  ngram,
  ctx: needleModelContext(Math.max(...lengths)),
  seed,
  kv,
  flash,
  data: values.data,
};
const out = values.out;
const jsonPath = join(out, 'llamacpp.json');
const report: LlamaNeedleReport = {
  command: `pnpm exec tsx bench/needle-llamacpp.ts ${process.argv.slice(2).join(' ')}`.trim(),
  settings,
  llama: {
    release: `node-llama-cpp ${await getModuleVersion()}, llama.cpp ${l.llamaCppRelease.release} (${l.buildType})`,
    threads,
    batch,
    share,
  },
  tasks,
  lengths,
  depths,
  windows: [],
  records: [],
  comparison: null,
};
const reportOnly = values['report-only'];
if (reportOnly && !existsSync(jsonPath)) fail(`--report-only: no ${jsonPath} to report`);
if ((values.resume || reportOnly) && existsSync(jsonPath)) {
  const old = JSON.parse(readFileSync(jsonPath, 'utf8')) as LlamaNeedleReport;
  const why = resumeMismatch(old, settings);
  if (why) fail(`--resume: ${jsonPath} cannot be resumed by this run: ${why}; give another --out`);
  report.windows = old.windows;
  if (reportOnly) Object.assign(report, { command: old.command, llama: old.llama });
  report.records = old.records.filter(
    (r) => lengths.includes(r.length) && tasks.includes(r.task) && depths.includes(r.depth),
  );
}
const done = new Set(report.records.map((r) => `${r.task} ${r.length} ${r.depth}`));
const window = { started: new Date().toISOString(), cases: 0, wallSeconds: 0, cpuSeconds: 0, load: loadavg() };
if (!reportOnly) report.windows.push(window);

function write(): void {
  sortLlamaRecords(report.records, report);
  report.comparison = sparqReports.length ? compareWithSparq(report.records, settings, sparqReports) : null;
  mkdirSync(out, { recursive: true });
  writeFileSync(jsonPath, JSON.stringify(report, null, 1) + '\n');
  writeFileSync(join(out, 'llamacpp.md'), llamaNeedleMarkdown(report));
}

// The model file, as `sparq retrieval-model` writes it, for the context the sweep builds it for.
const tokenizer = readTokenizerFile(values.tokenizer);
const filler = fillerTokens(tokenizer, readFileSync(values.data, 'utf8'), Math.max(...lengths));
const dir = mkdtempSync(join(tmpdir(), 'sparq-needle-llamacpp-'));
const modelPath = join(dir, 'retrieval.gguf');
// Stopped between windows (the files hold every finished case): the model file goes too.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  });
const argv = ['--out', modelPath, '--ngram', String(ngram), '--ctx', String(settings.ctx)];
if ((await retrievalModelCommand.run([...argv, '--tokenizer', values.tokenizer])) !== 0)
  fail('writing the model failed');
const model = await l.loadModel({ modelPath });

const allCases = lengths.map((length) => needleCases(tokenizer, filler, length, { tasks, depths, ngram, seed }));
// Every record's tokens against its case's answer tokens (records of an earlier window too).
const answerTokens = new Map(
  allCases.flat().map(({ case: c }) => [`${c.task} ${c.length} ${c.depth}`, c.answerTokens]),
);
const sameTokens = (r: LlamaNeedleRecord) => {
  const want = answerTokens.get(`${r.task} ${r.length} ${r.depth}`)!;
  return r.tokens.length === want.length && r.tokens.every((t, i) => t === want[i]);
};
for (const r of report.records) r.sameTokens = sameTokens(r);
const plans = allCases.map((plan) =>
  plan.filter(({ case: c }) => !reportOnly && !done.has(`${c.task} ${c.length} ${c.depth}`)),
);
const total = plans.reduce((n, p) => n + p.length, 0);
// Time left: a case's work grows as length^2 (the prefill's attention).
let workLeft = plans.reduce((s, p, i) => s + p.length * lengths[i] ** 2, 0);
let workDone = 0;
const wall0 = performance.now();
const cpu0 = process.cpuUsage();
let count = 0;
const cpuSince = (start: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1e6;
};
write();
try {
  for (const [li, plan] of plans.entries()) {
    if (plan.length === 0) continue;
    const length = lengths[li];
    const capacity = Math.max(...plan.map(({ case: c }) => c.prompt.length + c.answerTokens.length));
    const context = await model.createContext({
      contextSize: capacity + 8,
      batchSize: batch,
      threads: { ideal: threads, min: threads },
      flashAttention: flash,
      experimentalKvCacheKeyType: kv === 'q8_0' ? 'Q8_0' : 'F16',
      experimentalKvCacheValueType: kv === 'q8_0' ? 'Q8_0' : 'F16',
    });
    try {
      const sequence = context.getSequence();
      for (const { case: c } of plan) {
        const t0 = performance.now();
        const c0 = process.cpuUsage();
        const run = await llamaCppContinue(sequence, c.prompt, c.answerTokens.length, tokenizer.vocabSize, share);
        const tokens = run.tokens;
        const margin = Math.min(...run.logits.map((row, i) => logitMargin(row, tokens[i])));
        const { output, exact } = needleAnswer(tokenizer, c, tokens);
        const record: LlamaNeedleRecord = {
          task: c.task,
          length,
          depth: c.depth,
          answer: c.answer,
          output,
          exact,
          sameTokens: false,
          tokens,
          margin,
          distractors: c.distractors.map((x) => x.value),
          evaluated: run.evaluated,
          wallSeconds: (performance.now() - t0) / 1000,
          cpuSeconds: cpuSince(c0),
        };
        record.sameTokens = sameTokens(record);
        report.records.push(record);
        count++;
        workDone += length ** 2;
        workLeft -= length ** 2;
        window.cases = count;
        window.wallSeconds = (performance.now() - wall0) / 1000;
        window.cpuSeconds = cpuSince(cpu0);
        write();
        const left =
          workLeft > 0 ? `, about ${Math.ceil(((window.wallSeconds / workDone) * workLeft) / 60)} min left` : '';
        process.stderr.write(
          `needle-llamacpp ${count}/${total} ${c.task} ${length} depth ${Math.round(c.depth * 100)}%: ` +
            `${JSON.stringify(output)} ${exact ? 'exact' : `wrong (answer ${c.answer})`}, evaluated ${record.evaluated}, ` +
            `${record.wallSeconds.toFixed(1)} s wall ${record.cpuSeconds.toFixed(1)} s CPU ` +
            `(${window.wallSeconds.toFixed(0)} s${left})\n`,
        );
      }
    } finally {
      await context.dispose();
    }
  }
} finally {
  await model.dispose();
  rmSync(dir, { recursive: true, force: true });
}
write();
process.stdout.write(llamaNeedleMarkdown(report).split('## Cases')[0]);
process.stderr.write(`wrote ${jsonPath} and llamacpp.md\n`);
