/**
 * What a new user ran into (issue 26's trial), each pinned: tokenize on a
 * llama2.c checkpoint, a prompt longer than --ctx, a directory or a missing
 * file as --model, convert into a missing folder, attention flags the method
 * does not read, SPARQ_NATIVE_KERNEL asking for a path the CPU lacks, one
 * name for a finish at the token limit, and the stream-abort example's abort.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkKernelRequest } from '@sparq/native';
import { describeError, oneLine } from '../../packages/cli/src/error-line.ts';
import { randomLlama, writeRandomGGUF } from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';
import { ROOT, files, runSparq as sparq, storiesMissing } from '../llm/support.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-new-user-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One line on stderr, `code`, containing `text`. */
function expectOneLine(r: { code: number | null; stderr: string }, code: number, text: string): void {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
  expect(r.stderr).toContain(text);
}

/** A small random GGUF (the reference engine writes it), context 32. */
function smallGGUF(): string {
  return writeRandomGGUF(
    referenceEngine,
    randomLlama({ dim: 32, hiddenDim: 64, nLayers: 1, nHeads: 4, nKvHeads: 2, seqLen: 32, seed: 5 }),
    'f32',
    join(dir, 'small.gguf'),
  );
}

describe('files a user names', () => {
  it('a directory or a missing file as --model is one line naming it, not a raw EISDIR or ENOENT', () => {
    expectOneLine(sparq('generate', '--model', dir), 1, `${dir}: is a directory, expected a file`);
    expectOneLine(sparq('generate', '--model', join(dir, 'nope.gguf')), 1, `${join(dir, 'nope.gguf')}: no such file`);
    expectOneLine(sparq('tokenize', '--model', dir, '--text', 'x'), 1, `${dir}: is a directory, expected a file`);
  });

  it('convert --out into a missing folder fails before converting anything, and writes nothing', () => {
    const model = smallGGUF();
    const out = join(dir, 'missing', 'out.gguf');
    const r = sparq('convert', '--model', model, '--out', out);
    expectOneLine(r, 1, `--out ${out}: the folder ${join(dir, 'missing')} does not exist`);
    expect(r.stderr).not.toContain('convert 1/');
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });
});

describe('flags that would change nothing are refused', () => {
  it('--r, --l, --no-reallocate with a method that does not read them: a usage error naming the flag and the methods that do', () => {
    const model = smallGGUF();
    expectOneLine(
      sparq('generate', '--model', model, '--attention', 'dense', '--r', '3'),
      2,
      '--r 3: attention dense does not read it (only sparq does)',
    );
    expectOneLine(
      sparq('generate', '--model', model, '--attention', 'h2o', '--l', '2'),
      2,
      '--l 2: attention h2o does not read it (only sparq does)',
    );
    expectOneLine(
      sparq('generate', '--model', model, '--k', '4'),
      2,
      '--k 4: attention dense does not read it (only sparq, h2o, lminf, oracle do)',
    );
    expectOneLine(
      sparq('generate', '--model', model, '--attention', 'oracle', '--no-reallocate'),
      2,
      '--no-reallocate: attention oracle does not read it (only sparq does)',
    );
    const ok = sparq('generate', '--model', model, '--attention', 'h2o', '--k', '4', '-n', '4', '--temperature', '0');
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('SPARQ_NATIVE_KERNEL naming a path the CPU lacks is an error listing the paths it has', () => {
    const avx2Only = ['scalar', 'avx2'];
    expect(() => checkKernelRequest(avx2Only, { SPARQ_NATIVE_KERNEL: 'avx512' })).toThrow(
      'SPARQ_NATIVE_KERNEL=avx512: this CPU does not run the avx512 path, expected one of scalar, avx2',
    );
    expect(() => checkKernelRequest(avx2Only, { SPARQ_NATIVE_KERNEL: 'avx2' })).not.toThrow();
    expect(() => checkKernelRequest(avx2Only, {})).not.toThrow();
  });
});

describe('finish reasons: one name for one event', () => {
  it("-n's limit is 'length' (as maxTokens is in the library), a full --ctx is 'context'", () => {
    const model = smallGGUF();
    const finish = (...flags: string[]) => {
      const r = sparq('generate', '--model', model, '--prompt', 'ab', '--temperature', '0', '--json', ...flags);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stderr.trim().split('\n').at(-1)!) as { finishReason: string; generatedTokens: number };
    };
    const byN = finish('-n', '10');
    const byCtx = finish('--ctx', '10');
    expect(byN.finishReason).toBe('length');
    expect(byCtx.finishReason).toBe('context');
    // The same tokens either way: -n 10 and --ctx 10 both stop at position 10.
    expect(byN.generatedTokens).toBe(byCtx.generatedTokens);
  });
});

describe.skipIf(storiesMissing)(
  `stories260K as a new user runs it${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`,
  () => {
    it("tokenize --model on a llama2.c checkpoint finds its tokenizer as generate does, and gives generate's ids", () => {
      const r = sparq('tokenize', '--model', files.model.path, '--text', 'Once upon a time', '--json');
      expect(r.code, r.stderr).toBe(0);
      const explicit = sparq(
        'tokenize',
        '--model',
        files.model.path,
        '--tokenizer',
        files.tok512.path,
        '--text',
        'Once upon a time',
        '--json',
      );
      const plain = sparq('tokenize', '--model', files.tok512.path, '--text', 'Once upon a time', '--json');
      expect(JSON.parse(r.stdout)).toEqual(JSON.parse(plain.stdout));
      expect(JSON.parse(explicit.stdout)).toEqual(JSON.parse(plain.stdout));
      expect(r.stderr).toContain(`${files.tok512.path} (llama2.c tokenizer of ${files.model.path})`);
    });

    it('a prompt longer than the context names the limit that binds: --ctx, -n or the trained context', () => {
      const prompt = 'Once upon a time there was a little girl named Lily who loved to play outside';
      const run = (...flags: string[]) => sparq('generate', '--model', files.model.path, '--prompt', prompt, ...flags);
      expectOneLine(run('--ctx', '8'), 1, 'more than the 8 positions of --ctx 8');
      expectOneLine(run('-n', '6'), 1, 'more than the 6 positions of -n 6');
      expectOneLine(run('--ctx', '8', '-n', '6'), 1, 'more than the 6 positions of -n 6');
      expectOneLine(run('--ctx', '6', '-n', '8'), 1, 'more than the 6 positions of --ctx 6');
    });

    it('examples/stream-abort.mjs ends its stream by the abort, then carries on', () => {
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', join(ROOT, 'examples/stream-abort.mjs'), files.model.path, '24'],
        { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toContain('-- abort after 24 tokens');
      expect(r.stderr).toMatch(/-- length; the session holds \d+ of \d+ positions/);
    });
  },
);

describe('errors are one line that keeps everything', () => {
  it('a message of several lines keeps each (joined), a file-system error is said in words', () => {
    expect(oneLine('addon failed to load\n  undefined symbol: foo\n\n')).toBe(
      'addon failed to load; undefined symbol: foo',
    );
    const eisdir = Object.assign(new Error("EISDIR: illegal operation on a directory, open '/m'"), {
      code: 'EISDIR',
      path: '/m',
    });
    expect(describeError(eisdir)).toBe('/m: is a directory, expected a file');
    expect(describeError(new RangeError('a\nb'))).toBe('RangeError: a; b');
  });
});
