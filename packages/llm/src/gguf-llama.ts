/**
 * The llama architecture in GGUF, both ways: config and tokenizer <-> metadata
 * keys (llama.*, tokenizer.ggml.*), weights <-> llama.cpp's tensor names.
 *
 * RoPE layout. This engine rotates adjacent pairs (2i, 2i+1), as llama2.c
 * does. llama.cpp's llama architecture does too (its rope type NORM): its HF
 * converter permutes Q/K rows back from Hugging Face's rotate-half order into
 * exactly this layout. So wq/wk are stored as llama2.c has them and read
 * without any permutation. Files written here carry `sparq.rope_layout =
 * "adjacent"` to say so; files without the key are taken to follow
 * llama.cpp's convention (the same layout); any other value is refused.
 *
 * Tokens. GGUF stores pieces as UTF-8 strings with SentencePiece's U+2581
 * for a space (llama.cpp's convention); llama2.c's tokenizer uses ' '. We
 * map ' ' <-> U+2581 on write and read. Token types: 2 unknown (id 0),
 * 3 control (BOS, EOS), 6 byte (`<0xAB>`), 1 normal.
 */
import { Tensor, f16ToF32, type Engine } from '@sparq/core';
import { ByteReader } from './byte-reader.ts';
import { makeConfig, type ConfigFields, type ModelConfig } from './config.ts';
import { gguf, type GGUFValue } from './gguf-format.ts';
import { ggufTensor, type GGUFFile } from './gguf-read.ts';
import type { LoadedModel } from './llama2c.ts';
import { OUTPUT, expectedTensors } from './tensor-names.ts';
import { Tokenizer } from './tokenizer.ts';

const SPACE_MARK = '\u2581';
export const ROPE_LAYOUT_KEY = 'sparq.rope_layout';

/** llama.cpp's general.file_type for a file mostly of this type. */
const FILE_TYPE: Record<string, number> = { f32: 0, f16: 1, q4_0: 2, q4_1: 3, q8_0: 7 };

/** Metadata for a llama model and its tokenizer, in llama.cpp's keys. */
export function llamaMetadata(c: ModelConfig, tokenizer: Tokenizer | null, options: { name?: string; fileType?: string } = {}): [string, GGUFValue][] {
  const m: [string, GGUFValue][] = [
    ['general.architecture', gguf.string('llama')],
    ['general.name', gguf.string(options.name ?? 'llama')],
    ['general.alignment', gguf.u32(32)],
    ['general.file_type', gguf.u32(FILE_TYPE[options.fileType ?? 'f32'] ?? 0)],
    ['llama.context_length', gguf.u32(c.seqLen)],
    ['llama.embedding_length', gguf.u32(c.dim)],
    ['llama.block_count', gguf.u32(c.nLayers)],
    ['llama.feed_forward_length', gguf.u32(c.hiddenDim)],
    ['llama.attention.head_count', gguf.u32(c.nHeads)],
    ['llama.attention.head_count_kv', gguf.u32(c.nKvHeads)],
    ['llama.attention.layer_norm_rms_epsilon', gguf.f32(c.normEps)],
    ['llama.rope.freq_base', gguf.f32(c.ropeTheta)],
    ['llama.rope.dimension_count', gguf.u32(c.headDim)],
    ['llama.vocab_size', gguf.u32(c.vocabSize)],
    [ROPE_LAYOUT_KEY, gguf.string('adjacent')],
  ];
  if (tokenizer) m.push(...tokenizerMetadata(tokenizer));
  return m;
}

function tokenizerMetadata(t: Tokenizer): [string, GGUFValue][] {
  const tokens = t.pieces.map((p, id) => {
    const s = Buffer.from(p).toString('utf8');
    if (!Buffer.from(s, 'utf8').equals(p)) throw new Error(`GGUF: token ${id} is not valid UTF-8, and GGUF stores tokens as strings`);
    return s.replaceAll(' ', SPACE_MARK);
  });
  const types = Int32Array.from(tokens, (s, id) => (id === 0 ? 2 : id === t.bosId || id === t.eosId ? 3 : /^<0x[0-9A-Fa-f]{2}>$/.test(s) ? 6 : 1));
  return [
    ['tokenizer.ggml.model', gguf.string('llama')],
    ['tokenizer.ggml.tokens', gguf.array({ itemType: 'string', values: tokens })],
    ['tokenizer.ggml.scores', gguf.array({ itemType: 'f32', values: Float32Array.from(t.scores) })],
    ['tokenizer.ggml.token_type', gguf.array({ itemType: 'i32', values: types })],
    ['tokenizer.ggml.bos_token_id', gguf.u32(t.bosId)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(t.eosId)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(0)],
  ];
}

/** Reads metadata values with FormatErrors that name the key and its byte offset. */
class Keys {
  private readonly r: ByteReader;
  constructor(
    private readonly f: GGUFFile,
    file: string,
  ) {
    this.r = new ByteReader(f.bytes, file);
  }
  fail(key: string, what: string): never {
    throw this.r.error(key, what, this.f.keyOffsets.get(key) ?? this.f.metadataEnd);
  }
  get(key: string): GGUFValue | undefined {
    return this.f.metadata.get(key);
  }
  int(key: string, fallback?: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback ?? this.fail(key, 'missing');
    const n = typeof v.value === 'bigint' ? Number(v.value) : v.value;
    if (typeof n !== 'number' || !Number.isInteger(n) || v.type === 'f32' || v.type === 'f64') this.fail(key, `${String(v.value)} (${v.type}), expected an integer`);
    return n;
  }
  float(key: string, fallback: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback;
    if (typeof v.value !== 'number') this.fail(key, `${String(v.value)} (${v.type}), expected a number`);
    return v.value;
  }
  string(key: string): string | undefined {
    const v = this.get(key);
    if (v !== undefined && v.type !== 'string') this.fail(key, `a ${v.type}, expected a string`);
    return v?.value as string | undefined;
  }
}

/** Config and tensors of a llama GGUF file; norms come back as f32. */
export function llamaFromGGUF(f: GGUFFile, file: string, engine?: Engine): LoadedModel {
  const keys: Keys = new Keys(f, file);
  const arch = keys.string('general.architecture');
  if (arch !== 'llama') keys.fail('general.architecture', `${arch === undefined ? 'missing' : `"${arch}"`}, expected "llama"`);
  const layout = keys.string(ROPE_LAYOUT_KEY);
  if (layout !== undefined && layout !== 'adjacent') keys.fail(ROPE_LAYOUT_KEY, `"${layout}", only "adjacent" (llama2.c / llama.cpp NORM) is supported`);
  const embd = f.tensors.find((t) => t.name === 'token_embd.weight');
  const nHeads = keys.int('llama.attention.head_count');
  const fields: ConfigFields = {
    dim: keys.int('llama.embedding_length'),
    hiddenDim: keys.int('llama.feed_forward_length'),
    nLayers: keys.int('llama.block_count'),
    nHeads,
    nKvHeads: keys.int('llama.attention.head_count_kv', nHeads),
    vocabSize: keys.int('llama.vocab_size', embd?.ne[1] ?? 0),
    seqLen: keys.int('llama.context_length'),
  };
  const byName = new Map(f.tensors.map((t) => [t.name, t]));
  const extra = { normEps: keys.float('llama.attention.layer_norm_rms_epsilon', 1e-5), ropeTheta: keys.float('llama.rope.freq_base', 10000), sharedClassifier: !byName.has(OUTPUT) };
  const keyOf: Record<string, string> = {
    dim: 'llama.embedding_length', hiddenDim: 'llama.feed_forward_length', nLayers: 'llama.block_count', nHeads: 'llama.attention.head_count',
    nKvHeads: 'llama.attention.head_count_kv', vocabSize: 'llama.vocab_size', seqLen: 'llama.context_length', normEps: 'llama.attention.layer_norm_rms_epsilon', ropeTheta: 'llama.rope.freq_base',
  };
  const config = makeConfig(fields, extra, (field, what) => keys.fail(keyOf[field], what));
  const rot = keys.int('llama.rope.dimension_count', config.headDim);
  if (rot !== config.headDim) keys.fail('llama.rope.dimension_count', `${rot}, only full rotary (head dim ${config.headDim}) is supported`);

  const r = new ByteReader(f.bytes, file);
  const tensors = new Map<string, Tensor>();
  for (const { name, shape } of expectedTensors(config)) {
    const info = byName.get(name);
    if (!info) throw r.error(`tensor "${name}"`, 'missing', f.dataOffset);
    const got = [...info.ne].reverse();
    if (got.length !== shape.length || got.some((n, i) => n !== shape[i])) {
      throw r.error(`tensor "${name}" ne`, `shape [${got.join(', ')}] (row-major), expected [${shape.join(', ')}] from the metadata`, info.infoOffset);
    }
    const t = ggufTensor(f, info);
    // Norm weights feed rmsnorm, which takes f32.
    tensors.set(name, shape.length === 1 ? toF32(t, engine) : t);
  }
  const types = new Set([...tensors.values()].filter((t) => t.rank === 2).map((t) => t.dtype));
  return { config, tensors, format: `GGUF v${f.version} (${[...types].join(', ')})` };
}

/** An f32 copy (or the tensor itself when already f32): f16 converted here, blocks by the engine. */
export function toF32(t: Tensor, engine?: Engine): Tensor<'f32'> {
  if (t.dtype === 'f32') return t as Tensor<'f32'>;
  const out = Tensor.zeros('f32', t.shape);
  if (t.dtype === 'f16') {
    const src = t.data as Uint16Array;
    for (let i = 0; i < out.size; i++) out.data[i] = f16ToF32(src[t.offset + i]);
  } else {
    if (!engine) throw new Error(`toF32: dequantizing ${t.dtype} needs an engine`);
    engine.dequantize(out, t as Tensor<'q4_0'>);
  }
  return out;
}

/** The tokenizer stored in a GGUF file's metadata, or null when it has none. */
export function tokenizerFromGGUF(f: GGUFFile, file: string): Tokenizer | null {
  const keys: Keys = new Keys(f, file);
  const tokens = keys.get('tokenizer.ggml.tokens');
  if (tokens === undefined) return null;
  const model = keys.string('tokenizer.ggml.model');
  if (model !== 'llama') keys.fail('tokenizer.ggml.model', `${model === undefined ? 'missing' : `"${model}"`}, only the "llama" (SentencePiece BPE) tokenizer is supported`);
  if (tokens.type !== 'array' || tokens.value.itemType !== 'string') keys.fail('tokenizer.ggml.tokens', 'expected an array of strings');
  const pieces = (tokens.value.values as string[]).map((s) => Buffer.from(s.replaceAll(SPACE_MARK, ' '), 'utf8'));
  const scoresValue = keys.get('tokenizer.ggml.scores');
  let scores: Float32Array = new Float32Array(pieces.length);
  if (scoresValue !== undefined) {
    if (scoresValue.type !== 'array' || scoresValue.value.itemType !== 'f32' || scoresValue.value.values.length !== pieces.length) {
      keys.fail('tokenizer.ggml.scores', `expected ${pieces.length} f32 scores, one per token`);
    }
    scores = scoresValue.value.values as Float32Array;
  }
  const id = (key: string, fallback: number) => {
    const n = keys.int(key, fallback);
    if (n < 0 || n >= pieces.length) keys.fail(key, `${n}, expected a token id in [0, ${pieces.length - 1}]`);
    return n;
  };
  return new Tokenizer(pieces, scores, { bosId: id('tokenizer.ggml.bos_token_id', 1), eosId: id('tokenizer.ggml.eos_token_id', 2) });
}
