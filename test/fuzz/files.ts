/**
 * The file fuzzers: a tiny GGUF llama (with its tokenizer), a tiny llama2.c
 * checkpoint and a llama2.c tokenizer file, each with bytes overwritten
 * (random bytes, extreme u32 and u64 values: counts, lengths, type ids, dims,
 * offsets) and sometimes cut short; and random text through the tokenizer.
 * Every case must end in a FormatError or a loaded model (a token list):
 * never a RangeError, TypeError or any other crash of a parser.
 */
import { FormatError, SparqError } from '@sparq/core';
import {
  bytesSource,
  randomLlama,
  expectedTensors,
  joinGGUFParts,
  llamaFromGGUF,
  llamaMetadata,
  readGGUF,
  readLlama2c,
  readLlama2cTokenizer,
  tokenizerFromGGUF,
  writeGGUF,
} from '@sparq/llm';
import type { Engine } from '@sparq/core';
import { llama2cCheckpoint } from '../llm/random-model.ts';
import { seeded } from '../conformance/numeric.ts';

const U32 = [0, 1, 2, 9, 13, 16, 30, 99, 0x7fffffff, 0xffffffff, 1 << 24];
const U64 = [0n, 1n, 2n ** 31n, 2n ** 32n, 2n ** 40n, 2n ** 63n, 2n ** 64n - 1n];

const m = randomLlama({
  dim: 32,
  hiddenDim: 64,
  nLayers: 1,
  nHeads: 2,
  nKvHeads: 1,
  seqLen: 16,
  extraTokens: 1,
  seed: 7,
});
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

export interface FileFuzzReport {
  cases: number;
  formatErrors: number;
  loaded: number;
}

/** Runs `parse` on `cases` mutations of `good`; any error but a FormatError throws at once, naming the case. */
function run(
  name: string,
  good: Uint8Array,
  headerBytes: number,
  cases: number,
  seed: number,
  parse: (bytes: Uint8Array) => void,
): FileFuzzReport {
  const random = seeded(seed);
  const report = { cases, formatErrors: 0, loaded: 0 };
  for (let i = 0; i < cases; i++) {
    const bytes = mutate(good, headerBytes, random);
    try {
      parse(bytes);
      report.loaded++;
    } catch (error) {
      if (!(error instanceof FormatError))
        throw new Error(`${name} case ${i} (seed ${seed}): ${(error as Error).name}: ${(error as Error).message}`, {
          cause: error,
        });
      report.formatErrors++;
    }
  }
  return report;
}

/** Mutated GGUF llama files: header, llama config, tensors and tokenizer read. */
export function fuzzGGUF(engine: Engine, cases: number, seed: number): FileFuzzReport {
  const good = writeGGUF(llamaMetadata(m.loaded.config, m.tokenizer), entries);
  return run('GGUF', good, readGGUF(good, 'g.gguf').dataOffset, cases, seed, (bytes) => {
    const f = joinGGUFParts([readGGUF(bytesSource(bytes, 'm.gguf'))]);
    llamaFromGGUF(f, 'm.gguf', engine);
    tokenizerFromGGUF(f, 'm.gguf');
  });
}

/** Mutated llama2.c checkpoints. */
export function fuzzLlama2c(cases: number, seed: number): FileFuzzReport {
  return run('llama2.c', llama2cCheckpoint(m.loaded), 28, cases, seed, (bytes) =>
    readLlama2c(bytesSource(bytes, 'm.bin')),
  );
}

/** A llama2.c tokenizer file (max length, then score f32, length i32 and bytes per token) of the tiny model's pieces. */
function llama2cTokenizerFile(): Uint8Array {
  const texts = [
    '<unk>',
    '<s>',
    '</s>',
    ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`),
    'a',
  ];
  const pieces = texts.map((t) => new TextEncoder().encode(t));
  const out = new Uint8Array(4 + pieces.reduce((n, p) => n + 8 + p.length, 0));
  const dv = new DataView(out.buffer);
  dv.setInt32(0, Math.max(...pieces.map((p) => p.length)), true);
  let at = 4;
  pieces.forEach((p, i) => {
    dv.setFloat32(at, i < 259 ? 0 : -i, true);
    dv.setInt32(at + 4, p.length, true);
    out.set(p, at + 8);
    at += 8 + p.length;
  });
  return out;
}

/** Mutated llama2.c tokenizer files. */
export function fuzzTokenizerFile(cases: number, seed: number): FileFuzzReport {
  const good = llama2cTokenizerFile();
  return run('tokenizer file', good, 64, cases, seed, (bytes) =>
    readLlama2cTokenizer(bytes, 'tok.bin', m.tokenizer.vocabSize),
  );
}

/** Code points drawn from ASCII, controls, Latin, CJK, emoji, lone surrogates and specials (<s>, </s>). */
function randomText(random: () => number): string {
  const pools = [
    [0x20, 0x7e],
    [0, 0x1f],
    [0xc0, 0x24f],
    [0x4e00, 0x4fff],
    [0x1f600, 0x1f64f],
    [0xd800, 0xdfff],
  ];
  let s = '';
  for (let n = Math.floor(random() * 24); n > 0; n--) {
    if (random() < 0.05) s += random() < 0.5 ? '<s>' : '</s>';
    const [lo, hi] = pools[Math.floor(random() * pools.length)];
    s += String.fromCodePoint(lo + Math.floor(random() * (hi - lo + 1)));
  }
  return s;
}

/** Random text through encode and decode: ids in range, and any error a SparqError; returns the cases run. */
export function fuzzTokenizerText(cases: number, seed: number): number {
  const random = seeded(seed);
  const t = m.tokenizer;
  for (let i = 0; i < cases; i++) {
    const text = randomText(random);
    try {
      const ids = t.encode(text, { addSpecial: random() < 0.5, parseSpecial: random() < 0.5 });
      if (ids.some((id) => !Number.isInteger(id) || id < 0 || id >= t.vocabSize))
        throw new Error(`ids out of range: ${ids.join(' ')}`);
      t.decode(ids);
    } catch (error) {
      if (!(error instanceof SparqError))
        throw new Error(
          `tokenizer text case ${i} (seed ${seed}) ${JSON.stringify(text)}: ${(error as Error).message}`,
          { cause: error },
        );
    }
  }
  return cases;
}
