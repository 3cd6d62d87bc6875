/**
 * SVG as strings: the views build a chart from these pieces and set it as a
 * section's HTML. Text is escaped; numbers are rounded to 0.1 px.
 */
const round = (x: number) => Math.round(x * 10) / 10;

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function svg(width: number, height: number, body: string[]): string {
  return `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${round(width)}" height="${round(height)}" viewBox="0 0 ${round(width)} ${round(height)}">${body.join('')}</svg>`;
}

/** A rectangle with a class, and a tooltip when `title` is given. */
export function rect(x: number, y: number, w: number, h: number, cls: string, title?: string): string {
  const tip = title === undefined ? '' : `<title>${escape(title)}</title>`;
  return `<rect class="${cls}" x="${round(x)}" y="${round(y)}" width="${round(Math.max(w, 0))}" height="${round(Math.max(h, 0))}">${tip}</rect>`;
}

export function text(x: number, y: number, content: string, anchor: 'start' | 'middle' | 'end' = 'start'): string {
  return `<text x="${round(x)}" y="${round(y)}" text-anchor="${anchor}">${escape(content)}</text>`;
}

export function line(x1: number, y1: number, x2: number, y2: number, cls = 'axis'): string {
  return `<line class="${cls}" x1="${round(x1)}" y1="${round(y1)}" x2="${round(x2)}" y2="${round(y2)}"/>`;
}

/** A section's heading, its one-line explanation, a legend (class, label pairs) and the chart. */
export function panel(title: string, explain: string, legend: [string, string][], chart: string, after = ''): string {
  const keys = legend
    .map(
      ([cls, label]) =>
        `<span><svg width="10" height="10"><rect class="${cls}" width="10" height="10"/></svg> ${escape(label)}</span>`,
    )
    .join('');
  return `<h2>${escape(title)}</h2><p class="explain">${escape(explain)}</p><div class="legend">${keys}</div>${chart}${after}`;
}

/** A number for a label: 3 significant digits, exponent form when small. */
export function fmt(x: number): string {
  if (x === 0) return '0';
  return Math.abs(x) >= 0.01 && Math.abs(x) < 1e5
    ? x
        .toPrecision(3)
        .replace(/(\.\d*?)0+$/, '$1')
        .replace(/\.$/, '')
    : x.toExponential(1);
}
