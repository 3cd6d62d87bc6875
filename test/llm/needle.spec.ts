/**
 * `sparq eval --task needle` (issue 25) on the retrieval model, at 1-2k tokens:
 * - the prompts: lengths exact, the answer inside the asked needle, its positions right;
 * - each method's exact answer and recall where the outcome is known without running it: dense
 *   and oracle (which attends the right position by its exact scores) answer with recall 1 on the
 *   match head; LM-Infinite with the needle outside its sinks and window cannot see it (recall 0)
 *   and does not answer; SparQ with r = d and k >= S is dense;
 * - the CLI's one-configuration JSON, and the sweep's files (tables and one heatmap per
 *   configuration, with the accuracy the records give).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '@sparq/core';
import {
  RETRIEVAL_HEAD_DIM,
  buildModel,
  fillerTokens,
  needleCase,
  needleConfigs,
  NeedleRunner,
  readTokenizerFile,
  retrievalModel,
  runNeedleCase,
  type NeedleConfig,
  type NeedleRecord,
} from '@sparq/llm';
import { writeNeedleReport, type NeedleReport } from '../../packages/cli/src/report/needle-report.ts';
import { engines, referenceEngine } from '../support/backends.ts';
import { sharedFile } from '../support/shared.ts';
import { runSparq } from './support.ts';

const tok512 = sharedFile('models/tok512.bin');
const text = sharedFile('data/tinystories_val.txt');
const missing = tok512.missing ?? text.missing;
const describeData = missing ? describe.skip : describe;
const fast: Engine = engines.find((e) => e.name === 'native') ?? referenceEngine;
const dir = mkdtempSync(join(tmpdir(), 'sparq-needle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeData(`needle eval${missing ? ` skipped: ${missing}` : ''}`, () => {
  const tokenizer = missing ? (null as never) : readTokenizerFile(tok512.path, 512);
  const filler = missing ? [] : fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 3000);
  const model = missing ? (null as never) : buildModel(fast, retrievalModel({ ngram: 4, ctx: 4096 }).loaded);
  const m = { engine: fast, model, kvDType: 'f16' as const };

  it('builds prompts of the exact length with the answer inside the asked needle', () => {
    for (const task of ['passkey', 'multikey'] as const) {
      for (const depth of [0, 0.3, 1]) {
        const c = needleCase(tokenizer, filler, task, 1500, depth, 4, 4);
        expect(c.prompt.length).toBe(1500);
        expect(c.prompt[0]).toBe(1);
        expect(tokenizer.decode(c.answerPositions.map((p) => c.prompt[p])).trim()).toBe(c.answer);
        expect(c.answerPositions[0]).toBeGreaterThanOrEqual(c.needle[0]);
        expect(c.answerPositions.at(-1)!).toBeLessThan(c.needle[1]);
        // Depth 0 right after BOS, depth 1 right before the question.
        if (depth === 0 && task === 'passkey') expect(c.needle[0]).toBe(1);
        if (depth === 1 && task === 'passkey')
          expect(tokenizer.decode(c.prompt.slice(c.needle[1])).trim()).toBe('What is the pass key? The pass key is');
      }
    }
  });

  it('builds a 128k prompt with the needle at depth 0 (all the filler after it)', () => {
    // The filler was spread as push's arguments, which overflowed the call stack here.
    const long = fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 131072);
    const c = needleCase(tokenizer, long, 'passkey', 131072, 0, 1, 4);
    expect(c.prompt.length).toBe(131072);
    expect(c.needle[0]).toBe(1);
  });

  it('dense and oracle answer and attend the answer positions; LM-Infinite cannot see an early needle', () => {
    const c = needleCase(tokenizer, filler, 'passkey', 1500, 0.3, 9, 4);
    const k = 64;
    const configs: NeedleConfig[] = [
      needleConfigs([], [], 1500, 5, 128)[0],
      { label: 'oracle', target: 0, config: { method: 'oracle', r: 128, k, l: 0, reallocate: true } },
      { label: 'lminf', target: 0, config: { method: 'lminf', r: 128, k, l: 0, reallocate: true } },
      { label: 'sparq exact', target: 1, config: { method: 'sparq', r: 128, k: 4096, l: 0, reallocate: true } },
    ];
    const [dense, oracle, lminf, sparqExact] = runNeedleCase(m, tokenizer, c, configs);
    for (const x of [dense, oracle, sparqExact]) {
      expect(x.exact, `${x.label}: ${x.output}`).toBe(true);
      expect(x.recall[1][0], x.label).toBe(1);
    }
    // The needle sits ~450 positions back: outside LM-Infinite's 16 sinks and 48-position window.
    expect(lminf.recall[1][0]).toBe(0);
    expect(lminf.exact).toBe(false);
    expect(sparqExact.output).toBe(dense.output);
  });

  it('SparQ at 1/16 keeps the previous-token heads whole: multi-key needles it lost when their queries spread over every RoPE pair', () => {
    // Layer 1's queries are 8-sparse (4 RoPE pairs, the same for every head), so step 1 at r = 8
    // reads them whole, its scores are exact and alpha ~ 1. With a query spread over all 64 pairs
    // step 1 read only non-rotating components, alpha fell to k/S and these cases failed (depths
    // 0.1-0.4 at 2048 tokens, docs/retrieval-model.md).
    const wq = retrievalModel({ ngram: 4, ctx: 4096 }).loaded.tensors.get('blk.0.attn_q.weight')!;
    const [rows, cols] = wq.shape;
    const nonzero = new Set<number>(); // head components (row mod d) any query head of layer 1 reads
    for (let row = 0; row < rows; row++)
      for (let j = 0; j < cols; j++)
        if ((wq.data as Float32Array)[row * cols + j] !== 0) nonzero.add(row % RETRIEVAL_HEAD_DIM);
    expect(nonzero.size).toBe(8);
    for (const depth of [0.1, 0.2, 0.3, 0.4]) {
      const c = needleCase(tokenizer, filler, 'multikey', 2048, depth, 1 + depth * 10, 4);
      const k = 62; // budget.ts's k for 1/16 at 2k
      const [sparq] = runNeedleCase(m, tokenizer, c, [
        {
          label: 'sparq 1/16',
          target: 1 / 16,
          config: { method: 'sparq', r: 8, k, l: Math.floor(k / 4), reallocate: true },
        },
      ]);
      expect(sparq.exact, `depth ${depth}: ${sparq.output}, answer ${c.answer}`).toBe(true);
      expect(sparq.recall[1][0]).toBe(1);
    }
  });

  it('cases run one after another share the prefill of their common prefix, with the outcomes of each case alone', () => {
    // Passkey prompts agree on the filler before the needle: at 2560 tokens, depths 0.5 and 0.8
    // share about 1270 positions, kept to 1024 (a multiple of the 512-row prefill chunk), 0.8 and
    // 0.9 about 2020, kept to 1536. H2O's
    // scores are seeded by the prefill, so they too must come back as the prefix left them.
    const long = fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 2600);
    const cases = [0.5, 0.8, 0.9].map((depth, i) => needleCase(tokenizer, long, 'passkey', 2560, depth, 3 + i, 4));
    const configs = (steps: number) => needleConfigs(['h2o', 'sparq'], [1 / 8], 2560, steps, 128);
    const alone = cases.map((c) => runNeedleCase(m, tokenizer, c, configs(c.answerTokens.length - 1)));
    const runner = new NeedleRunner(
      m,
      tokenizer,
      Math.max(...cases.map((c) => c.prompt.length + c.answerTokens.length)),
    );
    const shared = cases.map((c, i) => runner.run(c, configs(c.answerTokens.length - 1), cases[i + 1]));
    expect(shared).toEqual(alone);
    expect(
      alone
        .flat()
        .filter((x) => x.label === 'dense')
        .every((x) => x.exact),
    ).toBe(true);
    // The second and third prefills started at 1024 and 1536.
    expect(runner.prefilled).toBe(3 * 2560 - 1024 - 1536);
  });

  it('--resume keeps the cases needle.json holds and runs the rest', () => {
    const out = join(dir, 'resume');
    const args = ['eval', '--task', 'needle', '--needle-tasks', 'passkey', '--lengths', '1024', '--methods', 'lminf'];
    const first = runSparq(...args, '--targets', '0.25', '--depths', '0,1', '--out', out);
    expect(first.code, first.stderr).toBe(0);
    const again = runSparq(...args, '--targets', '0.25', '--depths', '0,0.5,1', '--out', out, '--resume', '--json');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/needle 0\/1 KV f16 passkey 1024 depth 50%/);
    const report = JSON.parse(again.stdout) as NeedleReport;
    expect(report.results[0].records.map((r) => [r.depth, r.label])).toEqual(
      [0, 0.5, 1].flatMap((depth) => [
        [depth, 'dense'],
        [depth, 'lminf 1/4'],
      ]),
    );
    // Other configurations are not mixed in.
    const other = runSparq(...args, '--targets', '0.125', '--depths', '0', '--out', out, '--resume', '--json');
    expect(other.code, other.stderr).toBe(0);
    expect(other.stderr).toMatch(/needle 0\/1 KV f16 passkey 1024 depth 0%/);
  }, 120_000);

  it('the CLI prints one JSON record per task for one configuration', () => {
    const r = runSparq(
      'eval',
      '--task',
      'needle',
      '--attention',
      'dense',
      '--length',
      '1024',
      '--depth',
      '0.5',
      '--json',
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { task: string; exact: boolean; method: string; recall: number[][] });
    expect(lines.map((l) => [l.task, l.method, l.exact])).toEqual([
      ['passkey', 'dense', true],
      ['multikey', 'dense', true],
    ]);
    expect(lines[0].recall.length).toBe(2);
  }, 60_000);
});

describe('needle report', () => {
  const record = (label: string, length: number, depth: number, exact: boolean): NeedleRecord => ({
    task: 'passkey',
    length,
    depth,
    method: label === 'dense' ? 'dense' : 'sparq',
    target: 1,
    r: 8,
    k: 16,
    answer: '1',
    distractors: [],
    label,
    exact,
    output: exact ? '1' : '2',
    recall: [
      [1, 1],
      [exact ? 1 : 0, 0],
    ],
    compression: label === 'dense' ? 1 : 0.125,
  });
  const records = [
    record('dense', 4096, 0, true),
    record('dense', 4096, 1, true),
    record('dense', 8192, 0, true),
    record('dense', 8192, 1, true),
    record('sparq 1/8', 4096, 0, true),
    record('sparq 1/8', 4096, 1, false),
    record('sparq 1/8', 8192, 0, false),
    record('sparq 1/8', 8192, 1, false),
  ];
  const report: NeedleReport = {
    command: 'test',
    model: 'm',
    data: 'd',
    backend: 'b',
    ngram: 4,
    tasks: ['passkey'],
    lengths: [4096, 8192],
    depths: [0, 1],
    results: [{ kv: 'f16', seconds: 1, records }],
  };

  it("writes the tables and one heatmap per configuration with the records' accuracy", () => {
    const written = writeNeedleReport(report, dir);
    expect(written.filter((f) => f.endsWith('.svg')).sort()).toEqual([
      'needle-f16-dense.svg',
      'needle-f16-sparq-1-8.svg',
    ]);
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(written));
    const md = readFileSync(join(dir, 'needle.md'), 'utf8');
    // sparq 1/8: 1 of 2 at 4k, 0 of 2 at 8k; recall on layer 2 head 0: 1 of 4 records.
    expect(md).toMatch(/\| sparq 1\/8 \| 8 \| 16 \| 0\.125 \| 50% \| 0% \| 50% \| 0% \|/);
    expect(md).toMatch(/\| sparq 1\/8 \| 1\.000 \| 1\.000 \| 0\.250 \| 0\.000 \|/);
    const svg = readFileSync(join(dir, 'needle-f16-sparq-1-8.svg'), 'utf8');
    // A 2 x 2 grid: cells of 100 (4k, depth 0) and 0 (the others), coloured green and red.
    expect(svg.match(/<rect x=/g)).toHaveLength(4);
    expect(svg).toContain('hsl(120, 70%, 55%)');
    expect(svg.match(/hsl\(0, 70%, 55%\)/g)).toHaveLength(3);
  });
});
