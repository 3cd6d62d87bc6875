/**
 * Malformed files: every one fails with a FormatError that names the field
 * and its byte offset, and fails before anything large is allocated (a header
 * claiming 2^40 tensors must fail at once). Files are built here, small.
 */
import { describe, expect, it } from 'vitest';
import { FormatError, Tensor } from '@sparq/core';
import {
  expectedTensors,
  llamaFromGGUF,
  llamaMetadata,
  readGGUF,
  readLlama2c,
  readLlama2cTokenizer,
  writeGGUF,
  type GGUFValue,
} from '@sparq/llm';

/** A tiny valid llama2.c checkpoint: dim 8, hidden 16, 1 layer, 2 heads, 1 KV head, vocab 4, seq_len 4. */
function llama2cFile(header = [8, 16, 1, 2, 1, 4, 4], extraFloats = 0): Uint8Array {
  const [dim, hidden, L, , kvHeads, vocab, seq] = header;
  const headDim = dim / header[3];
  const floats =
    vocab * dim +
    L * (dim * 2 + dim * dim * 2 + 2 * kvHeads * headDim * dim + 3 * dim * hidden) +
    dim +
    seq * headDim +
    extraFloats;
  const bytes = new Uint8Array(28 + Math.max(0, floats) * 4);
  const dv = new DataView(bytes.buffer);
  header.forEach((v, i) => dv.setInt32(i * 4, v, true));
  for (let i = 0; i < floats; i++) dv.setFloat32(28 + 4 * i, ((i % 7) - 3) / 8, true);
  return bytes;
}

/** A small tokenizer file: max length, then (score, length, bytes) per token. */
function tokenizerFile(pieces: string[]): Uint8Array {
  const parts = [Buffer.alloc(4)];
  parts[0].writeInt32LE(Math.max(...pieces.map((p) => p.length)));
  for (const [i, p] of pieces.entries()) {
    const head = Buffer.alloc(8);
    head.writeFloatLE(-i, 0);
    head.writeInt32LE(p.length, 4);
    parts.push(head, Buffer.from(p, 'latin1'));
  }
  return new Uint8Array(Buffer.concat(parts));
}

/** A GGUF with one string key and one f32 tensor "x" of ne [32, 2]. Byte offsets below follow from it. */
function ggufFile(): Uint8Array {
  return writeGGUF([['k', { type: 'string', value: 'v' }]], [{ name: 'x', tensor: Tensor.zeros('f32', [2, 32]) }]);
}
// Layout of ggufFile(): magic 0, version 4, tensor_count 8, kv_count 16, key length 24, key 32,
// value type 33, string length 37, string 45; tensor name length 46, name 54, n_dims 55,
// ne[0] 59, ne[1] 67, type 75, offset 79; data at 96.
const AT = {
  tensorCount: 8,
  kvCount: 16,
  keyLen: 24,
  valueType: 33,
  nameLen: 46,
  nDims: 55,
  ne0: 59,
  ne1: 67,
  type: 75,
  offset: 79,
  data: 96,
};

function patch(bytes: Uint8Array, at: number, write: (dv: DataView) => void): Uint8Array {
  const copy = new Uint8Array(bytes);
  write(new DataView(copy.buffer, at));
  return copy;
}

/** Expects a FormatError whose message names `field` and `at byte offset <offset>`. */
function expectFormatError(fn: () => unknown, field: string | RegExp, offset?: number): void {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error, 'expected a FormatError').toBeInstanceOf(FormatError);
  const message = (error as Error).message;
  if (typeof field === 'string') expect(message).toContain(field);
  else expect(message).toMatch(field);
  expect(message).toMatch(offset === undefined ? /at byte offset \d+/ : new RegExp(`at byte offset ${offset}\\b`));
}

/** Runs fn, expecting it to fail fast without allocating (under 200 ms, under 16 MB of new buffers). */
function expectCheap(fn: () => void): void {
  const before = process.memoryUsage().arrayBuffers;
  const t0 = performance.now();
  fn();
  expect(performance.now() - t0).toBeLessThan(200);
  expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 << 20);
}

describe('llama2.c checkpoints', () => {
  it('reads the valid tiny file', () => {
    const m = readLlama2c(llama2cFile(), 'tiny.bin');
    expect(m.config.headDim).toBe(4);
    expect(m.tensors.size).toBe(expectedTensors(m.config).length);
  });

  it('rejects a file truncated at any of several offsets', () => {
    const full = llama2cFile();
    for (const cut of [0, 3, 27, 28, 100, 500, full.length - 4, full.length - 1]) {
      expectFormatError(
        () => readLlama2c(full.subarray(0, cut), 'cut.bin'),
        /header|token_embedding|attn_|ffn_|rms_final|freq_cis|needs|implies/,
      );
    }
    expectFormatError(() => readLlama2c(full.subarray(0, 2), 'cut.bin'), 'header dim', 0);
    expectFormatError(() => readLlama2c(full.subarray(0, 20), 'cut.bin'), 'header vocab_size', 20);
  });

  it('rejects bytes left over and a missing classifier', () => {
    expectFormatError(() => readLlama2c(llama2cFile(undefined, 1), 'long.bin'), 'end of weights');
    // A negative vocab_size promises wcls after freq_cis: absent here.
    expectFormatError(() => readLlama2c(llama2cFile([8, 16, 1, 2, 1, -4, 4]), 'nowcls.bin'), 'wcls');
  });

  it('rejects inconsistent or absurd header fields before allocating', () => {
    expectFormatError(() => readLlama2c(llama2cFile([8, 16, 1, 3, 1, 4, 4], -1000), 'h.bin'), 'header n_heads', 12);
    expectFormatError(
      () => readLlama2c(llama2cFile([8, 16, 1, 2, 1, 4, 4]).fill(0, 16, 20), 'h.bin'),
      'header n_kv_heads',
      16,
    );
    const huge = patch(llama2cFile(), 0, (dv) => dv.setInt32(0, 1 << 30, true));
    expectCheap(() => expectFormatError(() => readLlama2c(huge, 'h.bin'), 'header dim', 0));
    // Within the per-field limit, but the weights cannot fit in the file.
    const big = patch(llama2cFile(), 0, (dv) =>
      [1 << 14, 1 << 14, 64, 128, 128, 1 << 16, 1 << 12].forEach((v, i) => dv.setInt32(i * 4, v, true)),
    );
    expectCheap(() => expectFormatError(() => readLlama2c(big, 'h.bin'), 'token_embedding', 28));
  });
});

describe('llama2.c tokenizer files', () => {
  const good = tokenizerFile(['<unk>', '<s>', '</s>', 'a', 'bc']);

  it('reads the valid file', () => {
    expect(readLlama2cTokenizer(good, 't.bin', 5).vocabSize).toBe(5);
  });

  it('rejects truncation at several offsets and extra tokens', () => {
    for (const cut of [0, 2, 4, 7, 12, good.length - 1])
      expectFormatError(
        () => readLlama2cTokenizer(good.subarray(0, cut), 't.bin', 5),
        /max_token_length|token \d|tokens/,
      );
    expectFormatError(() => readLlama2cTokenizer(good, 't.bin', 4), 'end of tokens');
  });

  it('rejects an absurd piece length or token count without allocating', () => {
    const bad = patch(good, 8, (dv) => dv.setInt32(0, 0x7fffffff, true));
    expectCheap(() => expectFormatError(() => readLlama2cTokenizer(bad, 't.bin', 5), 'token 0 length', 8));
    expectCheap(() => expectFormatError(() => readLlama2cTokenizer(good, 't.bin', 1e12), 'tokens'));
  });
});

describe('GGUF files', () => {
  const good = ggufFile();

  it('reads the valid file, at the offsets these tests assume', () => {
    const f = readGGUF(good, 'g.gguf');
    expect(f.dataOffset).toBe(AT.data);
    expect(f.tensors[0].ne).toEqual([32, 2]);
    expect(new DataView(good.buffer, good.byteOffset).getUint32(AT.type, true)).toBe(0);
  });

  it('rejects a wrong magic and an unsupported version', () => {
    expectFormatError(
      () =>
        readGGUF(
          patch(good, 0, (dv) => dv.setUint32(0, 0x46554746, true)),
          'g.gguf',
        ),
      'magic',
      0,
    );
    for (const v of [0, 1, 4])
      expectFormatError(
        () =>
          readGGUF(
            patch(good, 4, (dv) => dv.setUint32(0, v, true)),
            'g.gguf',
          ),
        `version at byte offset 4: ${v}, expected GGUF version 2 or 3`,
        4,
      );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, 4, (dv) => dv.setUint32(0, 3, false)),
          'g.gguf',
        ),
      'big-endian GGUF files are not supported',
      4,
    );
  });

  it('rejects absurd counts and lengths at once, without allocating', () => {
    const cases: [number, bigint, string][] = [
      [AT.tensorCount, 1n << 40n, 'tensor_count'],
      [AT.kvCount, 1n << 62n, 'metadata_kv_count'],
      [AT.keyLen, 1n << 60n, 'metadata key 0 length'],
      [AT.nameLen, 1n << 33n, 'tensor 0 name length'],
    ];
    for (const [at, value, field] of cases) {
      const bad = patch(good, at, (dv) => dv.setBigUint64(0, value, true));
      expectCheap(() => expectFormatError(() => readGGUF(bad, 'g.gguf'), field, at));
    }
    // An array claiming 2^50 f32 items.
    const arr = writeGGUF([['arr', { type: 'array', value: { itemType: 'f32', values: Float32Array.of(1) } }]], []);
    const badArr = patch(arr, 24 + 8 + 3 + 4 + 4, (dv) => dv.setBigUint64(0, 1n << 50n, true));
    expectCheap(() => expectFormatError(() => readGGUF(badArr, 'g.gguf'), '"arr" array length', 43));
  });

  it('rejects bad dims, unknown tensor and value types, misaligned offsets', () => {
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.nDims, (dv) => dv.setUint32(0, 5, true)),
          'g.gguf',
        ),
      'n_dims',
      AT.nDims,
    );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.ne0, (dv) => dv.setBigUint64(0, 0n, true)),
          'g.gguf',
        ),
      'ne[0]',
      AT.ne0,
    );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.ne1, (dv) => dv.setBigUint64(0, 1n << 62n, true)),
          'g.gguf',
        ),
      'ne[1]',
      AT.ne1,
    );
    // Huge but representable dims: the data cannot be in the file.
    expectCheap(() =>
      expectFormatError(
        () =>
          readGGUF(
            patch(good, AT.ne1, (dv) => dv.setBigUint64(0, 1n << 40n, true)),
            'g.gguf',
          ),
        'more than a 352-byte file can hold',
        AT.ne1,
      ),
    );
    // Few enough elements for the file's size, but not in the bytes after the data offset.
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.ne1, (dv) => dv.setBigUint64(0, 3n, true)),
          'g.gguf',
        ),
      'tensor "x" data',
      AT.data,
    );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.type, (dv) => dv.setUint32(0, 99, true)),
          'g.gguf',
        ),
      /tensor "x" type.*ggml type 99 is unknown; supported: F32, F16, Q4_0/,
      AT.type,
    );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.valueType, (dv) => dv.setUint32(0, 13, true)),
          'g.gguf',
        ),
      '"k" value type',
      AT.valueType,
    );
    expectFormatError(
      () =>
        readGGUF(
          patch(good, AT.offset, (dv) => dv.setBigUint64(0, 4n, true)),
          'g.gguf',
        ),
      'offset',
      AT.offset,
    );
    // Q4_0 needs ne[0] in whole blocks of 32.
    const q = patch(
      patch(good, AT.type, (dv) => dv.setUint32(0, 2, true)),
      AT.ne0,
      (dv) => dv.setBigUint64(0, 20n, true),
    );
    expectFormatError(() => readGGUF(q, 'g.gguf'), 'ne[0]');
  });

  it('rejects tensor data past the end and truncation at several offsets', () => {
    expectFormatError(() => readGGUF(good.subarray(0, good.length - 1), 'g.gguf'), 'tensor "x" data', AT.data);
    for (const cut of [0, 3, 6, 12, 20, 30, 40, 50, 60, 70, 80, 90])
      expectFormatError(() => readGGUF(good.subarray(0, cut), 'g.gguf'), /./);
  });

  it('rejects llama metadata that is missing or inconsistent with the tensors', () => {
    const tiny = readLlama2c(llama2cFile(), 'tiny.bin');
    const tensors = expectedTensors(tiny.config).map(({ name }) => ({ name, tensor: tiny.tensors.get(name)! }));
    const meta = llamaMetadata(tiny.config, null);
    // The valid file loads with the same config.
    expect(llamaFromGGUF(readGGUF(writeGGUF(meta, tensors), 'm.gguf'), 'm.gguf').config).toEqual(tiny.config);
    const without = (key: string) => meta.filter(([k]) => k !== key);
    expectFormatError(
      () => llamaFromGGUF(readGGUF(writeGGUF(without('llama.embedding_length'), tensors), 'm.gguf'), 'm.gguf'),
      /llama\.embedding_length at byte offset \d+: missing/,
    );
    const wrong = meta.map(([k, v]): [string, GGUFValue] =>
      k === 'llama.feed_forward_length' ? [k, { type: 'u32', value: 32 }] : [k, v],
    );
    expectFormatError(
      () => llamaFromGGUF(readGGUF(writeGGUF(wrong, tensors), 'm.gguf'), 'm.gguf'),
      'tensor "blk.0.ffn_gate.weight" ne',
    );
    const layout = meta.map(([k, v]): [string, GGUFValue] =>
      k === 'sparq.rope_layout' ? [k, { type: 'string', value: 'neox' }] : [k, v],
    );
    expectFormatError(
      () => llamaFromGGUF(readGGUF(writeGGUF(layout, tensors), 'm.gguf'), 'm.gguf'),
      'sparq.rope_layout',
    );
    expectFormatError(
      () => llamaFromGGUF(readGGUF(writeGGUF(meta, tensors.slice(1)), 'm.gguf'), 'm.gguf'),
      'tensor "token_embd.weight"',
    );
  });
});
