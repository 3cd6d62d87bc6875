import { describe, expect, it } from 'vitest';
import { markdownTable } from '../../packages/cli/src/report/markdown-table.ts';
import { formatTick, lineChart } from '../../packages/cli/src/report/svg-chart.ts';

/** The marker centres of a chart, in drawing order. */
const markers = (svg: string): [number, number][] =>
  [...svg.matchAll(/<circle cx="([\d.-]+)" cy="([\d.-]+)"/g)].map((m) => [Number(m[1]), Number(m[2])]);

describe('markdownTable', () => {
  it('writes header, alignment rule and rows, escaping pipes', () => {
    const text = markdownTable(
      ['method', 'ppl'],
      [
        ['sparq | r 2', 1.5],
        ['dense', 2],
      ],
      ['left', 'right'],
    );
    expect(text.split('\n')).toEqual([
      '| method | ppl |',
      '| --- | ---: |',
      '| sparq \\| r 2 | 1.5 |',
      '| dense | 2 |',
      '',
    ]);
  });
  it('rejects a row whose length differs from the header, naming both', () => {
    expect(() => markdownTable(['a', 'b'], [[1]])).toThrow('table row 0 has 1 cells, the header has 2');
  });
});

describe('lineChart', () => {
  it('places points by value: larger x to the right, larger y higher up', () => {
    const svg = lineChart(
      [
        {
          name: 'a',
          points: [
            [1, 10],
            [2, 30],
            [3, 20],
          ],
        },
      ],
      { title: 't', xLabel: 'x', yLabel: 'y' },
    );
    const [p1, p2, p3] = markers(svg);
    expect(p1[0]).toBeLessThan(p2[0]);
    expect(p2[0]).toBeLessThan(p3[0]);
    // SVG's y grows downwards.
    expect(p2[1]).toBeLessThan(p3[1]);
    expect(p3[1]).toBeLessThan(p1[1]);
  });
  it('spaces powers of two evenly on a log axis', () => {
    const svg = lineChart(
      [
        {
          name: 'a',
          points: [
            [1024, 1],
            [2048, 2],
            [4096, 3],
            [16384, 4],
          ],
        },
      ],
      { title: 't', xLabel: 'S', yLabel: 'y', logX: true },
    );
    const xs = markers(svg).map((p) => p[0]);
    expect(xs[1] - xs[0]).toBeCloseTo(xs[2] - xs[1], 0);
    expect(xs[3] - xs[2]).toBeCloseTo(2 * (xs[1] - xs[0]), 0);
  });
  it('skips non-finite points and points a log axis cannot show', () => {
    const svg = lineChart(
      [
        {
          name: 'a',
          points: [
            [1, 1],
            [2, Number.NaN],
            [0, 3],
            [4, 2],
          ],
        },
      ],
      { title: 't', xLabel: 'x', yLabel: 'y', logX: true },
    );
    expect(markers(svg)).toHaveLength(2);
    expect(svg).not.toContain('NaN');
  });
  it('escapes text and draws one legend entry per series', () => {
    const svg = lineChart(
      [
        { name: 'k < S', points: [[1, 1]] },
        { name: 'bound', points: [[1, 2]], dashed: true },
      ],
      { title: 'a & b', xLabel: 'x', yLabel: 'y' },
    );
    expect(svg).toContain('a &amp; b');
    expect(svg).toContain('k &lt; S');
    expect(svg).toContain('stroke-dasharray');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  });
  it('keeps up to 24 series apart: 8 colours, then the next marker shape', () => {
    const series = Array.from({ length: 24 }, (_, i) => ({ name: `s${i}`, points: [[1, i] as [number, number]] }));
    const svg = lineChart(series, { title: 't', xLabel: 'x', yLabel: 'y' });
    // Data points only (legend markers carry class="legend" first).
    const drawn = [...svg.matchAll(/<(circle|rect|polygon) (?:cx|x|points)=[^>]*fill="(#[0-9a-f]{6})"/g)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(drawn).toHaveLength(24);
    expect(new Set(drawn).size).toBe(24);
    expect(drawn.slice(0, 8).every((d) => d.startsWith('circle'))).toBe(true);
    expect(drawn.slice(8, 16).every((d) => d.startsWith('rect'))).toBe(true);
  });
  it('formats ticks compactly', () => {
    expect([formatTick(16384), formatTick(0.125), formatTick(2e6), formatTick(0)]).toEqual([
      '16.4k',
      '0.125',
      '2M',
      '0',
    ]);
  });
});
