/**
 * Arguments as a hostile user types them: every numeric flag decimal and in
 * its named range, environment variables checked, unknown flags a usage
 * error. One rule for exit statuses: 0 success, 1 bad input (one line on
 * stderr), 2 usage (one line), 130 interrupted; no stack trace unless --debug.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor } from '@sparq/core';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../packages/cli/src/command.ts';
import { isInt, number, parseFlags } from '../../packages/cli/src/flags.ts';
import { sampling } from '../../packages/cli/src/run-flags.ts';
import { referenceEngine } from '../support/backends.ts';
import { randomLlama, writeRandomGGUF } from '@sparq/llm';
import { ROOT } from '../llm/support.ts';

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `sparq ...` from source, with extra environment variables; `interruptOn` sends SIGINT once stderr matches it. */
function sparq(args: string[], env: Record<string, string> = {}, interruptOn?: RegExp): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/cli/src/main.ts'), ...args], {
      cwd: ROOT,
      env: { ...process.env, SPARQ_BACKEND: 'reference', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (interruptOn?.test(stderr)) child.kill('SIGINT');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A one-line error: exactly one line on stderr, no stack frame. */
function expectOneLine(r: Run, code: number, text: string | RegExp): void {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  if (typeof text === 'string') expect(r.stderr).toContain(text);
  else expect(r.stderr).toMatch(text);
}

describe('numeric flag values', () => {
  it('take decimal integers only, within the named range', () => {
    const check = isInt(1, 100);
    for (const ok of ['1', '42', '100', '+7']) expect(number('n', ok, 0, check, 'x')).toBe(Number(ok));
    for (const bad of [
      '0x10',
      '1e2',
      '0b11',
      '1.0',
      ' 5',
      '5 ',
      '',
      'Infinity',
      'NaN',
      '0',
      '101',
      '-3',
      '99999999999999999999',
    ]) {
      expect(() => number('n', bad, 0, check, 'an integer in [1, 100]'), bad).toThrow(
        new UsageError(`--n ${bad}, expected an integer in [1, 100]`),
      );
    }
  });

  it('take decimal fractions for real-valued flags, never hex or Infinity', () => {
    const finite = (t: number) => Number.isFinite(t) && t >= 0;
    for (const ok of ['0', '0.7', '.5', '1e-3', '2.'])
      expect(number('temperature', ok, 1, finite, 'x')).toBe(Number(ok));
    for (const bad of ['0x1', 'Infinity', '1e400', '-1', 'one'])
      expect(() => number('temperature', bad, 1, finite, 'x'), bad).toThrow(UsageError);
  });

  it('take a negative number after a flag as its value (a range error, not "ambiguous")', () => {
    expect(parseFlags(['--k', '-5', '-n', '-2'], { k: { type: 'string' }, n: { type: 'string', short: 'n' } })).toEqual(
      { k: '-5', n: '-2' },
    );
    expect(() => parseFlags(['--zzz'], {})).toThrow(UsageError);
  });

  it('keep seeds below 2^53: no wrap-around', () => {
    expect(sampling({ seed: '9007199254740991' }, 1).seed).toBe(9007199254740991n);
    expect(() => sampling({ seed: '9007199254740992' }, 1)).toThrow(
      /--seed 9007199254740992, expected an integer in \[0, 9007199254740991\]/,
    );
    expect(() => sampling({ seed: '18446744073709551617' }, 1)).toThrow(UsageError);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'sparq-args-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sparq exit statuses', () => {
  it('usage errors exit 2 with one line; bad input and bad environment exit 1 with one line; --debug adds the stack', async () => {
    const [zzz, seq, hex, negative, bigSeed, threads, spin, kernel, missing, debug] = await Promise.all([
      sparq(['backends', '--zzz']),
      sparq(['demo', '--seq', '1e8']),
      sparq(['demo', '--steps', '0x10']),
      sparq(['demo', '--seq', '-5']),
      sparq(['demo', '--seed', '4294967296']),
      sparq(['backends'], { SPARQ_THREADS: '100000' }),
      sparq(['backends'], { SPARQ_SPIN_US: '-1' }),
      sparq(['backends'], { SPARQ_NATIVE_KERNEL: 'avx9000' }),
      sparq(['inspect', join(dir, 'missing.gguf')]),
      sparq(['inspect', join(dir, 'missing.gguf'), '--debug']),
    ]);
    expectOneLine(zzz, 2, "sparq backends: Unknown option '--zzz'");
    expectOneLine(seq, 2, '--seq 1e8, expected an integer in [16, 1048576]');
    expectOneLine(hex, 2, '--steps 0x10, expected an integer in [1, 100000]');
    expectOneLine(negative, 2, '--seq -5, expected an integer in [16, 1048576]');
    expectOneLine(bigSeed, 2, '--seed 4294967296, expected an integer in [0, 4294967295]');
    expectOneLine(threads, 1, 'SPARQ_THREADS=100000, expected a decimal integer in [1, 256]');
    expectOneLine(spin, 1, 'SPARQ_SPIN_US=-1, expected a decimal integer in [0, 100000]');
    expectOneLine(kernel, 1, 'SPARQ_NATIVE_KERNEL=avx9000, expected one of scalar, avx2, avx512');
    expectOneLine(missing, 1, `sparq inspect: FormatError: ${join(dir, 'missing.gguf')}: no such file`);
    expect(debug.code).toBe(1);
    expect(debug.stderr).toMatch(/\n\s+at /);
  }, 120_000);

  it('a model with a NaN weight: generate exits 1 naming the step and layer, --check-tensors names the tensor at load', async () => {
    const model = randomLlama({ dim: 64, hiddenDim: 128, nLayers: 2, nHeads: 4, nKvHeads: 2, seqLen: 32, seed: 3 });
    (model.loaded.tensors.get('blk.1.attn_output.weight') as Tensor<'f32'>).data[11] = NaN;
    const path = writeRandomGGUF(referenceEngine, model, 'f32', join(dir, 'nan.gguf'));
    const [run, checked] = await Promise.all([
      sparq(['generate', '--model', path, '-n', '4', '--temperature', '0']),
      sparq(['generate', '--model', path, '-n', '4', '--check-tensors']),
    ]);
    expect(run.code, run.stderr).toBe(1);
    // The NaN from attn_output reaches the same layer's FFN norm, which refuses it, naming the layer.
    expect(run.stderr).toMatch(/NonFiniteError: forward: step at position 0: layer 1: rmsnorm: x element \d+ is NaN/);
    expectOneLine(
      checked,
      1,
      'NonFiniteError: tensor "blk.1.attn_output.weight" (f32, shape [64, 64]): element [0, 11] is NaN',
    );
  }, 120_000);

  it('Ctrl-C ends a command by SIGINT (status 130 in a shell), not by a crash', async () => {
    const r = await sparq(['demo', '--seq', '256', '--steps', '100000'], {}, /step 1\//);
    expect(r.signal, r.stderr.slice(-500)).toBe('SIGINT');
    expect(r.stderr).not.toMatch(/Error|\n\s+at /);
  }, 120_000);
});
