/**
 * The five teaching views of one lesson (protocol.ts), as SVG panels.
 * Positions run left to right on the token strip, one column each.
 */
import type { Lesson } from './protocol.ts';
import { fmt, line, panel, rect, svg, text } from './svg.ts';

const METHOD_NAMES: Record<string, string> = {
  dense: 'dense',
  sparq: 'SparQ',
  oracle: 'oracle',
  h2o: 'H2O',
  lminf: 'LM-Infinite',
};
/** Width of one position's column, and of the label gutter on the left. */
const COL = 14;
const GUTTER = 130;

/** Step 1: the group's |q_i| summed over its heads; SparQ keeps the r largest components. */
export function queryView(a: Lesson): string {
  const w = Math.max(18, Math.min(40, 800 / a.d));
  const h = 140;
  const max = Math.max(...a.absQ, 1e-30);
  const body: string[] = [];
  a.absQ.forEach((v, i) => {
    const picked = a.i1.includes(i);
    const bh = (v / max) * (h - 40);
    body.push(
      rect(
        10 + i * w,
        h - 20 - bh,
        w - 2,
        bh,
        picked ? 'bar picked' : 'bar',
        `component ${i}: sum |q_i| ${fmt(v)}${picked ? ' (in i1)' : ''}`,
      ),
    );
    if (a.d <= 64 || i % 8 === 0) body.push(text(10 + i * w + w / 2, h - 6, String(i), 'middle'));
  });
  const taus = a.tau.map((t, i) => `head ${a.head * a.g + i}: τ ${fmt(t)}`).join(', ');
  return panel(
    '1. Query components',
    `Sum over the group's ${a.g} query head${a.g > 1 ? 's' : ''} of |q_i| per component: SparQ reads only the r = ${a.r} largest (orange) of each key, and softens ŝ by τ = sqrt(d · share of |q| they carry).`,
    [
      ['bar picked', `i1: the ${a.r} components read`],
      ['bar', 'components skipped'],
    ],
    svg(20 + a.d * w, h, body),
    `<p class="explain">${taus}</p>`,
  );
}

/** The token labels under a strip of S columns (every position when they fit). */
function axis(a: Lesson, pieces: readonly string[], y: number): string[] {
  const out: string[] = [];
  const every = Math.ceil(40 / COL);
  for (let j = 0; j < a.S; j++) {
    if (j % every === 0 || (j === a.S - 1 && j % every >= every / 2))
      out.push(text(GUTTER + j * COL + COL / 2, y, String(j), 'middle'));
  }
  out.push(`<title>${pieces.slice(0, a.S).join('')}</title>`);
  return out;
}

/** Step 2: ŝ and s over the positions, SparQ's k chosen, the local window, dense's true top-k. */
export function scoresView(a: Lesson, pieces: readonly string[]): string {
  const half = 90;
  const width = GUTTER + a.S * COL + 10;
  const top = 10;
  const mid = top + half;
  const marks = mid + half + 10;
  const body: string[] = [];
  body.push(
    rect(
      GUTTER + a.localFrom * COL,
      top,
      (a.S - a.localFrom) * COL,
      2 * half,
      'local',
      `local window: the last l = ${a.l} positions`,
    ),
  );
  const max = Math.max(...a.sHat, ...a.s, 1e-30);
  for (let j = 0; j < a.S; j++) {
    const x = GUTTER + j * COL + 2;
    const up = (a.sHat[j] / max) * half;
    const down = (a.s[j] / max) * half;
    const token = JSON.stringify(pieces[j] ?? '');
    body.push(rect(x, mid - up, COL - 4, up, 'approx', `position ${j} ${token}: ŝ ${fmt(a.sHat[j])}`));
    body.push(rect(x, mid, COL - 4, down, 'exact', `position ${j} ${token}: s ${fmt(a.s[j])}`));
  }
  body.push(line(GUTTER, mid, width - 10, mid));
  body.push(text(GUTTER - 6, top + 12, 'ŝ (approx.)', 'end'), text(GUTTER - 6, mid + half - 2, 's (true)', 'end'));
  body.push(
    text(GUTTER - 6, marks + 9, `SparQ's ${a.sparq.length}`, 'end'),
    text(GUTTER - 6, marks + 25, `dense top-${a.denseTop.length}`, 'end'),
  );
  for (const j of a.sparq)
    body.push(rect(GUTTER + j * COL + 2, marks, COL - 4, 10, 'chosen', `SparQ attends position ${j}`));
  for (const j of a.denseTop)
    body.push(
      `<circle class="dense-top" cx="${GUTTER + j * COL + COL / 2}" cy="${marks + 21}" r="4"><title>dense top-k: position ${j}</title></circle>`,
    );
  body.push(...axis(a, pieces, marks + 44));
  const overlap = a.sparq.filter((j) => a.denseTop.includes(j)).length;
  return panel(
    '2. Approximate and true scores',
    `ŝ (up) ranks the ${a.S} positions from r = ${a.r} components; SparQ attends its top k = ${a.k} (local window of l = ${a.l} first). s (down) is the true softmax: ${overlap} of dense's top-${a.denseTop.length} are among SparQ's.`,
    [
      ['approx', 'ŝ, group mean'],
      ['exact', 's, group mean'],
      ['chosen', "SparQ's chosen positions"],
      ['local', 'local window'],
      ['dense-top', "dense's true top-k"],
    ],
    svg(width, marks + 52, body),
  );
}

/** Step 3: alpha against the true mass of the chosen positions, and the output error with and without reallocation. */
export function alphaView(a: Lesson): string {
  const h = 150;
  const bar = 30;
  const body: string[] = [line(40, h - 20, 40 + a.g * (3 * bar + 20), h - 20)];
  for (let t = 0; t < a.g; t++) {
    const x = 44 + t * (3 * bar + 20);
    const scale = h - 40;
    body.push(rect(x, h - 20 - a.alpha[t] * scale, bar, a.alpha[t] * scale, 'alpha', `alpha ${fmt(a.alpha[t])}`));
    body.push(
      rect(x + bar + 4, h - 20 - a.mass[t] * scale, bar, a.mass[t] * scale, 'mass', `true mass ${fmt(a.mass[t])}`),
    );
    body.push(text(x + bar, h - 6, `head ${a.head * a.g + t}`, 'middle'));
    body.push(
      text(x + bar / 2, h - 24 - a.alpha[t] * scale, fmt(a.alpha[t]), 'middle'),
      text(x + 1.5 * bar + 4, h - 24 - a.mass[t] * scale, fmt(a.mass[t]), 'middle'),
    );
  }
  body.push(text(36, h - 20 - (h - 40) + 4, '1', 'end'), text(36, h - 18, '0', 'end'));
  const after =
    `<p>Output relative error against dense (this group): <b>${fmt(a.errReallocate)}</b> with the mean-value reallocation, ${fmt(a.errPlain)} without it. ` +
    `Reallocation gives the mass SparQ skipped, 1 − α, to the mean of all values: y = α·y_k + (1 − α)·v̄.</p>`;
  return panel(
    '3. Coverage alpha and reallocation',
    `α is the share of ŝ on SparQ's ${a.sparq.length} positions; beside it, the share of the true s on the same positions (per query head).`,
    [
      ['alpha', 'α (from ŝ)'],
      ['mass', 'true softmax mass'],
    ],
    svg(60 + a.g * (3 * bar + 20), h, body),
    after,
  );
}

/** The positions each method attends at this step, one row per method. */
export function baselinesView(a: Lesson, pieces: readonly string[]): string {
  const rows: [string, number[], string][] = [
    ['SparQ', a.sparq, 'kept sparq'],
    ['oracle (top-k)', a.kept.oracle, 'kept'],
    ['H2O', a.kept.h2o, 'kept'],
    ['LM-Infinite', a.kept.lminf, 'kept'],
  ];
  const rowH = 18;
  const body: string[] = [];
  rows.forEach(([name, kept, cls], r) => {
    const y = 6 + r * (rowH + 6);
    const set = new Set(kept);
    const hits = kept.filter((j) => a.denseTop.includes(j)).length;
    body.push(text(GUTTER - 6, y + 13, `${name} (${hits}/${a.denseTop.length})`, 'end'));
    for (let j = 0; j < a.S; j++)
      body.push(
        rect(
          GUTTER + j * COL + 1,
          y,
          COL - 2,
          rowH,
          set.has(j) ? cls : 'empty',
          `${name}: position ${j} ${set.has(j) ? 'kept' : 'not read'}`,
        ),
      );
  });
  const bottom = 6 + rows.length * (rowH + 6);
  body.push(...axis(a, pieces, bottom + 12));
  return panel(
    '4. What each method keeps',
    `Positions attended at this step (KV head ${a.head}); in brackets, how many of dense's top-${a.denseTop.length} each one has. H2O evicts for good from its running scores, LM-Infinite keeps sinks and a recent window, the oracle reads all of K.`,
    [
      ['kept sparq', 'SparQ'],
      ['kept', 'baseline keeps'],
      ['empty', 'not read'],
    ],
    svg(GUTTER + a.S * COL + 10, bottom + 20, body),
  );
}

/** Data read per token in this layer by each method: spec.md §3's formula and the kernel's count. */
export function readsView(a: Lesson): string {
  const dense = a.reads.find((m) => m.method === 'dense')!;
  const max = Math.max(...a.reads.flatMap((m) => [m.formula, m.counted]));
  const rowH = 16;
  const width = 560;
  const scale = (width - GUTTER - 140) / max;
  const body: string[] = [];
  a.reads.forEach((m, i) => {
    const y = 6 + i * (2 * rowH + 8);
    body.push(text(GUTTER - 6, y + rowH + 4, METHOD_NAMES[m.method], 'end'));
    body.push(rect(GUTTER, y, m.formula * scale, rowH - 1, 'formula', `spec.md §3 formula: ${m.formula} elements`));
    body.push(rect(GUTTER, y + rowH, m.counted * scale, rowH - 1, 'counted', `kernel count: ${m.counted} elements`));
    body.push(text(GUTTER + m.formula * scale + 4, y + 12, `${m.formula} (${fmt(m.formula / dense.formula)}× dense)`));
    body.push(text(GUTTER + m.counted * scale + 4, y + rowH + 12, `${m.counted} counted`));
  });
  return panel(
    '5. Data read per token',
    `Elements of K, V and side data read in layer ${a.layer} at this step (all KV heads, S = ${a.S}): spec.md §3's formula (light) and what the reference kernel counted as it read (dark).`,
    [
      ['formula', 'spec.md §3 formula'],
      ['counted', "kernel's count"],
    ],
    svg(width, 10 + a.reads.length * (2 * rowH + 8), body),
  );
}
