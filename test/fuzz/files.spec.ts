/**
 * The file and tokenizer fuzzers (files.ts), seeded and bounded for CI:
 * every mutated GGUF, llama2.c checkpoint and llama2.c tokenizer file ends in
 * a FormatError or a load, random text tokenizes to ids in range. The long
 * run is `pnpm fuzz --cases N --seed S`.
 */
import { describe, expect, it } from 'vitest';
import { referenceEngine } from '../support/backends.ts';
import { fuzzGGUF, fuzzLlama2c, fuzzTokenizerFile, fuzzTokenizerText } from './files.ts';

/** Cases per fuzzer in the test suite (a few seconds each). */
const CASES = 1500;

describe(`file fuzzers (${CASES} cases each, seeded)`, () => {
  it('GGUF: every case a FormatError or a loaded model (header, llama config, tokenizer)', () => {
    const r = fuzzGGUF(referenceEngine, CASES, 1);
    console.log(`GGUF mutations: ${r.formatErrors} FormatErrors, ${r.loaded} loaded`);
    // Most mutations land in the header: a run where few fail means the mutator stopped reaching it.
    expect(r.formatErrors).toBeGreaterThan(CASES / 4);
  });

  it('llama2.c: every case a FormatError or a loaded model', () => {
    const r = fuzzLlama2c(CASES, 2);
    console.log(`llama2.c mutations: ${r.formatErrors} FormatErrors, ${r.loaded} loaded`);
    expect(r.formatErrors).toBeGreaterThan(CASES / 4);
  });

  it('llama2.c tokenizer files: every case a FormatError or a tokenizer', () => {
    const r = fuzzTokenizerFile(CASES, 3);
    console.log(`tokenizer file mutations: ${r.formatErrors} FormatErrors, ${r.loaded} loaded`);
    expect(r.formatErrors).toBeGreaterThan(CASES / 4);
  });

  it('random text (controls, CJK, emoji, lone surrogates, special tokens): ids in range, no crash', () => {
    expect(fuzzTokenizerText(CASES, 4)).toBe(CASES);
  });
});
