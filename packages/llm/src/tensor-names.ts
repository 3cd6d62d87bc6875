/**
 * Weight names, as llama.cpp's GGUF files spell them, and the row-major shape
 * each has in this engine ((rows, cols): ggml's ne is the reverse, ne[0] = cols).
 * Both loaders produce a map from these names to tensors.
 */
import type { ModelConfig } from './config.ts';
import { FAMILIES } from './family.ts';

export const TOKEN_EMBD = 'token_embd.weight';
export const OUTPUT_NORM = 'output_norm.weight';
export const OUTPUT = 'output.weight';
/** Per-pair RoPE frequency divisors (headDim / 2), shared by all layers (Llama 3.1+). */
export const ROPE_FREQS = 'rope_freqs.weight';

/** Per-layer weights: our field name -> llama.cpp's name suffix. w1 = gate, w2 = down, w3 = up. */
export const LAYER_TENSORS = {
  attnNorm: 'attn_norm',
  wq: 'attn_q',
  wk: 'attn_k',
  wv: 'attn_v',
  wo: 'attn_output',
  ffnNorm: 'ffn_norm',
  w1: 'ffn_gate',
  w2: 'ffn_down',
  w3: 'ffn_up',
} as const;

export type LayerTensor = keyof typeof LAYER_TENSORS;

/** `blk.<layer>.<suffix>.weight`. */
export function layerName(layer: number, tensor: LayerTensor): string {
  return `blk.${layer}.${LAYER_TENSORS[tensor]}.weight`;
}

/** Per-layer vectors some models have: q/k/v biases (Qwen 2), per-head q/k norms (Qwen 3). Full names. */
export const EXTRA_LAYER_TENSORS = {
  bq: 'attn_q.bias',
  bk: 'attn_k.bias',
  bv: 'attn_v.bias',
  qNorm: 'attn_q_norm.weight',
  kNorm: 'attn_k_norm.weight',
} as const;

export type ExtraLayerTensor = keyof typeof EXTRA_LAYER_TENSORS;

/** `blk.<layer>.<name>`. */
export function extraLayerName(layer: number, tensor: ExtraLayerTensor): string {
  return `blk.${layer}.${EXTRA_LAYER_TENSORS[tensor]}`;
}

/** The extra per-layer tensors a model of config `c` has. */
export function extraLayerTensors(c: ModelConfig): ExtraLayerTensor[] {
  return [
    ...(c.attnBias ? (['bq', 'bk', 'bv'] as const) : []),
    ...(FAMILIES[c.arch].qkNorm ? (['qNorm', 'kNorm'] as const) : []),
  ];
}

function extraLayerShape(c: ModelConfig, tensor: ExtraLayerTensor): number[] {
  switch (tensor) {
    case 'bq':
      return [c.qDim];
    case 'bk':
    case 'bv':
      return [c.kvDim];
    case 'qNorm':
    case 'kNorm':
      return [c.headDim];
  }
}

/** Row-major shape of each per-layer weight: (out features, in features) for matrices. */
export function layerShape(c: ModelConfig, tensor: LayerTensor): number[] {
  switch (tensor) {
    case 'attnNorm':
    case 'ffnNorm':
      return [c.dim];
    case 'wq':
      return [c.qDim, c.dim];
    case 'wo':
      return [c.dim, c.qDim];
    case 'wk':
    case 'wv':
      return [c.kvDim, c.dim];
    case 'w1':
    case 'w3':
      return [c.hiddenDim, c.dim];
    case 'w2':
      return [c.dim, c.hiddenDim];
  }
}

/**
 * Every tensor a model of config `c` needs, with its row-major shape (output.weight only when not
 * shared, rope_freqs.weight only when the model has it, the extra per-layer vectors its family and
 * biases call for).
 */
export function expectedTensors(c: ModelConfig): { name: string; shape: number[] }[] {
  const list = [{ name: TOKEN_EMBD, shape: [c.vocabSize, c.dim] }];
  if (c.ropeFreqs) list.push({ name: ROPE_FREQS, shape: [c.headDim / 2] });
  for (let l = 0; l < c.nLayers; l++) {
    for (const t of Object.keys(LAYER_TENSORS) as LayerTensor[])
      list.push({ name: layerName(l, t), shape: layerShape(c, t) });
    for (const t of extraLayerTensors(c)) list.push({ name: extraLayerName(l, t), shape: extraLayerShape(c, t) });
  }
  list.push({ name: OUTPUT_NORM, shape: [c.dim] });
  if (!c.sharedClassifier) list.push({ name: OUTPUT, shape: [c.vocabSize, c.dim] });
  return list;
}
