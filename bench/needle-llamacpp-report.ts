/**
 * The files bench/needle-llamacpp.ts writes, and its comparison with a sparq needle sweep: pure
 * functions over records, so they can be tested without llama.cpp.
 *
 *   llamacpp.json   the run's settings, every case's record, the time of each invocation (--resume
 *                   adds one per window) and the comparison with sparq's dense answers
 *   llamacpp.md     exact-answer accuracy per task and length, then every case's output, then
 *                   the comparison
 */
import type { NeedleRecord, NeedleTask } from '@sparq/llm';
import type { NeedleReport } from '../packages/cli/src/report/needle-report.ts';
import { markdownTable } from '../packages/cli/src/report/markdown-table.ts';

/** One case as llama.cpp answered it. */
export interface LlamaNeedleRecord {
  task: NeedleTask;
  length: number;
  depth: number;
  answer: string;
  /** The greedy tokens decoded by sparq's tokenizer, scored as sparq's runner scores them. */
  output: string;
  exact: boolean;
  /**
   * The tokens are the answer's tokens, the first one (a space) included: stricter than `exact`,
   * whose decoded text leaves the first token out (needleAnswer).
   */
  sameTokens: boolean;
  tokens: number[];
  /** Smallest gap over the decode steps between the chosen token's logit and the next best. */
  margin: number;
  distractors: string[];
  /** Prompt tokens this case evaluated (the rest came from the previous case's shared prefix). */
  evaluated: number;
  wallSeconds: number;
  cpuSeconds: number;
}

/** What makes two runs' cases the same: a resumed run must match on all of it. */
export interface LlamaNeedleSettings {
  ngram: number;
  /** The retrieval model's context (its RoPE base follows from it). */
  ctx: number;
  seed: number;
  kv: 'f16' | 'q8_0';
  flash: boolean;
  data: string;
}

export interface LlamaNeedleReport {
  command: string;
  settings: LlamaNeedleSettings;
  llama: { release: string; threads: number; batch: number; share: boolean };
  tasks: NeedleTask[];
  lengths: number[];
  depths: number[];
  /** One entry per invocation: a run split by --resume across windows has several. */
  windows: { started: string; cases: number; wallSeconds: number; cpuSeconds: number; load: number[] }[];
  records: LlamaNeedleRecord[];
  comparison: DenseComparison | null;
}

/** llama.cpp's answers against sparq's dense answers, case by case. */
export interface DenseComparison {
  /** The sparq reports read, and why any was left out. */
  sources: { path: string; used: boolean; note?: string }[];
  /** Cases both ran with the same output text. */
  same: number;
  /** Cases both ran whose output texts differ. */
  differ: { task: NeedleTask; length: number; depth: number; llama: string; sparq: string; answer: string }[];
  /** Cases llama.cpp ran that no sparq report holds (the same task, length, depth and drawn keys). */
  missing: number;
}

/** The chosen token's logit minus the best other one's (NaN entries: tokens llama.cpp gave no logit). */
export function logitMargin(logits: Float32Array, chosen: number): number {
  let other = -Infinity;
  logits.forEach((x, t) => {
    if (t !== chosen && x > other) other = x;
  });
  return logits[chosen] - other;
}

/**
 * A case by its place and its drawn keys: the sweep draws a depth's keys from its index in --depths
 * (seed + i), so the same depth in a run of other depths is another case.
 */
const caseKey = (x: { task: string; length: number; depth: number; answer: string; distractors: readonly string[] }) =>
  `${x.task} ${x.length} ${x.depth} ${x.answer} ${x.distractors.join(',')}`;

/** Why an earlier report cannot be resumed by a run with `settings`, or null when it can. */
export function resumeMismatch(old: LlamaNeedleReport, settings: LlamaNeedleSettings): string | null {
  for (const field of Object.keys(settings) as (keyof LlamaNeedleSettings)[])
    if (old.settings[field] !== settings[field])
      return `it has ${field} ${JSON.stringify(old.settings[field])}, this run ${JSON.stringify(settings[field])}`;
  return null;
}

/**
 * Compares llama.cpp's records with the dense records of sparq reports (`sparq eval --task needle`'s
 * needle.json) of the same KV type, n-gram and seed; a report of other settings is listed and not used.
 */
export function compareWithSparq(
  records: readonly LlamaNeedleRecord[],
  settings: LlamaNeedleSettings,
  reports: readonly { path: string; report: NeedleReport }[],
): DenseComparison {
  const dense = new Map<string, NeedleRecord>();
  const sources: DenseComparison['sources'] = reports.map(({ path, report }) => {
    const seed = report.seed ?? 1;
    if (report.ngram !== settings.ngram || seed !== settings.seed)
      return { path, used: false, note: `n-gram ${report.ngram}, seed ${seed}` };
    const result = report.results.find((x) => x.kv === settings.kv);
    if (!result) return { path, used: false, note: `no ${settings.kv} results` };
    for (const r of result.records) if (r.label === 'dense') dense.set(caseKey(r), r);
    return { path, used: true };
  });
  const out: DenseComparison = { sources, same: 0, differ: [], missing: 0 };
  for (const r of records) {
    const theirs = dense.get(caseKey(r));
    if (!theirs) out.missing++;
    else if (theirs.output === r.output) out.same++;
    else
      out.differ.push({
        task: r.task,
        length: r.length,
        depth: r.depth,
        llama: r.output,
        sparq: theirs.output,
        answer: r.answer,
      });
  }
  return out;
}

const percent = (hits: number, n: number) => (n ? `${Math.round((100 * hits) / n)}%` : '-');

/** The Markdown report. */
export function llamaNeedleMarkdown(report: LlamaNeedleReport): string {
  const { settings, llama } = report;
  const lines = [
    '# Needle cases in llama.cpp (dense)',
    '',
    `\`${report.command}\``,
    '',
    `Retrieval model (${settings.ngram}-gram, context ${settings.ctx}, written by \`sparq retrieval-model\`), ` +
      `llama.cpp ${llama.release}, ${settings.kv} KV, flash attention ${settings.flash ? 'on' : 'off'}, ` +
      `${llama.threads} threads, batch ${llama.batch}, prefixes ${llama.share ? 'shared' : 'not shared'}, seed ${settings.seed}.`,
    '',
  ];
  const header = ['task', ...report.lengths.map(String)];
  const rows = report.tasks.map((task) => [
    task,
    ...report.lengths.map((length) => {
      const rs = report.records.filter((r) => r.task === task && r.length === length);
      if (!rs.length) return '-';
      const tokens = rs.filter((r) => r.sameTokens).length;
      return `${percent(rs.filter((r) => r.exact).length, rs.length)} (${rs.length}${tokens < rs.length ? `; ${tokens} with the answer's tokens` : ''})`;
    }),
  ]);
  lines.push(
    "Exact answers (cases run; every token, the leading space included, is the answer's unless said):",
    '',
    markdownTable(header, rows),
  );
  const wall = report.windows.reduce((s, w) => s + w.wallSeconds, 0);
  const cpu = report.windows.reduce((s, w) => s + w.cpuSeconds, 0);
  lines.push(
    `Time: ${wall.toFixed(0)} s wall, ${cpu.toFixed(0)} s CPU over ${report.windows.length} invocation(s); ` +
      `load average at their starts: ${report.windows.map((w) => w.load[0].toFixed(1)).join(', ')}.`,
    '',
  );
  if (report.comparison) {
    const c = report.comparison;
    lines.push('## Against sparq dense', '');
    for (const s of c.sources) lines.push(`- \`${s.path}\`${s.used ? '' : `: not used (${s.note})`}`);
    lines.push(
      '',
      `Same output text: ${c.same}; different: ${c.differ.length}; not in the sparq reports (same task, length, depth and keys): ${c.missing}.`,
      '',
    );
    if (c.differ.length)
      lines.push(
        markdownTable(
          ['task', 'length', 'depth', 'answer', 'llama.cpp', 'sparq'],
          c.differ.map((x) => [x.task, x.length, x.depth, x.answer, JSON.stringify(x.llama), JSON.stringify(x.sparq)]),
        ),
      );
  }
  lines.push(
    '## Cases',
    '',
    markdownTable(
      [
        'task',
        'length',
        'depth',
        'answer',
        'output',
        'exact',
        'tokens',
        'min logit margin',
        'evaluated',
        'wall s',
        'CPU s',
      ],
      report.records.map((r) => [
        r.task,
        r.length,
        r.depth,
        r.answer,
        JSON.stringify(r.output),
        r.exact ? 'yes' : 'no',
        r.sameTokens ? 'same' : 'differ',
        r.margin.toFixed(2),
        r.evaluated,
        r.wallSeconds.toFixed(1),
        r.cpuSeconds.toFixed(1),
      ]),
      ['left', 'right', 'right', 'left', 'left', 'left', 'left', 'right', 'right', 'right', 'right'],
    ),
  );
  return lines.join('\n');
}

/** Records in report order: length, task, depth. */
export function sortLlamaRecords(
  records: LlamaNeedleRecord[],
  report: Pick<LlamaNeedleReport, 'tasks' | 'lengths' | 'depths'>,
): void {
  const rank = (r: LlamaNeedleRecord) =>
    (report.lengths.indexOf(r.length) * report.tasks.length + report.tasks.indexOf(r.task)) * report.depths.length +
    report.depths.indexOf(r.depth);
  records.sort((a, b) => rank(a) - rank(b));
}
