/**
 * Mutated model files, seeded: a tiny GGUF llama and a tiny llama2.c
 * checkpoint with bytes overwritten (random bytes, extreme u32 and u64
 * values: counts, lengths, type ids, dims, offsets) and sometimes cut short.
 * Every case must end in a FormatError or a loaded model: never a
 * RangeError, TypeError or any other crash of the parser. SPARQ_MUTATIONS=N
 * runs N cases per format instead of the CI count.
 */
import { describe, expect, it } from 'vitest';
import { FormatError } from '@sparq/core';
import { bytesSource, randomLlama, expectedTensors, joinGGUFParts, llamaFromGGUF, llamaMetadata, readGGUF, readLlama2c, tokenizerFromGGUF, writeGGUF } from '@sparq/llm';
import { seeded } from '../conformance/numeric.ts';
import { referenceEngine } from '../support/backends.ts';
import { llama2cCheckpoint } from './random-model.ts';

const CASES = Number(process.env.SPARQ_MUTATIONS ?? 1500);
const U32 = [0, 1, 2, 9, 13, 16, 30, 99, 0x7fffffff, 0xffffffff, 1 << 24];
const U64 = [0n, 1n, 2n ** 31n, 2n ** 32n, 2n ** 40n, 2n ** 63n, 2n ** 64n - 1n];

const m = randomLlama({ dim: 32, hiddenDim: 64, nLayers: 1, nHeads: 2, nKvHeads: 1, seqLen: 16, extraTokens: 1, seed: 7 });
const entries = expectedTensors(m.loaded.config).map(({ name }) => ({ name, tensor: m.loaded.tensors.get(name)! }));

/** `good` with 1-4 overwrites, most in the first `headerBytes`, and one case in ten cut short. */
function mutate(good: Uint8Array, headerBytes: number, random: () => number): Uint8Array {
  const b = new Uint8Array(good);
  const dv = new DataView(b.buffer);
  const edits = 1 + Math.floor(random() * 4);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(random() * (random() < 0.8 ? headerBytes : b.length - 8));
    const kind = random();
    if (kind < 0.4) b[at] = Math.floor(random() * 256);
    else if (kind < 0.75) dv.setUint32(at, U32[Math.floor(random() * U32.length)], true);
    else dv.setBigUint64(at, U64[Math.floor(random() * U64.length)], true);
  }
  return random() < 0.1 ? b.subarray(0, Math.floor(random() * b.length)) : b;
}

/** Runs `parse` on each mutated file: counts of FormatErrors and loads; any other error fails at once with its seed case. */
function run(good: Uint8Array, headerBytes: number, seed: number, parse: (bytes: Uint8Array) => void) {
  const random = seeded(seed);
  const outcome = { formatErrors: 0, loaded: 0 };
  for (let i = 0; i < CASES; i++) {
    const bytes = mutate(good, headerBytes, random);
    try {
      parse(bytes);
      outcome.loaded++;
    } catch (error) {
      if (!(error instanceof FormatError)) throw new Error(`case ${i} (seed ${seed}): ${(error as Error).name}: ${(error as Error).message}`, { cause: error });
      outcome.formatErrors++;
    }
  }
  return outcome;
}

describe(`mutated model files (${CASES} cases per format)`, () => {
  it('GGUF: every case a FormatError or a loaded model (header, llama config, tokenizer)', () => {
    const good = writeGGUF(llamaMetadata(m.loaded.config, m.tokenizer), entries);
    const dataStart = readGGUF(good, 'g.gguf').dataOffset;
    const outcome = run(good, dataStart, 1, (bytes) => {
      const f = joinGGUFParts([readGGUF(bytesSource(bytes, 'm.gguf'))]);
      llamaFromGGUF(f, 'm.gguf', referenceEngine);
      tokenizerFromGGUF(f, 'm.gguf');
    });
    console.log(`GGUF mutations: ${outcome.formatErrors} FormatErrors, ${outcome.loaded} loaded`);
    expect(outcome.formatErrors).toBeGreaterThan(CASES / 4);
  });

  it('llama2.c: every case a FormatError or a loaded model', () => {
    const good = llama2cCheckpoint(m.loaded);
    expect(readLlama2c(good, 'ok.bin').config.dim).toBe(m.loaded.config.dim);
    const outcome = run(good, 28, 2, (bytes) => readLlama2c(bytesSource(bytes, 'm.bin')));
    console.log(`llama2.c mutations: ${outcome.formatErrors} FormatErrors, ${outcome.loaded} loaded`);
    expect(outcome.formatErrors).toBeGreaterThan(CASES / 4);
  });
});
