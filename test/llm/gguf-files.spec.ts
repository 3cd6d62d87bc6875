/**
 * Model files as found in the wild, through the path a user takes
 * (readModelFile on a file on disk): tensors read one by one into buffers of
 * their own, GGUF v2 and v3, split models, the format known from the bytes
 * (never a guess), the limits a hostile file must not get past, the writer
 * that never leaves a partial file, and a file over 4 GiB (sparse on disk)
 * that loads and decodes.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FormatError, Tensor } from '@sparq/core';
import {
  GGUF_MAX_NESTING,
  Session,
  buildModel,
  defaultAttention,
  expectedTensors,
  ggufTensor,
  llamaMetadata,
  randomLlama,
  readGGUF,
  readModelFile,
  readModelHeader,
  tensorBytes,
  withGGUF,
  writeGGUF,
  writeGGUFFile,
  type GGUFTensorEntry,
  type GGUFValue,
} from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';
import { llama2cCheckpoint } from './random-model.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A tiny random llama (dim 32, 1 layer, vocab 260) as metadata and F32 tensors. */
function tiny(extra: [string, GGUFValue][] = []) {
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
  const tensors: GGUFTensorEntry[] = expectedTensors(m.loaded.config).map(({ name }) => ({
    name,
    tensor: m.loaded.tensors.get(name)!,
  }));
  const base = llamaMetadata(m.loaded.config, m.tokenizer);
  const keys = new Set(extra.map(([k]) => k));
  return { ...m, tensors, metadata: [...base.filter(([k]) => !keys.has(k)), ...extra] };
}

function file(name: string, bytes: Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

/** The FormatError `fn` throws (fails the test when it throws anything else, or nothing). */
function formatError(fn: () => unknown): FormatError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FormatError);
    return error as FormatError;
  }
  throw new Error('expected a FormatError, nothing was thrown');
}

/** Greedy tokens and logits of `steps` decode steps from BOS. */
function decode(path: string, steps: number) {
  const model = buildModel(referenceEngine, readModelFile(path, referenceEngine).loaded);
  const session = new Session(referenceEngine, model, {
    capacity: steps,
    maxPrefill: 1,
    attention: defaultAttention('dense', model.config.headDim, steps),
  });
  const logits: number[][] = [];
  let out = session.prefill([1]);
  for (let i = 0; i < steps; i++) {
    logits.push(Array.from(out));
    let best = 0;
    for (let j = 1; j < out.length; j++) if (out[j] > out[best]) best = j;
    if (i + 1 < steps) out = session.decode(best);
  }
  return logits;
}

describe('reading model files', () => {
  it('reads each tensor into a buffer of its own, never the whole file', () => {
    const t = tiny();
    const path = join(dir, 'tiny.gguf');
    const size = writeGGUFFile(path, t.metadata, t.tensors);
    const back = readModelFile(path, referenceEngine);
    for (const { name, tensor } of t.tensors) {
      const got = back.loaded.tensors.get(name)!;
      expect(Buffer.from(tensorBytes(got)).equals(Buffer.from(tensorBytes(tensor))), name).toBe(true);
      // Its own buffer: the tensor's bytes (rounded up to 8), nothing of the rest of the file.
      expect(got.data.buffer.byteLength, name).toBeLessThan(tensorBytes(tensor).length + 8);
    }
    expect(size).toBe(statSync(path).size);
    // The file is closed after loading: reading a tensor from the returned container fails loudly.
    expect(() => ggufTensor(back.gguf!.tensors[0])).toThrow(/read after the file was closed/);
  });

  it('parses a header far larger than its 1 MiB read window (150,000 strings, a 3 MiB string), values across window edges intact', () => {
    const words = Array.from({ length: 150_000 }, (_, i) => `tok${i}_${'x'.repeat(i % 13)}`);
    const long = 'abcdefghij'.repeat(300_000);
    const scores = Float32Array.from(words, (_, i) => i / 7);
    const metadata: [string, GGUFValue][] = [
      ['a.words', { type: 'array', value: { itemType: 'string', values: words } }],
      ['a.long', { type: 'string', value: long }],
      ['a.scores', { type: 'array', value: { itemType: 'f32', values: scores } }],
      ['a.after', { type: 'u64', value: 0x0123456789abcdefn }],
    ];
    const x = Tensor.f32(
      [3, 32],
      Array.from({ length: 96 }, (_, i) => i - 40),
    );
    const path = join(dir, 'big-header.gguf');
    writeGGUFFile(path, metadata, [{ name: 'x', tensor: x }]);
    expect(statSync(path).size).toBeGreaterThan(6 << 20);
    withGGUF(path, (f) => {
      expect(f.metadata.get('a.words')!.value).toEqual({ itemType: 'string', values: words });
      expect(f.metadata.get('a.long')!.value).toBe(long);
      expect(Array.from((f.metadata.get('a.scores')!.value as { values: Float32Array }).values)).toEqual(
        Array.from(scores),
      );
      expect(f.metadata.get('a.after')!.value).toBe(0x0123456789abcdefn);
      expect(Array.from(ggufTensor(f.tensors[0]).data as Float32Array)).toEqual(Array.from(x.data));
    });
  });

  it('reads GGUF v2 as v3 (the same layout)', () => {
    const t = tiny();
    const v3 = writeGGUF(t.metadata, t.tensors);
    const v2 = new Uint8Array(v3);
    new DataView(v2.buffer).setUint32(4, 2, true);
    const a = readModelFile(file('v3.gguf', v3), referenceEngine);
    const b = readModelFile(file('v2.gguf', v2), referenceEngine);
    expect(b.gguf!.version).toBe(2);
    expect(b.loaded.config).toEqual(a.loaded.config);
    for (const [name, x] of a.loaded.tensors)
      expect(Buffer.from(tensorBytes(b.loaded.tensors.get(name)!)).equals(Buffer.from(tensorBytes(x))), name).toBe(
        true,
      );
  });

  it('knows the format from the bytes: GGUF magic, else a llama2.c header matching the file size, else a FormatError saying so', () => {
    const notAModel =
      /not a model file: expected GGUF \(magic "GGUF" at byte offset 0; .*\) or a llama2\.c checkpoint \(.+\)/;
    expect(formatError(() => readModelFile(file('empty.bin', new Uint8Array(0)))).message).toMatch(notAModel);
    expect(formatError(() => readModelFile(file('empty.bin', new Uint8Array(0)))).message).toContain(
      'the file has 0 bytes',
    );
    expect(formatError(() => readModelFile(file('ggu.bin', Buffer.from('GGU')))).message).toMatch(notAModel);
    const noise = Uint8Array.from({ length: 4096 }, (_, i) => (i * 97 + 13) & 255);
    expect(formatError(() => readModelFile(file('noise.bin', noise))).message).toMatch(notAModel);
    // A GGUF cut short is a GGUF error (never read as llama2.c).
    const gguf = writeGGUF(tiny().metadata, tiny().tensors);
    for (const cut of [4, 7, 20, 100, gguf.length - 1]) {
      expect(formatError(() => readModelFile(file('cut.gguf', gguf.subarray(0, cut)))).message).toMatch(
        /cut\.gguf: (version|tensor_count|metadata|"|tensor).* at byte offset \d+/,
      );
    }
    // A llama2.c checkpoint loads; with one byte more its header no longer fits and neither format does.
    const { loaded } = tiny();
    const c = loaded.config;
    const checkpoint = Buffer.from(llama2cCheckpoint(loaded));
    expect(readModelFile(file('tiny.bin', checkpoint)).loaded.config).toEqual({ ...c, normEps: Math.fround(1e-5) });
    // The headers alone (what `sparq inspect` prints): llama2.c's regions, or the GGUF container.
    const layout = readModelHeader(join(dir, 'tiny.bin'));
    expect('llama2c' in layout && layout.llama2c.regions.map((r) => [r.name, r.shape, r.at]).slice(0, 3)).toEqual([
      ['token_embedding', [c.vocabSize, c.dim], 28],
      ['attn_norm', [1, c.dim], 28 + c.vocabSize * c.dim * 4],
      ['attn_q', [1, c.dim, c.dim], 28 + (c.vocabSize + 1) * c.dim * 4],
    ]);
    expect('gguf' in readModelHeader(file('whole.gguf', gguf))).toBe(true);
    const long = formatError(() =>
      readModelFile(file('long.bin', Buffer.concat([checkpoint, Buffer.alloc(1)]))),
    ).message;
    expect(long).toMatch(notAModel);
    expect(long).toContain('end of weights');
  });
});

describe('limits from the file', () => {
  it('fails fast on llama.block_count = 2^24 in a 1 MB file, before building the tensor list', () => {
    const t = tiny([['llama.block_count', { type: 'u32', value: 1 << 24 }]]);
    const pad = Tensor.zeros('f32', [256, 1024]);
    const path = join(dir, 'layers.gguf');
    writeGGUFFile(path, t.metadata, [...t.tensors, { name: 'pad', tensor: pad }]);
    expect(statSync(path).size).toBeGreaterThan(1 << 20);
    const before = process.memoryUsage().arrayBuffers;
    const t0 = performance.now();
    const message = formatError(() => readModelFile(path)).message;
    expect(performance.now() - t0).toBeLessThan(500);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 << 20);
    expect(message).toMatch(
      /llama\.block_count at byte offset \d+: 16777216 layers need 150994944 tensors, the file holds 13/,
    );
  });

  it(`refuses metadata arrays nested 10,000 deep with a FormatError (no stack overflow); ${GGUF_MAX_NESTING} levels read`, () => {
    /** A GGUF with one key holding arrays nested `depth` deep around an empty u8 array. */
    const nested = (depth: number) => {
      const key = Buffer.from('deep');
      const head = Buffer.alloc(24 + 8 + key.length + 4);
      head.write('GGUF', 0, 'latin1');
      head.writeUInt32LE(3, 4);
      head.writeBigUInt64LE(0n, 8);
      head.writeBigUInt64LE(1n, 16);
      head.writeBigUInt64LE(BigInt(key.length), 24);
      key.copy(head, 32);
      head.writeUInt32LE(9, 32 + key.length);
      const level = Buffer.alloc(12);
      level.writeUInt32LE(9, 0);
      level.writeBigUInt64LE(1n, 4);
      const inner = Buffer.alloc(12);
      inner.writeUInt32LE(0, 0);
      return {
        bytes: new Uint8Array(Buffer.concat([head, ...Array.from({ length: depth - 1 }, () => level), inner])),
        valueAt: head.length,
      };
    };
    const ok = readGGUF(nested(GGUF_MAX_NESTING).bytes, 'ok.gguf');
    expect(ok.metadata.get('deep')!.type).toBe('array');
    const { bytes, valueAt } = nested(10_000);
    const message = formatError(() => readGGUF(bytes, 'deep.gguf')).message;
    // Level GGUF_MAX_NESTING + 1 starts after GGUF_MAX_NESTING array headers of 12 bytes.
    expect(message).toBe(
      `deep.gguf: "${'deep' + '[0]'.repeat(GGUF_MAX_NESTING)}" array at byte offset ${valueAt + 12 * GGUF_MAX_NESTING}: nested ${GGUF_MAX_NESTING + 1} deep, at most ${GGUF_MAX_NESTING} levels of arrays in arrays are accepted`,
    );
  });

  /** Two f32 tensors a (2 x 32) and b (32); returns the bytes and the offset of b's offset field. */
  function twoTensors() {
    const bytes = writeGGUF(
      [],
      [
        { name: 'a', tensor: Tensor.zeros('f32', [2, 32]) },
        { name: 'b', tensor: Tensor.zeros('f32', [32]) },
      ],
    );
    // Header 24; a: name 8 + 1, n_dims 4, ne 16, type 4, offset 8 -> b starts at 24 + 41 = 65; b: name 9, n_dims 4, ne 8, type 4.
    return { bytes, bOffsetAt: 65 + 9 + 4 + 8 + 4, bInfoAt: 65 };
  }

  it('refuses overlapping tensors and tensors past the end, naming them and the offsets', () => {
    const { bytes, bOffsetAt, bInfoAt } = twoTensors();
    expect(readGGUF(bytes, 't.gguf').tensors.map((t) => t.name)).toEqual(['a', 'b']);
    const overlap = new Uint8Array(bytes);
    new DataView(overlap.buffer).setBigUint64(bOffsetAt, 224n, true); // a spans [0, 256)
    expect(formatError(() => readGGUF(overlap, 't.gguf')).message).toMatch(
      new RegExp(
        `tensor "b" offset at byte offset ${bInfoAt}: its data \\[\\d+, \\d+\\) overlaps tensor "a" \\[\\d+, \\d+\\)`,
      ),
    );
    const past = new Uint8Array(bytes);
    new DataView(past.buffer).setBigUint64(bOffsetAt, 1n << 40n, true);
    expect(formatError(() => readGGUF(past, 't.gguf')).message).toMatch(
      new RegExp(
        `tensor "b" data \\(offset field at byte ${bOffsetAt}\\) at byte offset \\d+: needs 128 bytes, the file has 0 left`,
      ),
    );
  });

  it('names the tensor, its type and the supported types for a type it cannot compute on', () => {
    const bytes = writeGGUF([], [{ name: 'w', tensor: Tensor.zeros('f32', [2, 256]) }]);
    // ggml type 16 is IQ2_XXS: 66 bytes per 256 elements, so the header parses (and `inspect` shows it).
    const typeAt = 24 + 8 + 1 + 4 + 16;
    new DataView(bytes.buffer).setUint32(typeAt, 16, true);
    const f = readGGUF(bytes, 'iq2.gguf');
    expect([f.tensors[0].type.name, f.tensors[0].byteSize]).toEqual(['IQ2_XXS', 132]);
    expect(formatError(() => ggufTensor(f.tensors[0])).message).toBe(
      'iq2.gguf: tensor "w" type at byte offset 24: IQ2_XXS (ggml type 16) is not supported; supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16',
    );
  });
});

describe('split models', () => {
  /** The tiny model in 3 parts as llama.cpp's gguf-split writes them: all metadata in part 1, split keys in every part. */
  function writeSplit(prefix: string) {
    const t = tiny();
    const n = 3;
    const per = Math.ceil(t.tensors.length / n);
    const paths: string[] = [];
    for (let i = 0; i < n; i++) {
      const keys: [string, GGUFValue][] = [
        ['split.no', { type: 'u16', value: i }],
        ['split.count', { type: 'u16', value: n }],
        ['split.tensors.count', { type: 'i32', value: t.tensors.length }],
      ];
      const path = join(dir, `${prefix}-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.gguf`);
      writeGGUFFile(path, i === 0 ? [...t.metadata, ...keys] : keys, t.tensors.slice(i * per, (i + 1) * per));
      paths.push(path);
    }
    return { t, paths };
  }

  it('reads every part, from the name of any of them, as the unsplit model', () => {
    const { t, paths } = writeSplit('split');
    const whole = readModelFile(file('whole.gguf', writeGGUF(t.metadata, t.tensors)), referenceEngine);
    for (const path of [paths[0], paths[2]]) {
      const m = readModelFile(path, referenceEngine);
      expect(m.gguf!.parts.map((p) => p.name)).toEqual(paths);
      expect(new Set(m.gguf!.tensors.map((x) => x.part))).toEqual(new Set([0, 1, 2]));
      expect(m.loaded.config).toEqual(whole.loaded.config);
      for (const [name, x] of whole.loaded.tensors)
        expect(Buffer.from(tensorBytes(m.loaded.tensors.get(name)!)).equals(Buffer.from(tensorBytes(x))), name).toBe(
          true,
        );
    }
    expect(withGGUF(paths[1], (f) => f.tensors.length)).toBe(t.tensors.length);
  });

  it('refuses parts out of order, a count that does not add up, and a lone part', () => {
    const { paths } = writeSplit('swap');
    const [b, c] = [readFileSync(paths[1]), readFileSync(paths[2])];
    writeFileSync(paths[1], c);
    writeFileSync(paths[2], b);
    expect(formatError(() => readModelFile(paths[0])).message).toMatch(
      /swap-00002-of-00003\.gguf: split\.no at byte offset \d+: 2, expected 1/,
    );
    const { paths: lone } = writeSplit('lone');
    const single = join(dir, 'renamed.gguf');
    writeFileSync(single, readFileSync(lone[0]));
    expect(formatError(() => readModelFile(single)).message).toMatch(
      /renamed\.gguf: split\.count at byte offset \d+: 3, but 1 part was given/,
    );
    rmSync(lone[1]);
    expect(formatError(() => readModelFile(lone[0])).message).toMatch(
      /lone-00001-of-00003\.gguf: split model of 3 parts \(by its name\): missing \S*lone-00002-of-00003\.gguf$/,
    );
  });
});

describe('writing GGUF files', () => {
  it('writes to a temporary file and renames it: a failed write leaves the previous file as it was, and no leftovers', () => {
    const t = tiny();
    const sub = join(dir, 'write');
    mkdirSync(sub);
    const out = join(sub, 'model.gguf');
    writeFileSync(out, 'previous');
    // A tensor GGUF cannot store fails the write before anything is written.
    expect(() =>
      writeGGUFFile(out, t.metadata, [...t.tensors, { name: 'bad', tensor: Tensor.zeros('i32', [4]) }]),
    ).toThrow(/i32 has no GGUF tensor type/);
    expect(readFileSync(out, 'utf8')).toBe('previous');
    // A failure at the file system (the temporary name is taken by a directory).
    mkdirSync(join(sub, `.model.gguf.${process.pid}.partial`));
    expect(() => writeGGUFFile(out, t.metadata, t.tensors)).toThrow(/EISDIR/);
    expect(readFileSync(out, 'utf8')).toBe('previous');
    rmSync(join(sub, `.model.gguf.${process.pid}.partial`), { recursive: true });
    const size = writeGGUFFile(out, t.metadata, t.tensors);
    expect(readdirSync(sub)).toEqual(['model.gguf']);
    expect(statSync(out).size).toBe(size);
    expect(readModelFile(out).loaded.config).toEqual(t.loaded.config);
  });
});

describe('a file over 4 GiB', () => {
  it('loads a model whose tensors sit past 4 GiB (general.alignment 2^31, sparse on disk) and decodes as the packed file does', () => {
    const t = tiny();
    const packed = join(dir, 'packed.gguf');
    writeGGUFFile(packed, t.metadata, t.tensors);
    const huge = join(dir, 'huge.gguf');
    const size = writeGGUFFile(
      huge,
      [
        ...t.metadata.filter(([k]) => k !== 'general.alignment'),
        ['general.alignment', { type: 'u32', value: 2 ** 31 }],
      ],
      t.tensors,
    );
    // 13 tensors, each at its own multiple of 2 GiB: offsets need 64 bits.
    expect(size).toBeGreaterThan(2 ** 32 * 6);
    const st = statSync(huge);
    expect(st.size).toBe(size);
    expect(st.blocks * 512).toBeLessThan(1 << 24); // sparse: the padding takes no disk
    const offsets = withGGUF(huge, (f) => f.tensors.map((x) => x.fileOffset));
    expect(Math.max(...offsets)).toBeGreaterThan(2 ** 34);
    expect(decode(huge, 8)).toEqual(decode(packed, 8));
  });
});
