/**
 * The files of `sparq eval`'s sweep, from a small hand-made result: one table
 * row per configuration with the numbers given, and one plot series per method.
 */
import type { AttentionConfig } from '@sparq/llm';
import { describe, expect, it } from 'vitest';
import { evalCharts, evalMarkdown, type EvalReport } from '../../packages/cli/src/report/eval-report.ts';

const sparq = (k: number): AttentionConfig => ({ method: 'sparq', r: 2, k, l: Math.floor(k / 4), reallocate: true });
const lminf = (k: number): AttentionConfig => ({ method: 'lminf', r: 8, k, l: 0, reallocate: true });
const nll = { nll: 1.5, ppl: Math.exp(1.5), targets: 448, denseNll: 1.4, densePpl: Math.exp(1.4) };

const report: EvalReport = {
  command: 'sparq eval --quick',
  model: 'm.bin',
  data: 'd.txt',
  backend: 'reference',
  tokens: 1000,
  protocol: {},
  config: { headDim: 8 } as EvalReport['config'],
  methods: ['sparq', 'lminf'],
  targets: [0.5, 0.25],
  variants: [
    {
      variant: 'f32',
      weights: 'f32',
      kv: 'f32',
      seconds: 1,
      ppl: {
        dense: { ...nll, nll: 1.4, ppl: Math.exp(1.4) },
        rows: [
          { target: 0.5, config: sparq(40), compression: 0.51, countedRatio: 0.5, ...nll },
          { target: 0.5, config: lminf(100), compression: 0.49, countedRatio: 0.49, ...nll, ppl: 9.25 },
          { target: 0.25, config: sparq(20), compression: 0.26, countedRatio: 0.25, ...nll },
          { target: 0.25, config: lminf(50), compression: 0.24, countedRatio: 0.24, ...nll },
        ],
      },
      stats: {
        steps: 10,
        methods: [],
        sweep: [
          { r: 1, k: 8, topkAgreement: 0.25 },
          { r: 2, k: 8, topkAgreement: 0.5 },
        ],
        kurtosis: [[3, 4]],
      },
    },
  ],
};

describe('eval report', () => {
  it('tables every configuration with its numbers', () => {
    const md = evalMarkdown(report);
    expect(md).toContain('| 1/2 | lminf k=100 | 0.490 | 0.490 | 1.5000 | 9.2500 | 1.4000 |');
    expect(md).toContain('| 1/4 | sparq r=2 k=20 l=5 | 0.260 |');
    expect(md).toContain('| 2 | 0.500 |');
    expect(md).toContain('| 0 | 3.00 | 4.00 |');
  });
  it('draws one perplexity series per method, and the agreement sweep', () => {
    const charts = evalCharts(report);
    expect(Object.keys(charts).sort()).toEqual([
      'ppl-vs-compression.svg',
      'topk-agreement-vs-k.svg',
      'topk-agreement-vs-r.svg',
    ]);
    const ppl = charts['ppl-vs-compression.svg'];
    for (const name of ['sparq', 'lminf']) expect(ppl).toContain(`>${name}</text>`);
    expect(ppl.match(/<circle cx=/g)).toHaveLength(4); // one marker per data point
    expect(ppl.match(/<circle class="legend"/g)).toHaveLength(2); // one per series in the legend
  });
});
