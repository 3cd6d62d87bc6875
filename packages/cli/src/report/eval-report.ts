/**
 * The files `sparq eval` writes for a sweep: results.json (everything), results.md
 * (the tables) and SVG plots: perplexity against compression per method, SparQ's
 * top-k agreement against r and against k, greedy agreement against compression,
 * and SparQ's perplexity per weight / KV variant.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AttentionMethod } from '@sparq/core';
import { configLabel, type ModelConfig, type SweepResult } from '@sparq/llm';
import { markdownTable, type Align, type Cell } from './markdown-table.ts';
import { lineChart, type Series } from './svg-chart.ts';

export interface VariantResult extends SweepResult {
  variant: string;
  /** Storage of the matrices as loaded, e.g. 'int4/g32 (w2 f32)'. */
  weights: string;
  kv: string;
  seconds: number;
}

export interface EvalReport {
  command: string;
  model: string;
  data: string;
  backend: string;
  config: ModelConfig;
  /** Tokens of the perplexity text. */
  tokens: number;
  protocol: unknown;
  methods: AttentionMethod[];
  targets: number[];
  variants: VariantResult[];
}

const fixed = (x: number | null, digits: number): string =>
  x === null || !Number.isFinite(x) ? '-' : x.toFixed(digits);
const ratio = (x: number): string => `1/${+(1 / x).toPrecision(3)}`;

/** Writes the report's files into `dir`; their names. */
export function writeEvalReport(report: EvalReport, dir: string): string[] {
  const files: Record<string, string> = {
    'results.json': JSON.stringify(report, null, 2) + '\n',
    'results.md': evalMarkdown(report),
    ...evalCharts(report),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return Object.keys(files);
}

/** Every table of the report, one section per variant, then the variants side by side. */
export function evalMarkdown(report: EvalReport): string {
  const R: Align = 'right';
  const parts = [`Command: \`${report.command}\`; backend ${report.backend}; ${report.tokens} text tokens.\n`];
  for (const v of report.variants) {
    parts.push(`### ${v.variant}: weights ${v.weights}, KV ${v.kv} (${v.seconds.toFixed(0)} s)\n`);
    if (v.ppl) {
      const d = v.ppl.dense;
      parts.push(
        `Perplexity. Dense over every position: NLL ${d.nll.toFixed(4)}, ppl ${d.ppl.toFixed(4)} (${d.targets} targets). Method rows score the positions after the 64-position dense prefix of each window, beside dense on the same positions. compression: spec.md §3's ratio, the mean over the scored steps; counted: the elements the kernels read over spec.md §3's dense elements, summed over the run (long steps weigh more).\n`,
      );
      const rows: Cell[][] = v.ppl.rows.map((x) => [
        ratio(x.target),
        configLabel(x.config),
        fixed(x.compression, 3),
        fixed(x.countedRatio, 3),
        fixed(x.nll, 4),
        fixed(x.ppl, 4),
        fixed(x.denseNll, 4),
        fixed(x.densePpl, 4),
        fixed(x.ppl - x.densePpl, 4),
        x.targets,
      ]);
      parts.push(
        markdownTable(
          [
            'target',
            'method',
            'compression',
            'counted',
            'NLL',
            'ppl',
            'dense NLL',
            'dense ppl',
            'ppl - dense',
            'targets',
          ],
          rows,
          ['left', 'left', R, R, R, R, R, R, R, R],
        ),
      );
    }
    if (v.greedy) {
      const g = v.greedy;
      parts.push(
        `\nGreedy agreement: ${g.prompts} prompts of ${g.promptLength} tokens, ${g.count} tokens each; tokens generated before the first difference from dense.\n`,
      );
      const rows: Cell[][] = g.rows.map((x) => [
        ratio(x.target),
        configLabel(x.config),
        fixed(x.compression, 3),
        fixed(x.mean, 1),
        fixed(x.median, 1),
      ]);
      parts.push(markdownTable(['target', 'method', 'compression', 'mean', 'median'], rows, ['left', 'left', R, R, R]));
    }
    if (v.stats) {
      const s = v.stats;
      parts.push(
        `\nAttention statistics over ${s.steps} decode steps (every layer and query head), methods beside dense on the same q and cache.\n`,
      );
      const rows: Cell[][] = s.methods.map((x) => [
        x.label,
        fixed(x.topkAgreement, 3),
        fixed(x.mass, 3),
        fixed(x.alpha, 3),
        fixed(x.alphaError, 3),
        fixed(x.outputError, 3),
      ]);
      parts.push(
        markdownTable(
          ['method', 'top-k agreement', 'mass attended', 'SparQ alpha', '|alpha - mass|', 'output rel. error'],
          rows,
          ['left', R, R, R, R, R],
        ),
      );
      const ks = [...new Set(s.sweep.map((x) => x.k))];
      const rs = [...new Set(s.sweep.map((x) => x.r))];
      parts.push(`\nSparQ top-k agreement by r (rows) and k (columns), no local window:\n`);
      parts.push(
        markdownTable(
          ['r', ...ks.map((k) => `k=${k}`)],
          rs.map((r) => [r, ...ks.map((k) => fixed(s.sweep.find((x) => x.r === r && x.k === k)!.topkAgreement, 3))]),
          ['left', ...ks.map(() => R)],
        ),
      );
      parts.push(
        `\nQuery kurtosis m4/m2² over each head's ${report.config.headDim} components, by layer (rows) and head (columns). Gaussian data give 3, or about 3(d-1)/(d+1) = ${fixed((3 * (report.config.headDim - 1)) / (report.config.headDim + 1), 2)} for a sample of d = ${report.config.headDim}:\n`,
      );
      parts.push(
        markdownTable(
          ['layer', ...s.kurtosis[0].map((_, h) => `h${h}`)],
          s.kurtosis.map((row, l) => [l, ...row.map((x) => fixed(x, 2))]),
          ['left', ...s.kurtosis[0].map(() => R)],
        ),
      );
    }
    parts.push('');
  }
  const withPpl = report.variants.filter((v) => v.ppl);
  if (withPpl.length > 1) {
    const first = withPpl[0].ppl!.rows;
    parts.push(`### Perplexity by variant\n`);
    parts.push(
      "Each variant's perplexity, and in brackets its increase over the same variant's dense on the same positions.\n",
    );
    const header = ['target', 'method', ...withPpl.map((v) => v.variant)];
    const denseRow: Cell[] = ['-', 'dense, every position', ...withPpl.map((v) => fixed(v.ppl!.dense.ppl, 4))];
    const rows: Cell[][] = first.map((x, i) => [
      ratio(x.target),
      configLabel(x.config),
      ...withPpl.map(
        (v) => `${fixed(v.ppl!.rows[i].ppl, 4)} (+${fixed(v.ppl!.rows[i].ppl - v.ppl!.rows[i].densePpl, 4)})`,
      ),
    ]);
    parts.push(markdownTable(header, [denseRow, ...rows], ['left', 'left', ...withPpl.map(() => R)]));
  }
  return parts.join('\n');
}

/** The SVG plots, by file name. */
export function evalCharts(report: EvalReport): Record<string, string> {
  const charts: Record<string, string> = {};
  const v = report.variants[0];
  if (!v) return charts;
  const byMethod = <T extends { config: { method: string } }>(
    rows: readonly T[],
    point: (x: T) => [number, number],
  ): Series[] =>
    report.methods.map((method) => ({
      name: method,
      points: rows
        .filter((x) => x.config.method === method)
        .map(point)
        .sort((a, b) => a[0] - b[0]),
    }));
  if (v.ppl) {
    // The increase over dense on the same positions, on a log axis: it spans 1e-2 to 1e1.
    charts['ppl-vs-compression.svg'] = lineChart(
      byMethod(v.ppl.rows, (x) => [x.compression, x.ppl - x.densePpl]),
      {
        title: 'Perplexity increase over dense against compression',
        caption: `${v.variant}: ppl - dense ppl on the same positions; spec.md §3 ratio averaged over the scored steps`,
        xLabel: 'compression (method / dense data)',
        yLabel: 'ppl - dense ppl (log scale)',
        logX: true,
        logY: true,
      },
    );
  }
  if (v.greedy) {
    charts['greedy-vs-compression.svg'] = lineChart(
      byMethod(v.greedy.rows, (x) => [x.compression, x.mean]),
      {
        title: 'Greedy agreement against compression',
        caption: `${v.variant}: mean tokens before the first difference from dense (of ${v.greedy.count})`,
        xLabel: 'compression',
        yLabel: 'tokens',
        logX: true,
        yInclude: [0],
      },
    );
  }
  if (v.stats && v.stats.sweep.length > 0) {
    const sweep = v.stats.sweep;
    const ks = [...new Set(sweep.map((x) => x.k))];
    const rs = [...new Set(sweep.map((x) => x.r))];
    charts['topk-agreement-vs-r.svg'] = lineChart(
      ks.map((k) => ({
        name: `k=${k}`,
        points: sweep.filter((x) => x.k === k).map((x) => [x.r, x.topkAgreement] as [number, number]),
      })),
      {
        title: 'SparQ top-k agreement against r',
        caption: `${v.variant}: share of dense's top-k positions SparQ selects (no local window)`,
        xLabel: 'r (query components)',
        yLabel: 'top-k agreement',
        yInclude: [0, 1],
      },
    );
    charts['topk-agreement-vs-k.svg'] = lineChart(
      rs.map((r) => ({
        name: `r=${r}`,
        points: sweep.filter((x) => x.r === r).map((x) => [x.k, x.topkAgreement] as [number, number]),
      })),
      {
        title: 'SparQ top-k agreement against k',
        caption: `${v.variant}: share of dense's top-k positions SparQ selects (no local window)`,
        xLabel: 'k (positions)',
        yLabel: 'top-k agreement',
        logX: true,
        yInclude: [0, 1],
      },
    );
  }
  const withPpl = report.variants.filter((x) => x.ppl);
  if (withPpl.length > 1) {
    charts['ppl-by-variant.svg'] = lineChart(
      withPpl.map((x) => ({
        name: `sparq, ${x.variant}`,
        points: x
          .ppl!.rows.filter((row) => row.config.method === 'sparq')
          .map((row) => [row.compression, row.ppl - row.densePpl] as [number, number]),
      })),
      {
        title: 'SparQ perplexity increase by weight and KV type',
        caption: 'ppl - dense ppl of the same variant on the same positions',
        xLabel: 'compression',
        yLabel: 'ppl - dense ppl (log scale)',
        logX: true,
        logY: true,
      },
    );
  }
  return charts;
}
