/**
 * A self-contained SVG line chart (no scripts, no external fonts), for the result files that
 * `sparq eval` and `sparq bench` write next to their JSON and Markdown. One call draws one chart:
 * each series is a polyline with point markers, in the order given, with a legend. Axes can be
 * linear or logarithmic (base 2, for sequence lengths and compression ratios).
 */
export interface Series {
  name: string;
  /** [x, y] points; drawn in the order given. Non-finite points are skipped. */
  points: readonly (readonly [number, number])[];
  /** Dashed line, e.g. for a theoretical bound beside measurements. */
  dashed?: boolean;
}

export interface ChartOptions {
  title: string;
  /** One line under the title saying what the chart shows. */
  caption?: string;
  xLabel: string;
  yLabel: string;
  logX?: boolean;
  logY?: boolean;
  /** Force the y range to include these values (e.g. 0 or 1). */
  yInclude?: readonly number[];
  width?: number;
  height?: number;
}

/** Colours that stay distinct for readers with the common colour-vision deficiencies (Okabe-Ito). */
const PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000', '#f0e442'];
/** Point markers: series i takes colour i % 8 and marker floor(i / 8), so up to 24 series stay distinct. */
const MARKERS = ['circle', 'square', 'diamond'] as const;

/** A marker of the given kind centred at (x, y): a data point, or (class "legend") a legend entry's. */
function marker(kind: (typeof MARKERS)[number], x: number, y: number, colour: string, legend = false): string {
  const [cx, cy, cls] = [x.toFixed(1), y.toFixed(1), legend ? ' class="legend"' : ''];
  if (kind === 'circle') return `<circle${cls} cx="${cx}" cy="${cy}" r="3" fill="${colour}"/>`;
  if (kind === 'square')
    return `<rect${cls} x="${(x - 3).toFixed(1)}" y="${(y - 3).toFixed(1)}" width="6" height="6" fill="${colour}"/>`;
  const at = (dx: number, dy: number) => `${(x + dx).toFixed(1)},${(y + dy).toFixed(1)}`;
  return `<polygon${cls} points="${at(0, -4)} ${at(4, 0)} ${at(0, 4)} ${at(-4, 0)}" fill="${colour}"/>`;
}
const MARGIN = { left: 64, right: 16, top: 48, bottom: 48 };
const LEGEND_ROW = 18;

const escapeXml = (text: string): string =>
  text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');

/** A short label for a tick value: at most 4 significant digits, k/M suffixes for large ones. */
export function formatTick(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a === 0 || a >= 1e-3) return String(+v.toPrecision(4));
  return v.toExponential(1);
}

/** Tick positions: powers of two on a log axis, else 1/2/5 steps giving about five ticks. */
function ticks(lo: number, hi: number, log: boolean): number[] {
  if (log) {
    const out: number[] = [];
    for (let e = Math.floor(Math.log2(lo)); e <= Math.ceil(Math.log2(hi)); e++) out.push(2 ** e);
    // Every other power when there are many of them.
    return out.length > 8 ? out.filter((_, i) => i % 2 === 0) : out;
  }
  const span = hi - lo || Math.abs(hi) || 1;
  const raw = span / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
  return out;
}

/** Maps data values on [lo, hi] (log or linear) onto pixels [p0, p1]. */
function scale(lo: number, hi: number, log: boolean, p0: number, p1: number): (v: number) => number {
  const f = log ? Math.log2 : (v: number) => v;
  const [a, b] = [f(lo), f(hi)];
  return (v) => p0 + ((f(v) - a) / (b - a || 1)) * (p1 - p0);
}

/** The data range of one axis, padded so that points are not drawn on the frame. */
function range(values: number[], log: boolean, include: readonly number[] = []): [number, number] {
  const all = [...values, ...include].filter((v) => Number.isFinite(v) && (!log || v > 0));
  if (all.length === 0) return log ? [1, 2] : [0, 1];
  let [lo, hi] = [Math.min(...all), Math.max(...all)];
  if (log) return lo === hi ? [lo / 2, hi * 2] : [lo, hi];
  if (lo === hi) [lo, hi] = [lo - 1, hi + 1];
  const pad = (hi - lo) * 0.05;
  return [lo - (lo === 0 ? 0 : pad), hi + pad];
}

export function lineChart(series: readonly Series[], options: ChartOptions): string {
  const width = options.width ?? 640;
  const legendHeight = LEGEND_ROW * series.length;
  const height = (options.height ?? 400) + legendHeight;
  const plot = { x0: MARGIN.left, x1: width - MARGIN.right, y0: height - MARGIN.bottom - legendHeight, y1: MARGIN.top };
  const usable = (p: readonly [number, number]) =>
    Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!options.logX || p[0] > 0) && (!options.logY || p[1] > 0);
  const points = series.map((s) => s.points.filter(usable));
  const [xlo, xhi] = range(
    points.flat().map((p) => p[0]),
    !!options.logX,
  );
  const [ylo, yhi] = range(
    points.flat().map((p) => p[1]),
    !!options.logY,
    options.yInclude,
  );
  const sx = scale(xlo, xhi, !!options.logX, plot.x0, plot.x1);
  const sy = scale(ylo, yhi, !!options.logY, plot.y0, plot.y1);
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
  );
  parts.push(`<rect width="${width}" height="${height}" fill="#fff"/>`);
  parts.push(
    `<text x="${width / 2}" y="18" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(options.title)}</text>`,
  );
  if (options.caption)
    parts.push(`<text x="${width / 2}" y="36" text-anchor="middle" fill="#444">${escapeXml(options.caption)}</text>`);
  for (const t of ticks(xlo, xhi, !!options.logX).filter((t) => t >= xlo && t <= xhi)) {
    const x = sx(t).toFixed(1);
    parts.push(`<line x1="${x}" y1="${plot.y0}" x2="${x}" y2="${plot.y1}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${x}" y="${plot.y0 + 16}" text-anchor="middle">${formatTick(t)}</text>`);
  }
  for (const t of ticks(ylo, yhi, !!options.logY).filter((t) => t >= ylo && t <= yhi)) {
    const y = sy(t).toFixed(1);
    parts.push(`<line x1="${plot.x0}" y1="${y}" x2="${plot.x1}" y2="${y}" stroke="#e5e5e5"/>`);
    parts.push(
      `<text x="${plot.x0 - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${formatTick(t)}</text>`,
    );
  }
  parts.push(
    `<rect x="${plot.x0}" y="${plot.y1}" width="${plot.x1 - plot.x0}" height="${plot.y0 - plot.y1}" fill="none" stroke="#333"/>`,
  );
  parts.push(
    `<text x="${(plot.x0 + plot.x1) / 2}" y="${plot.y0 + 34}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
  );
  const yMid = (plot.y0 + plot.y1) / 2;
  parts.push(
    `<text x="16" y="${yMid}" text-anchor="middle" transform="rotate(-90 16 ${yMid})">${escapeXml(options.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const colour = PALETTE[i % PALETTE.length];
    const kind = MARKERS[Math.floor(i / PALETTE.length) % MARKERS.length];
    const xy = points[i].map(([x, y]) => [sx(x), sy(y)] as const);
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    if (xy.length > 1)
      parts.push(
        `<polyline points="${xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`,
      );
    for (const [x, y] of xy) parts.push(marker(kind, x, y, colour));
    const ly = plot.y0 + MARGIN.bottom + i * LEGEND_ROW;
    parts.push(
      `<line x1="${plot.x0}" y1="${ly}" x2="${plot.x0 + 24}" y2="${ly}" stroke="${colour}" stroke-width="2"${dash}/>`,
    );
    parts.push(marker(kind, plot.x0 + 12, ly, colour, true));
    parts.push(`<text x="${plot.x0 + 30}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

export interface HeatmapOptions {
  title: string;
  caption?: string;
  xLabel: string;
  yLabel: string;
  /** Column and row labels, left to right and top to bottom. */
  columns: readonly string[];
  rows: readonly string[];
}

/**
 * A grid of cells valued 0..1 (values[row][column]; NaN leaves a cell grey), coloured from red (0)
 * through yellow to green (1), each cell labelled with its value in percent: the needle-in-a-haystack plot.
 */
export function heatmap(values: readonly (readonly number[])[], options: HeatmapOptions): string {
  const cell = { w: 56, h: 22 };
  const left = 64;
  const top = 48;
  const width = left + options.columns.length * cell.w + 16;
  const height = top + options.rows.length * cell.h + 48;
  // Red -> yellow -> green in HSL hue 0..120.
  const colour = (v: number) =>
    Number.isFinite(v) ? `hsl(${Math.round(120 * Math.min(1, Math.max(0, v)))}, 70%, 55%)` : '#cccccc';
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${left}" y="18" font-size="14" font-weight="bold">${escapeXml(options.title)}</text>`,
  ];
  if (options.caption) parts.push(`<text x="${left}" y="34" fill="#555">${escapeXml(options.caption)}</text>`);
  options.rows.forEach((label, r) => {
    const y = top + r * cell.h;
    parts.push(`<text x="${left - 6}" y="${y + cell.h / 2 + 4}" text-anchor="end">${escapeXml(label)}</text>`);
    options.columns.forEach((_, c) => {
      const v = values[r]?.[c] ?? Number.NaN;
      const x = left + c * cell.w;
      parts.push(`<rect x="${x}" y="${y}" width="${cell.w - 1}" height="${cell.h - 1}" fill="${colour(v)}"/>`);
      if (Number.isFinite(v))
        parts.push(
          `<text x="${x + cell.w / 2}" y="${y + cell.h / 2 + 4}" text-anchor="middle">${Math.round(100 * v)}</text>`,
        );
    });
  });
  const bottom = top + options.rows.length * cell.h;
  options.columns.forEach((label, c) =>
    parts.push(
      `<text x="${left + c * cell.w + cell.w / 2}" y="${bottom + 14}" text-anchor="middle">${escapeXml(label)}</text>`,
    ),
  );
  parts.push(
    `<text x="${left + (options.columns.length * cell.w) / 2}" y="${bottom + 34}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
  );
  parts.push(
    `<text x="14" y="${top + (options.rows.length * cell.h) / 2}" text-anchor="middle" transform="rotate(-90 14 ${top + (options.rows.length * cell.h) / 2})">${escapeXml(options.yLabel)}</text>`,
  );
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
