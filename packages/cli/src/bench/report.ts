/**
 * The result files of `sparq bench`: the JSON document, its Markdown tables
 * and the SVG plots (speed-up against S, tokens/s against S, % of read
 * bandwidth), drawn with the shared report renderers.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { markdownTable, type Align, type Cell } from '../report/markdown-table.ts';
import { lineChart, type ChartOptions, type Series } from '../report/svg-chart.ts';
import type { WholeModelMemory } from './bench-model.ts';
import type { EndToEndRow } from './end-to-end.ts';
import type { KernelRow } from './kernel-sweep.ts';
import type { MachineInfo } from './machine.ts';

export interface BenchResults {
  /** The command line, as given. */
  command: string;
  date: string;
  machine: MachineInfo;
  /** The native kernel path in use, or null without the addon. */
  nativeKernel: string | null;
  options: Record<string, unknown>;
  bandwidth: { threads: number; gbPerS: number }[];
  kernels: KernelRow[];
  model: { source: 'generated' | 'shape' | 'file'; description: string; weightBytes: number } | null;
  /** --shape: the whole model's memory at each end-to-end S and KV type (what the slice stands for). */
  wholeModel: WholeModelMemory[];
  endToEnd: EndToEndRow[];
  llamaCpp: { status: 'ran' | 'absent' | 'disabled' | 'skipped'; reason?: string; version?: string };
}

/** SVG files written, by chart. */
export const CHART_FILES = {
  speedup: 'speedup.svg',
  decode: 'decode-tokens.svg',
  prefill: 'prefill-tokens.svg',
  bandwidth: 'bandwidth.svg',
  memory: 'memory.svg',
} as const;

const f = (x: number, digits: number) => (Number.isFinite(x) ? x.toFixed(digits) : '-');
const pct = (x: number | null) => (x === null ? '-' : `${x.toFixed(0)}%`);
/** k as a fraction of S, the way the sweep chose it. */
const kLabel = (r: { k: number; S: number }) =>
  r.k === Math.floor(r.S / 8) ? 'S/8' : r.k === Math.floor(r.S / 16) ? 'S/16' : String(r.k);
const methodLabel = (r: { method: string; k: number; S: number; r: number }) =>
  r.method === 'dense' ? 'dense' : `SparQ r ${r.r}, k ${kLabel(r)}`;

/** Groups `rows` by `key`, in first-seen order. */
function groupBy<T>(rows: readonly T[], key: (row: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) groups.set(key(row), [...(groups.get(key(row)) ?? []), row]);
  return groups;
}

const kernelGroup = (r: KernelRow) => `${r.backend} ${r.threads}t ${r.kv} ${r.layout} g${r.group}`;
const mib = (bytes: number | null) => (bytes === null ? '-' : f(bytes / 2 ** 20, bytes < 10 * 2 ** 20 ? 2 : 0));

function kernelTable(rows: readonly KernelRow[]): string {
  const header = [
    'backend',
    'threads',
    'KV',
    'layout',
    'GQA group',
    'S',
    'read GB/s',
    'dense ms',
    'dense % BW',
    'SparQ k=S/8 ms',
    'speed-up',
    'data ratio',
    '% of ratio',
    'SparQ k=S/16 ms',
    'speed-up',
    'data ratio',
    '% of ratio',
  ];
  const align: Align[] = ['left', 'right', 'left', 'left', ...Array<Align>(13).fill('right')];
  const out: Cell[][] = [];
  for (const [, g] of groupBy(rows, (r) => `${kernelGroup(r)} ${r.S}`)) {
    const [d, ...sparq] = g;
    out.push([
      d.backend,
      d.threads,
      d.kv,
      d.layout,
      d.group,
      d.S,
      d.readGBs === null ? '-' : f(d.readGBs, 1),
      f(d.ms, 3),
      pct(d.pctBandwidth),
      ...sparq.flatMap((s) => [
        f(s.ms, 3),
        `${f(s.speedup, 2)}x`,
        `${f(s.dataRatio, 2)}x`,
        `${f(s.pctOfDataRatio, 0)}%`,
      ]),
    ]);
  }
  return markdownTable(header, out, align);
}

function endToEndTable(rows: readonly EndToEndRow[]): string {
  const header = [
    'threads',
    'S',
    'system',
    'decode attention',
    'KV',
    'prefill tok/s',
    'decode tok/s',
    'decode % BW',
    'prefill vs llama.cpp',
    'decode vs llama.cpp',
    'KV MiB',
    'peak RSS MiB',
    'RSS before MiB',
  ];
  const align: Align[] = ['right', 'right', 'left', 'left', 'left', ...Array<Align>(8).fill('right')];
  const out: Cell[][] = [];
  for (const [, g] of groupBy(rows, (r) => `${r.threads} ${r.S} ${r.kv}`)) {
    const llama = g.find((r) => r.system === 'llama.cpp');
    const vs = (x: number, y: number | undefined) => (y ? `${f(x / y, 2)}x` : '-');
    for (const r of g) {
      out.push([
        r.threads,
        r.S,
        r.system,
        methodLabel(r),
        r.kv,
        f(r.prefillTokS, 1),
        f(r.decodeTokS, 1),
        pct(r.pctBandwidth),
        vs(r.prefillTokS, llama?.prefillTokS),
        vs(r.decodeTokS, llama?.decodeTokS),
        mib(r.kvBytes),
        mib(r.peakRssBytes),
        mib(r.startRssBytes),
      ]);
    }
  }
  return markdownTable(header, out, align);
}

export function markdownReport(res: BenchResults): string {
  const parts = [`# sparq bench\n`, `\`${res.command}\` (${res.date})\n`];
  parts.push(
    `- CPU: ${res.machine.cpu}, ${res.machine.cores} logical cores; SIMD flags: ${res.machine.simdFlags.join(' ') || 'none reported'}`,
  );
  parts.push(`- native kernel: ${res.nativeKernel ?? 'unavailable'}`);
  parts.push(
    `- read bandwidth (measured in this run): ${res.bandwidth.map((b) => `${b.threads} thread${b.threads === 1 ? '' : 's'} ${b.gbPerS.toFixed(1)} GB/s`).join(', ') || 'not measured'}`,
  );
  const lc = res.llamaCpp;
  parts.push(
    `- llama.cpp: ${lc.status}${lc.version ? ` (release ${lc.version})` : ''}${lc.reason ? `: ${lc.reason}` : ''}\n`,
  );
  if (res.kernels.length > 0) {
    parts.push('## Attention kernels: one decode step, all heads (median ms)\n');
    parts.push(
      `Data ratio: spec.md §3's dense elements read over SparQ's; % of ratio: measured speed-up over it. Read GB/s: the read bandwidth probed just before the row; % BW: spec.md §3 bytes per second over it.\n`,
    );
    parts.push(kernelTable(res.kernels));
  }
  if (res.endToEnd.length > 0 && res.model) {
    parts.push(`## End to end: ${res.model.description}\n`);
    parts.push(
      `Prefill of S prompt tokens, then decode steps at context S (fastest repetition; llama.cpp: the faster of flash attention on and off, per metric). SparQ rows share sparq's prefill and memory. KV MiB: the cache each system allocated; peak RSS: the process's during the system's runs (weights included), RSS before: at their start.\n`,
    );
    parts.push(endToEndTable(res.endToEnd));
  }
  if (res.wholeModel.length > 0) {
    parts.push(`\n## Memory of the whole model (every layer), projected\n`);
    parts.push(
      `Weights: the whole file of this shape; sparq's KV: the SparQ layout (K rows, K transposed, V rows; core's kvCacheBytes), scratch: memory-plan.ts's bound; llama.cpp's KV: K and V rows.\n`,
    );
    const gib = (b: number) => f(b / 2 ** 30, 2);
    const out = res.wholeModel.map((m) => [
      m.S,
      m.kv,
      gib(m.weightBytes),
      gib(m.sparqKvBytes),
      gib(m.scratchBytes),
      gib(m.sparqTotal),
      gib(m.llamaCppKvBytes),
      gib(m.llamaCppTotal),
      `${f(m.sparqKvBytes / m.llamaCppKvBytes, 2)}x`,
    ]);
    parts.push(
      markdownTable(
        [
          'S',
          'KV',
          'weights GiB',
          'sparq KV GiB',
          'sparq scratch GiB',
          'sparq total GiB',
          'llama.cpp KV GiB',
          'llama.cpp total GiB',
          'KV vs llama.cpp',
        ],
        out,
        ['right', 'left', ...Array<Align>(7).fill('right')],
      ),
    );
  }
  return parts.join('\n') + '\n';
}

type ChartKey = keyof typeof CHART_FILES;

/** The charts that have data (a part skipped draws none), by CHART_FILES key. */
export function charts(res: BenchResults): Partial<Record<ChartKey, string>> {
  const point = (x: number, y: number) => [x, y] as const;
  const kernelSparq = res.kernels.filter((r) => r.method === 'sparq');
  const speedup: Series[] = [...groupBy(kernelSparq, (r) => `${kernelGroup(r)}, k ${kLabel(r)}`)].map(([name, g]) => ({
    name: `kernel ${name}`,
    points: g.map((r) => point(r.S, r.speedup)),
  }));
  for (const [name, g] of groupBy(
    kernelSparq.filter((r) => kernelGroup(r) === kernelGroup(kernelSparq[0])),
    (r) => kLabel(r),
  )) {
    speedup.push({ name: `data ratio, k ${name}`, points: g.map((r) => point(r.S, r.dataRatio)), dashed: true });
  }
  const e2eSparq = res.endToEnd.filter((r) => r.system === 'sparq');
  for (const [name, g] of groupBy(
    e2eSparq.filter((r) => r.method === 'sparq'),
    (r) => `${r.threads}t ${r.kv}, k ${kLabel(r)}`,
  )) {
    const dense = (r: EndToEndRow) =>
      e2eSparq.find((d) => d.method === 'dense' && d.S === r.S && d.threads === r.threads && d.kv === r.kv)!;
    speedup.push({
      name: `end-to-end decode ${name}`,
      points: g.map((r) => point(r.S, r.decodeTokS / dense(r).decodeTokS)),
    });
  }
  const e2eSeries = (y: (r: EndToEndRow) => number | null, rows: readonly EndToEndRow[]) =>
    [...groupBy(rows, (r) => `${r.system} ${methodLabel(r)}, ${r.kv}, ${r.threads}t`)].map(([name, g]) => ({
      name,
      points: g.map((r) => point(r.S, y(r) ?? NaN)),
    }));
  const bandwidth: Series[] = [
    ...[...groupBy(res.kernels, (r) => `kernel ${kernelGroup(r)} ${methodLabel(r)}`)].map(([name, g]) => ({
      name,
      points: g.map((r) => point(r.S, r.pctBandwidth ?? NaN)),
    })),
    ...e2eSeries((r) => r.pctBandwidth, res.endToEnd).map((s) => ({ ...s, name: `decode ${s.name}`, dashed: true })),
  ];
  const prefillRows = res.endToEnd.filter((r) => r.method === 'dense');
  const common = { xLabel: 'context length S (tokens)', logX: true };
  const drawn: Partial<Record<ChartKey, string>> = {};
  const draw = (key: ChartKey, series: Series[], options: ChartOptions) => {
    if (series.some((x) => x.points.length > 0)) drawn[key] = lineChart(series, options);
  };
  draw('speedup', speedup, {
    ...common,
    title: 'SparQ speed-up over dense attention',
    caption: 'measured (solid) against spec.md §3 data ratio (dashed)',
    yLabel: 'speed-up (x)',
    yInclude: [0, 1],
  });
  draw(
    'decode',
    e2eSeries((r) => r.decodeTokS, res.endToEnd),
    { ...common, title: 'Decode tokens/s', caption: res.model?.description, yLabel: 'tokens/s', yInclude: [0] },
  );
  draw(
    'prefill',
    e2eSeries((r) => r.prefillTokS, prefillRows).map((s) => ({ ...s, name: s.name.replace(' dense', '') })),
    { ...common, title: 'Prefill tokens/s', caption: res.model?.description, yLabel: 'tokens/s', yInclude: [0] },
  );
  const memory: Series[] = [
    ...e2eSeries((r) => r.kvBytes / 2 ** 30, prefillRows).map((x) => ({
      ...x,
      name: `KV ${x.name.replace(' dense', '')}`,
      dashed: true,
    })),
    ...e2eSeries((r) => (r.peakRssBytes === null ? null : r.peakRssBytes / 2 ** 30), prefillRows).map((x) => ({
      ...x,
      name: `peak RSS ${x.name.replace(' dense', '')}`,
    })),
  ];
  draw('memory', memory, { ...common, title: 'Memory', caption: res.model?.description, yLabel: 'GiB', yInclude: [0] });
  draw('bandwidth', bandwidth, {
    ...common,
    title: '% of measured read bandwidth',
    caption: 'kernels (solid), end-to-end decode with weights (dashed)',
    yLabel: '% of read bandwidth',
    yInclude: [0, 100],
  });
  return drawn;
}

/** Writes results.json, results.md and the SVGs into `dir`; returns the paths. */
export function writeReport(dir: string, res: BenchResults): string[] {
  mkdirSync(dir, { recursive: true });
  const files: [string, string][] = [
    ['results.json', JSON.stringify(res, null, 2) + '\n'],
    ['results.md', markdownReport(res)],
  ];
  for (const [key, svg] of Object.entries(charts(res)) as [ChartKey, string][]) files.push([CHART_FILES[key], svg]);
  return files.map(([name, text]) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  });
}
