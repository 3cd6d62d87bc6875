/**
 * The files `sparq eval --task needle` writes: needle.json (every record), needle.md (exact-answer
 * accuracy per configuration and length, and the recall of the answer positions per layer and head)
 * and one SVG heatmap per KV type, method and ratio (length across, needle depth down, accuracy
 * over the tasks in each cell).
 */
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { NeedleRecord } from '@sparq/llm';
import { markdownTable, type Cell } from './markdown-table.ts';
import { formatTick, heatmap } from './svg-chart.ts';

export interface NeedleKvResult {
  kv: string;
  seconds: number;
  records: NeedleRecord[];
}

export interface NeedleReport {
  command: string;
  model: string;
  data: string;
  backend: string;
  ngram: number;
  /** Seed of the cases (depth index i draws seed + i); absent in reports written before it was recorded (seed 1). */
  seed?: number;
  tasks: string[];
  lengths: number[];
  depths: number[];
  results: NeedleKvResult[];
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN);
const percent = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : '-');
/** Configuration labels in the order of the records (dense first). */
const labelsOf = (records: readonly NeedleRecord[]) => [...new Set(records.map((r) => r.label))];

/** Accuracy over the records matching `keep`. */
const accuracy = (records: readonly NeedleRecord[], keep: (r: NeedleRecord) => boolean) =>
  mean(records.filter(keep).map((r) => (r.exact ? 1 : 0)));

/** Writes the report's files into `dir`; their names. */
export function writeNeedleReport(report: NeedleReport, dir: string): string[] {
  const written = ['needle.json', 'needle.md'];
  writeFileSync(join(dir, 'needle.json'), JSON.stringify(report, null, 1) + '\n');
  writeFileSync(join(dir, 'needle.md'), needleMarkdown(report));
  for (const { kv, records } of report.results) {
    for (const label of labelsOf(records)) {
      const name = `needle-${kv}-${label.replace(/[ /]+/g, '-')}.svg`;
      const values = report.depths.map((depth) =>
        report.lengths.map((length) =>
          accuracy(records, (r) => r.label === label && r.length === length && r.depth === depth),
        ),
      );
      const svg = heatmap(values, {
        title: `${label}, KV ${kv}: exact answers (%)`,
        caption: `${report.tasks.join(' + ')}; retrieval model, ${report.ngram}-gram`,
        xLabel: 'context length (tokens)',
        yLabel: 'needle depth',
        columns: report.lengths.map(formatTick),
        rows: report.depths.map((x) => `${Math.round(100 * x)}%`),
      });
      writeFileSync(join(dir, name), svg);
      written.push(name);
    }
  }
  return written;
}

/** The Markdown tables: accuracy per configuration and length (each task and both), and recall per layer and head. */
export function needleMarkdown(report: NeedleReport): string {
  const out = [
    `# Needle in a haystack\n`,
    `\`${report.command}\`\n`,
    `Model: ${report.model.includes('-gram') ? report.model : `${report.model}, ${report.ngram}-gram`}. Filler ${basename(report.data)}, backend ${report.backend}. Depths ${report.depths.map((x) => `${Math.round(100 * x)}%`).join(', ')}.\n`,
  ];
  for (const { kv, seconds, records } of report.results) {
    out.push(`## KV ${kv} (${seconds.toFixed(0)} s)\n`);
    out.push('Exact-answer accuracy over the depths (and tasks, in the last columns):\n');
    const header = [
      'configuration',
      'r',
      'k (at the longest)',
      'ratio',
      ...report.tasks.flatMap((t) => report.lengths.map((L) => `${t} ${formatTick(L)}`)),
      ...report.lengths.map((L) => `all ${formatTick(L)}`),
    ];
    const rows: Cell[][] = labelsOf(records).map((label) => {
      const mine = records.filter((r) => r.label === label);
      const longest = mine.filter((r) => r.length === Math.max(...report.lengths));
      return [
        label,
        mine[0].r,
        longest[0]?.k ?? '-',
        mean(mine.map((r) => r.compression)).toFixed(3),
        ...report.tasks.flatMap((t) =>
          report.lengths.map((L) => percent(accuracy(mine, (r) => r.task === t && r.length === L))),
        ),
        ...report.lengths.map((L) => percent(accuracy(mine, (r) => r.length === L))),
      ];
    });
    out.push(markdownTable(header, rows, ['left']) + '\n');
    const layers = records[0]?.recall.length ?? 0;
    const heads = records[0]?.recall[0]?.length ?? 0;
    out.push(
      'Recall of the answer positions (share of decode steps whose attended set held the position the step copies), per layer and head, over every case. Layer 2 head 0 is the match head; layer 1 holds previous-token heads, which do not read the needle:\n',
    );
    const recallHeader = [
      'configuration',
      ...Array.from({ length: layers * heads }, (_, i) => `L${Math.floor(i / heads) + 1} h${i % heads}`),
    ];
    const recallRows: Cell[][] = labelsOf(records).map((label) => {
      const mine = records.filter((r) => r.label === label);
      return [
        label,
        ...Array.from({ length: layers * heads }, (_, i) =>
          mean(mine.map((r) => r.recall[Math.floor(i / heads)][i % heads]).filter(Number.isFinite)).toFixed(3),
        ),
      ];
    });
    out.push(markdownTable(recallHeader, recallRows, ['left']) + '\n');
  }
  return out.join('\n');
}
