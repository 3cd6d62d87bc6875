/**
 * `sparq bench` as a user runs it (spawned), at tiny sizes: the JSON document
 * with its documented fields and spec.md §3's data ratios (computed here from the
 * formula, not by the command's code), the Markdown report and the SVG plots
 * in --out, llama.cpp either run beside sparq or reported absent with the
 * reason (CI has node-llama-cpp, so there it must run), and flag errors.
 * Speed itself is never asserted: only that each number is a positive rate.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BENCH_FLAGS, benchSettings } from '../../packages/cli/src/bench/flags.ts';
import { parseFlags } from '../../packages/cli/src/flags.ts';
import type { BenchResults } from '../../packages/cli/src/bench/report.ts';
import { wholeModelMemory } from '../../packages/cli/src/bench/bench-model.ts';
import { UsageError } from '../../packages/cli/src/command.ts';
import { engines } from '../support/backends.ts';
import { llamaCppMissing } from '../support/llama-cpp.ts';
import { runSparq } from '../llm/support.ts';

const SEQS = [64, 128];
const E2E_SEQS = [32, 64];
const HEADS = 2;
const D = 128; // the sweep's head dim
const R = D / 8;
const SPAWN_MS = 60_000;
/** Relative tolerance for ratios the command computes in f64 from the same integers. */
const F64_REL = 1e-12;

const dir = mkdtempSync(join(tmpdir(), 'sparq-bench-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const hasNative = engines.some((e) => e.name === 'native');
const llamaMissing = await llamaCppMissing();

/** spec.md §3: elements per KV head, dense over SparQ (with reallocation) at S, head dim d. */
const dataRatio = (S: number, k: number) => (2 * S * D + 2 * D) / (S * R + 2 * k * D + 4 * D);

describe('sparq bench --quick', () => {
  let run: ReturnType<typeof runSparq>;
  let res: BenchResults;
  beforeAll(() => {
    run = runSparq(
      'bench',
      '--quick',
      '--seq',
      SEQS.join(','),
      '--e2e-seq',
      E2E_SEQS.join(','),
      '--decode',
      '2',
      '--time',
      '5',
      '--json',
      '--out',
      dir,
    );
    res = JSON.parse(run.stdout) as BenchResults;
  }, SPAWN_MS);

  it('exits 0 with JSON on stdout and progress on stderr', () => {
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/kernels \w+ 1t f32 k-twice g1 S=64/);
    expect(run.stderr).toMatch(/e2e sparq 1t S=32 KV f32/);
    expect(res.command).toContain('sparq bench --quick');
    expect(res.machine.cores).toBeGreaterThan(0);
    expect(Array.isArray(res.machine.flags)).toBe(true);
    if (hasNative) {
      expect(res.nativeKernel).toBeTruthy();
      expect(res.bandwidth.map((b) => b.threads)).toEqual([1]);
      expect(res.bandwidth[0].gbPerS).toBeGreaterThan(0);
    }
  });

  it('sweeps dense and SparQ (k = S/8, S/16) at each S, with the data ratio of spec.md §3', () => {
    const rows = res.kernels;
    expect(rows.map((r) => [r.S, r.method, r.k])).toEqual(
      SEQS.flatMap((S) => [
        [S, 'dense', 0],
        [S, 'sparq', S / 8],
        [S, 'sparq', S / 16],
      ]),
    );
    for (const r of rows) {
      expect(r.ms).toBeGreaterThan(0);
      expect(r).toMatchObject({ threads: 1, kv: 'f32', layout: 'k-twice', group: 1 });
      if (r.method === 'dense') {
        expect(r.dataRatio).toBe(1);
        expect(r.bytes).toBe(HEADS * (2 * r.S * D + 2 * D) * 4);
      } else {
        expect(r).toMatchObject({ r: R, l: r.k / 4 });
        expect(r.dataRatio).toBeCloseTo(dataRatio(r.S, r.k), 10);
        const dense = rows.find((d) => d.method === 'dense' && d.S === r.S)!;
        expect(Math.abs(r.speedup - dense.ms / r.ms)).toBeLessThan(F64_REL * r.speedup);
      }
      expect(Math.abs(r.gbPerS - r.bytes / (r.ms * 1e6))).toBeLessThan(F64_REL * r.gbPerS);
      if (hasNative) {
        // The bandwidth probed before the row is the one its percentage divides by.
        expect(r.readGBs).toBeGreaterThan(0);
        expect(Math.abs(r.pctBandwidth! - (100 * r.gbPerS) / r.readGBs!)).toBeLessThan(F64_REL * r.pctBandwidth!);
      } else {
        expect(r).toMatchObject({ readGBs: null, pctBandwidth: null });
      }
    }
  });

  it('runs the generated model end to end, and llama.cpp beside it or says why not', () => {
    expect(res.model?.source).toBe('generated');
    const sparq = res.endToEnd.filter((r) => r.system === 'sparq');
    expect(sparq.map((r) => [r.S, r.method, r.k])).toEqual(
      E2E_SEQS.flatMap((S) => [
        [S, 'dense', 0],
        [S, 'sparq', S / 8],
        [S, 'sparq', S / 16],
      ]),
    );
    for (const r of res.endToEnd) {
      expect(r.prefillTokS).toBeGreaterThan(0);
      expect(r.decodeTokS).toBeGreaterThan(0);
      expect(r.decodeBytes).toBeGreaterThan(res.model!.weightBytes);
      expect(r.kvBytes).toBeGreaterThan(0);
      if (process.platform === 'linux') expect(r.peakRssBytes).toBeGreaterThanOrEqual(r.startRssBytes!);
    }
    // sparq's cache (Session.kvBytes, as generate reports it): K and V rows in f32 and K transposed in f16 (the session
    // default over f32 rows; 1 layer, 2 KV heads of 128) for S plus 3 methods' 2 decode steps.
    for (const r of sparq) expect(r.kvBytes).toBe((r.S + 3 * 2) * 2 * D * (4 + 4 + 2));
    const llama = res.endToEnd.filter((r) => r.system === 'llama.cpp');
    if (process.env.CI === 'true' || llamaMissing === null) {
      expect(llamaMissing, 'CI installs node-llama-cpp').toBeNull();
      expect(res.llamaCpp.status).toBe('ran');
      expect(llama.map((r) => [r.S, r.method, r.kv])).toEqual(E2E_SEQS.map((S) => [S, 'dense', 'f32']));
    } else {
      expect(res.llamaCpp.status).toBe('absent');
      expect(res.llamaCpp.reason).toMatch(/node-llama-cpp/);
      expect(llama).toEqual([]);
    }
  });

  it('writes results.json, the Markdown tables and the SVG plots', () => {
    expect(JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'))).toEqual(res);
    const md = readFileSync(join(dir, 'results.md'), 'utf8');
    expect(md).toMatch(/^# sparq bench/);
    expect(md).toContain('| backend | threads | KV | layout | GQA group | S | read GB/s | dense ms |');
    expect(md).toContain('| threads | S | system | decode attention |');
    for (const S of E2E_SEQS) expect(md).toMatch(new RegExp(`\\| 1 \\| ${S} \\| sparq \\| SparQ r ${R}, k S/8 \\|`));
    for (const name of ['speedup.svg', 'decode-tokens.svg', 'prefill-tokens.svg', 'bandwidth.svg', 'memory.svg']) {
      const svg = readFileSync(join(dir, name), 'utf8');
      expect(svg, name).toMatch(/^<svg [^>]*>[\s\S]*<\/svg>\n$/);
      expect(svg, name).toContain('<polyline');
    }
    expect(readFileSync(join(dir, 'speedup.svg'), 'utf8')).toContain('data ratio, k S/8');
  });
});

describe('sparq bench flags', () => {
  const settings = (...argv: string[]) => benchSettings(parseFlags(argv, BENCH_FLAGS));
  it.each([
    [['--seq', '8'], '--seq 8, expected integers in [16, 1048576]'],
    [['--seq', '64,,128'], '--seq 64,,128: an empty item'],
    [['--seq', '64,64'], '--seq 64,64: an item is repeated'],
    [['--threads', '0'], '--threads 0, expected integers in [1, 256]'],
    [['--backend', 'gpu'], '--backend gpu, expected one of native, reference'],
    [['--kv', 'f8'], '--kv f8, expected one of f32, f16, q8_0, q4_0'],
    [['--decode', '0'], '--decode 0, expected an integer in [1, 4096]'],
    [['--no-kernels', '--no-e2e'], 'nothing left to run'],
    [['--shape', 'llama4'], '--shape llama4, expected one of llama3-8b, llama2-7b, qwen2.5-7b, mistral-7b'],
    [['--shape', 'llama3-8b', '--layers', '0'], '--layers 0, expected an integer in [1, 32] (llama3-8b has 32 layers)'],
    [
      ['--shape', 'qwen2.5-7b', '--layers', '29'],
      '--layers 29, expected an integer in [1, 28] (qwen2.5-7b has 28 layers)',
    ],
    [['--shape', 'llama3-8b', '--weights', 'q4_0'], '--weights q4_0, expected one of q4_k_m, q8_0'],
    [['--shape', 'llama3-8b', '--model', 'x.gguf'], '--shape and --model: give one'],
    [['--layers', '2'], '--layers needs --shape'],
    [['--weights', 'q8_0'], '--weights needs --shape'],
    [['--e2e-kv', 'q5_0'], '--e2e-kv q5_0, expected one of f32, f16, q8_0, q4_0'],
    [['--e2e-kv', 'q8_0/q3'], '--e2e-kv q8_0/q3: the V type q3, expected one of f32, f16, q8_0, q4_0'],
    [['--kv', 'q8_0/q4_0,q8_0/q4_0'], '--kv q8_0/q4_0,q8_0/q4_0: an item is repeated'],
    [['--groups', '0'], '--groups 0, expected integers in [1, 64]'],
    [['--llama-flash', 'auto'], '--llama-flash auto, expected one of on, off, both'],
  ])('%j: %s', (argv, message) => {
    expect(() => settings(...argv)).toThrow(UsageError);
    expect(() => settings(...argv)).toThrow(message);
  });
  it('resolves --shape with its defaults, and the end-to-end KV types and GQA groups', () => {
    expect(settings('--shape', 'llama3-8b').shape).toEqual({
      name: 'llama3-8b',
      layers: 2,
      weights: 'q4_k_m',
      dir: join(tmpdir(), 'sparq-shapes'),
    });
    expect(settings('--shape', 'mistral-7b', '--layers', '32', '--weights', 'q8_0', '--shape-dir', dir).shape).toEqual({
      name: 'mistral-7b',
      layers: 32,
      weights: 'q8_0',
      dir,
    });
    expect(settings().shape).toBeNull();
    expect(settings().e2eKv).toEqual(['f16']);
    expect(settings('--e2e-kv', 'f16,q8_0').e2eKv).toEqual(['f16', 'q8_0']);
    expect(settings('--e2e-kv', 'q8_0/q4_0,q4_0/q4_0').e2eKv).toEqual([{ k: 'q8_0', v: 'q4_0' }, 'q4_0']);
    expect(settings().groups).toEqual([1, 4, 8]);
    expect([settings().llamaFlash, settings('--llama-flash', 'on').llamaFlash]).toEqual([[true, false], [true]]);
  });
  it("projects the whole model's memory: Llama 3 8B at 128k needs 16 GiB of KV in llama.cpp with f16, 8.5 GiB with q8_0 (the issue's figures)", () => {
    const f16 = wholeModelMemory('llama3-8b', 'q4_k_m', 131072, 'f16', 2);
    const q8 = wholeModelMemory('llama3-8b', 'q8_0', 131072, 'q8_0', 2);
    expect(f16.llamaCppKvBytes).toBe(16 * 2 ** 30);
    expect(q8.llamaCppKvBytes).toBe(8.5 * 2 ** 30);
    expect(f16.llamaCppTotal).toBe(f16.weightBytes + f16.llamaCppKvBytes);
    expect(f16.sparqTotal).toBe(f16.weightBytes + f16.sparqKvBytes + f16.scratchBytes);
    // Llama 3 8B Q4_K_M as llama.cpp's quantizer writes it is 4.92 GB: the recipe's bytes agree within 1%.
    expect(Math.abs(f16.weightBytes / 4.92e9 - 1)).toBeLessThan(0.01);
  });
  it(
    'exits 2 with a one-line usage error for a bad flag, and exit 1 naming a missing model',
    () => {
      const bad = runSparq('bench', '--threads', 'two');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--threads two, expected integers in [1, 256]');
      expect(bad.stderr).toContain("(see 'sparq bench --help')");
      const missing = join(dir, 'absent.gguf');
      const r = runSparq('bench', '--quick', '--no-kernels', '--model', missing, '--out', join(dir, 'none'));
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(missing);
      expect(existsSync(join(dir, 'none'))).toBe(false);
    },
    SPAWN_MS,
  );
});
