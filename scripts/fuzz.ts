/**
 * The long fuzz run, outside CI (the test suite runs a bounded one, test/fuzz/):
 *   pnpm fuzz [--cases N] [--seed S] [--only ops|files]
 * N cases per fuzzer (default 100000), from seed S (default 1): the op fuzzer
 * on every backend that loads, the GGUF, llama2.c and tokenizer-file
 * mutators and random tokenizer text. Prints each fuzzer's counts; exits 1
 * on any crash or backend disagreement, naming the case's seed (replay it
 * with --cases 1 --seed <that seed>).
 */
import { loadBackends } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import { parseArgs } from 'node:util';
import { fuzzGGUF, fuzzLlama2c, fuzzTokenizerFile, fuzzTokenizerText } from '../test/fuzz/files.ts';
import { fuzzOps } from '../test/fuzz/ops.ts';

const { values } = parseArgs({
  options: { cases: { type: 'string' }, seed: { type: 'string' }, only: { type: 'string' } },
  strict: true,
});
const integer = (name: string, raw: string | undefined, fallback: number) => {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw new Error(`--${name} ${raw}, expected a decimal integer >= 0`);
  return Number(raw);
};
const cases = integer('cases', values.cases, 100_000);
const seed = integer('seed', values.seed, 1);
const only = values.only;
if (only !== undefined && only !== 'ops' && only !== 'files') throw new Error(`--only ${only}, expected ops or files`);

const { available } = await loadBackends();
const reference = available.find((e) => e.name === 'reference')!;
let failed = false;
const t0 = performance.now();
if (only !== 'files') {
  const r = fuzzOps(available, cases, seed, 50);
  console.log(
    `ops (${available.map((e) => e.name).join(' + ')}): ${r.cases} cases, ${r.errors} project errors, ${r.results} results, ${r.unsupported} declared unsupported`,
  );
  for (const p of r.problems) console.log(`  ${p}`);
  failed ||= r.problems.length > 0;
}
if (only !== 'ops') {
  const runs: [string, () => string][] = [
    ['GGUF', () => JSON.stringify(fuzzGGUF(reference, cases, seed))],
    ['llama2.c', () => JSON.stringify(fuzzLlama2c(cases, seed))],
    ['tokenizer file', () => JSON.stringify(fuzzTokenizerFile(cases, seed))],
    ['tokenizer text', () => `${fuzzTokenizerText(cases, seed)} cases`],
  ];
  for (const [name, run] of runs) {
    try {
      console.log(`${name}: ${run()}`);
    } catch (error) {
      console.log(`${name}: ${(error as Error).message}`);
      failed = true;
    }
  }
}
console.log(`${((performance.now() - t0) / 1000).toFixed(1)} s`);
process.exitCode = failed ? 1 : 0;
