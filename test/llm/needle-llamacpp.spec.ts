/**
 * bench/needle-llamacpp.ts's glue (issue 25: the needle cases in llama.cpp):
 * - needleCases gives the sweep's cases (each the builder's case for its depth index's seed) in the
 *   order of their first needle, and leaves out the skipped ones;
 * - needleAnswer scores greedy tokens as the sweep does;
 * - the comparison with a sparq needle.json matches cases by task, length, depth and drawn keys,
 *   and uses only reports of the same n-gram, seed and KV type; a resumed run must match settings;
 * - in llama.cpp (skipped without a prebuilt binary, failing under CI=true): a case continued from
 *   the previous case's shared prefix decodes the tokens the whole prompt decodes, evaluating fewer.
 * Prompts of 1-2k tokens: the long sweeps are the benchmark's.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  fillerTokens,
  needleAnswer,
  needleCase,
  needleCases,
  needleModelContext,
  readTokenizerFile,
  type NeedleRecord,
} from '@sparq/llm';
import {
  compareWithSparq,
  llamaNeedleMarkdown,
  logitMargin,
  resumeMismatch,
  type LlamaNeedleRecord,
  type LlamaNeedleReport,
  type LlamaNeedleSettings,
} from '../../bench/needle-llamacpp-report.ts';
import { retrievalModelCommand } from '../../packages/cli/src/commands/retrieval-model.ts';
import type { NeedleReport } from '../../packages/cli/src/report/needle-report.ts';
import { llama, llamaCppContinue, llamaCppMissing } from '../support/llama-cpp.ts';
import { sharedFile } from '../support/shared.ts';

const tok512 = sharedFile('models/tok512.bin');
const text = sharedFile('data/tinystories_val.txt');
const missing = tok512.missing ?? text.missing;
const describeData = missing ? describe.skip : describe;
const dir = mkdtempSync(join(tmpdir(), 'sparq-needle-llamacpp-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const settings: LlamaNeedleSettings = { ngram: 4, ctx: 131072, seed: 1, kv: 'f16', flash: true, data: 'x.txt' };

function llamaRecord(over: Partial<LlamaNeedleRecord>): LlamaNeedleRecord {
  return {
    task: 'passkey',
    length: 4096,
    depth: 0.5,
    answer: '12345',
    output: ' 12345',
    exact: true,
    sameTokens: true,
    tokens: [],
    margin: 10,
    distractors: [],
    evaluated: 4096,
    wallSeconds: 1,
    cpuSeconds: 1,
    ...over,
  };
}

function sparqReport(records: Partial<NeedleRecord>[], over: Partial<NeedleReport> = {}, kv = 'f16'): NeedleReport {
  return {
    command: 'sparq eval --task needle',
    model: 'retrieval model',
    data: 'x.txt',
    backend: 'native',
    ngram: 4,
    seed: 1,
    tasks: ['passkey'],
    lengths: [4096],
    depths: [0.5],
    results: [
      {
        kv,
        seconds: 1,
        records: records.map((r) => ({ label: 'dense', distractors: [], ...r }) as NeedleRecord),
      },
    ],
    ...over,
  };
}

describe('needle cases in llama.cpp: report glue', () => {
  it('compares dense outputs case by case, matching the drawn keys, and names the reports it could not use', () => {
    const records = [
      llamaRecord({ depth: 0, answer: '11111', output: ' 11111' }),
      llamaRecord({ depth: 0.5, answer: '22222', output: ' 22222' }),
      llamaRecord({ depth: 1, answer: '33333', output: ' 33333' }),
      llamaRecord({ task: 'multikey', depth: 1, answer: '4444444', output: ' 4444444', distractors: ['1', '2'] }),
    ];
    const used = sparqReport([
      { task: 'passkey', length: 4096, depth: 0, answer: '11111', output: ' 11111' },
      { task: 'passkey', length: 4096, depth: 0.5, answer: '22222', output: ' 22229' },
      // The same depth with other keys (another run's depth index): another case.
      { task: 'passkey', length: 4096, depth: 1, answer: '99999', output: ' 99999' },
      { task: 'multikey', length: 4096, depth: 1, answer: '4444444', output: ' 4444444', distractors: ['1', '3'] },
      // Not dense: never compared.
      { task: 'passkey', length: 4096, depth: 1, answer: '33333', output: ' 3', label: 'h2o 1/4' },
    ]);
    const otherSeed = sparqReport([{ task: 'passkey', length: 4096, depth: 1, answer: '33333', output: ' 3' }], {
      seed: 2,
    });
    const otherKv = sparqReport(
      [{ task: 'passkey', length: 4096, depth: 1, answer: '33333', output: ' 3' }],
      {},
      'q8_0',
    );
    const c = compareWithSparq(records, settings, [
      { path: 'a', report: used },
      { path: 'b', report: otherSeed },
      { path: 'c', report: otherKv },
    ]);
    expect(c.sources.map((s) => s.used)).toEqual([true, false, false]);
    expect(c.sources[1].note).toContain('seed 2');
    expect(c.sources[2].note).toContain('no f16');
    expect(c.same).toBe(1);
    expect(c.differ).toEqual([
      { task: 'passkey', length: 4096, depth: 0.5, llama: ' 22222', sparq: ' 22229', answer: '22222' },
    ]);
    expect(c.missing).toBe(2);
  });

  it('refuses to resume a report of other settings, naming the field', () => {
    const old = { settings } as LlamaNeedleReport;
    expect(resumeMismatch(old, settings)).toBeNull();
    expect(resumeMismatch(old, { ...settings, ctx: 131136 })).toBe('it has ctx 131072, this run 131136');
    expect(resumeMismatch(old, { ...settings, flash: false })).toContain('flash');
  });

  it("the table gives each task and length's exact share; the margin skips tokens without a logit", () => {
    const report: LlamaNeedleReport = {
      command: 'x',
      settings,
      llama: { release: 'r', threads: 1, batch: 512, share: true },
      tasks: ['passkey', 'multikey'],
      lengths: [4096, 8192],
      depths: [0, 1],
      windows: [{ started: '', cases: 3, wallSeconds: 3, cpuSeconds: 2, load: [1, 1, 1] }],
      records: [
        llamaRecord({ depth: 0 }),
        llamaRecord({ depth: 1, exact: false, sameTokens: false }),
        llamaRecord({ task: 'multikey', length: 8192, depth: 0 }),
      ],
      comparison: null,
    };
    const md = llamaNeedleMarkdown(report);
    expect(md).toContain("| passkey | 50% (2; 1 with the answer's tokens) | - |");
    expect(md).toContain('| multikey | - | 100% (1) |');
    expect(logitMargin(Float32Array.of(1, Number.NaN, 5, 2), 2)).toBe(3);
  });
});

describeData(`needle cases for llama.cpp${missing ? ` skipped: ${missing}` : ''}`, () => {
  const tokenizer = missing ? (null as never) : readTokenizerFile(tok512.path, 512);
  const filler = missing ? [] : fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 2000);
  const options = { tasks: ['passkey', 'multikey'] as const, depths: [0.9, 0.2, 0.6], ngram: 4, seed: 7 };

  it("are the builder's cases for their depth index, in order of their first needle", () => {
    const plan = needleCases(tokenizer, filler, 1500, options);
    expect(plan.map((x) => x.at).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    for (const { at, case: c } of plan) {
      const task = options.tasks[Math.floor(at / 3)];
      const i = at % 3;
      expect([c.task, c.depth]).toEqual([task, options.depths[i]]);
      expect(c.prompt).toEqual(needleCase(tokenizer, filler, task, 1500, options.depths[i], 7 + i, 4).prompt);
    }
    const first = plan.map(({ case: c }) => Math.min(c.needle[0], ...c.distractors.map((x) => x.needle[0])));
    expect(first).toEqual([...first].sort((a, b) => a - b));
    const skipped = needleCases(tokenizer, filler, 1500, {
      ...options,
      skip: (task, _, depth) => task === 'multikey' && depth === 0.2,
    });
    expect(skipped.map((x) => x.at).sort()).toEqual([0, 1, 2, 3, 5]);
  });

  it('scores the answer tokens exact and a changed digit wrong', () => {
    const c = needleCase(tokenizer, filler, 'passkey', 1000, 0.5, 3, 4);
    expect(needleAnswer(tokenizer, c, c.answerTokens)).toEqual({
      output: tokenizer.decode(c.answerTokens),
      exact: true,
    });
    // decode(tokens) prints each token after its predecessor (run.c), so a lone token is read after a space.
    const text = (t: number) => tokenizer.decode([c.answerTokens[0], t]);
    const last = text(c.answerTokens.at(-1)!);
    const other = Array.from({ length: 512 }, (_, t) => t).find((t) => /^[0-9]$/.test(text(t)) && text(t) !== last);
    expect(needleAnswer(tokenizer, c, [...c.answerTokens.slice(0, -1), other!]).exact).toBe(false);
  });
});

const llamaMissing = missing ?? (await llamaCppMissing());
if (llamaMissing && process.env.CI === 'true' && !missing) throw new Error(`CI=true and ${llamaMissing}`);
const describeLlama = llamaMissing ? describe.skip : describe;

describeLlama(`needle cases in llama.cpp${llamaMissing ? ` skipped: ${llamaMissing}` : ''}`, () => {
  it('a case continued from the shared prefix decodes what its whole prompt decodes', async () => {
    const tokenizer = readTokenizerFile(tok512.path, 512);
    const filler = fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 1200);
    const path = join(dir, 'retrieval.gguf');
    const argv = ['--out', path, '--ctx', String(needleModelContext(1200)), '--tokenizer', tok512.path];
    expect(await retrievalModelCommand.run(argv)).toBe(0);
    const plan = needleCases(tokenizer, filler, 1200, { tasks: ['passkey'], depths: [0.3, 0.8], ngram: 4 });
    const model = await (await llama()).loadModel({ modelPath: path });
    const context = await model.createContext({ contextSize: 1280, threads: 1, batchSize: 512 });
    try {
      const sequence = context.getSequence();
      const run = async (share: boolean) => {
        const out = [];
        for (const { case: c } of plan)
          out.push(await llamaCppContinue(sequence, c.prompt, c.answerTokens.length, 512, share));
        return out;
      };
      const whole = await run(false);
      const shared = await run(true);
      for (const [i, { case: c }] of plan.entries()) {
        expect(needleAnswer(tokenizer, c, whole[i].tokens).exact, `depth ${c.depth}`).toBe(true);
        expect(shared[i].tokens).toEqual(whole[i].tokens);
      }
      // The second case re-evaluates only what follows the filler both prompts begin with.
      const [a, b] = plan.map((x) => x.case.prompt);
      let common = 0;
      while (a[common] === b[common]) common++;
      expect(shared[1].evaluated).toBe(b.length - common);
      expect(whole[1].evaluated).toBe(b.length);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }, 60_000);
});
