/**
 * Reader for karpathy/llama2.c's legacy (version 0) checkpoint: a header of 7
 * little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len) and then f32 weights, each kind stacked over layers:
 *
 *   token_embedding (vocab, dim)            rms_att (L, dim)
 *   wq (L, dim, dim)   wk (L, kv_dim, dim)   wv (L, kv_dim, dim)   wo (L, dim, dim)
 *   rms_ffn (L, dim)   w1 (L, hidden, dim)   w2 (L, dim, hidden)   w3 (L, hidden, dim)
 *   rms_final (dim)    freq_cis_real, freq_cis_imag (seq_len, head_size / 2), skipped
 *   wcls (vocab, dim)  only when vocab_size was negative in the header
 *
 * run.c's constants: RMSNorm epsilon 1e-5f (as an f32, so GGUF's f32 key holds the
 * same value) and RoPE base 10000. Sizes are checked against the file length before any view is made, and the
 * file must be consumed exactly. Tensors are read one by one, so the file is never held whole.
 */
import { Tensor } from '@sparq/core';
import { ByteReader, type ByteSource } from './byte-reader.ts';
import { makeConfig, type ConfigFields, type ModelConfig } from './config.ts';
import {
  LAYER_TENSORS,
  OUTPUT,
  OUTPUT_NORM,
  TOKEN_EMBD,
  layerName,
  layerShape,
  type LayerTensor,
} from './tensor-names.ts';

/** A model as a loader hands it over: config plus named row-major tensors. */
export interface LoadedModel {
  config: ModelConfig;
  tensors: Map<string, Tensor>;
  /** What the file was, for summaries. */
  format: string;
}

export const LLAMA2C_HEADER_BYTES = 28;

const HEADER_FIELDS: (keyof ConfigFields)[] = [
  'dim',
  'hiddenDim',
  'nLayers',
  'nHeads',
  'nKvHeads',
  'vocabSize',
  'seqLen',
];
const HEADER_NAMES = ['dim', 'hidden_dim', 'n_layers', 'n_heads', 'n_kv_heads', 'vocab_size', 'seq_len'];

/** File order of the per-layer kinds between token_embedding and rms_final. */
const LAYER_ORDER: LayerTensor[] = ['attnNorm', 'wq', 'wk', 'wv', 'wo', 'ffnNorm', 'w1', 'w2', 'w3'];

/** A region of the checkpoint: a stacked kind of weight, its row-major shape (layers first) and byte offset. */
export interface Llama2cRegion {
  name: string;
  shape: number[];
  at: number;
}

/** The header's config and where each region lies, checked against the file's size before anything is read. */
export function llama2cLayout(
  source: ByteSource | Uint8Array,
  file?: string,
): { config: ModelConfig; regions: Llama2cRegion[] } {
  const r = new ByteReader(source, file);
  // Header: 7 x int32; a negative vocab_size means an unshared classifier follows.
  const raw = HEADER_FIELDS.map((_, i) => r.i32(`header ${HEADER_NAMES[i]}`));
  const fields = Object.fromEntries(HEADER_FIELDS.map((f, i) => [f, raw[i]])) as unknown as ConfigFields;
  const sharedClassifier = fields.vocabSize > 0;
  fields.vocabSize = Math.abs(fields.vocabSize);
  const config = makeConfig(
    fields,
    { normEps: Math.fround(1e-5), ropeTheta: 10000, sharedClassifier },
    (field, what) => {
      const i = HEADER_FIELDS.indexOf(field as keyof ConfigFields);
      throw r.error(`header ${HEADER_NAMES[i] ?? field}`, what, Math.max(0, i) * 4);
    },
  );

  // Plan every region with its byte offset, then check the total before making any view.
  const regions: Llama2cRegion[] = [];
  let at = LLAMA2C_HEADER_BYTES;
  const plan = (name: string, shape: number[]) => {
    regions.push({ name, shape, at });
    at += size(shape) * 4;
  };
  plan('token_embedding', [config.vocabSize, config.dim]);
  for (const t of LAYER_ORDER) plan(LAYER_TENSORS[t], [config.nLayers, ...layerShape(config, t)]);
  plan('rms_final', [config.dim]);
  plan('freq_cis', [config.seqLen, config.headDim]);
  if (!sharedClassifier) plan('wcls', [config.vocabSize, config.dim]);
  for (const reg of regions) r.need(reg.name, size(reg.shape) * 4, reg.at);
  if (at !== r.length) {
    throw r.error(
      'end of weights',
      `the header implies a ${at}-byte file, it has ${r.length} bytes (${r.length - at} bytes left over)`,
      at,
    );
  }
  return { config, regions };
}

const size = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

/** Parses a llama2.c checkpoint from `source` (or from bytes in memory named `file`); each tensor is read into its own buffer. */
export function readLlama2c(source: ByteSource | Uint8Array, file?: string): LoadedModel {
  const r = new ByteReader(source, file);
  const { config, regions } = llama2cLayout(r.source);

  // One tensor per layer of each stacked kind, each read on its own (a view when the bytes are in memory and aligned).
  const tensors = new Map<string, Tensor>();
  const view = (at: number, shape: number[]) => {
    let bytes = r.source.read(at, size(shape) * 4);
    if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
    return new Tensor('f32', new Float32Array(bytes.buffer, bytes.byteOffset, size(shape)), shape);
  };
  const byName = new Map(regions.map((reg) => [reg.name, reg.at]));
  tensors.set(TOKEN_EMBD, view(byName.get('token_embedding')!, [config.vocabSize, config.dim]));
  for (const t of LAYER_ORDER) {
    const shape = layerShape(config, t);
    // Layer l of the stack starts l * size(shape) floats in.
    for (let l = 0; l < config.nLayers; l++)
      tensors.set(layerName(l, t), view(byName.get(LAYER_TENSORS[t])! + l * size(shape) * 4, shape));
  }
  tensors.set(OUTPUT_NORM, view(byName.get('rms_final')!, [config.dim]));
  if (!config.sharedClassifier) tensors.set(OUTPUT, view(byName.get('wcls')!, [config.vocabSize, config.dim]));
  return { config, tensors, format: 'llama2.c legacy (version 0), f32' };
}
