/**
 * Weight names, as llama.cpp's GGUF files spell them, and the row-major shape
 * each has in this engine ((rows, cols): ggml's ne is the reverse, ne[0] = cols).
 * Both loaders produce a map from these names to tensors.
 */
import type { ModelConfig } from './config.ts';

export const TOKEN_EMBD = 'token_embd.weight';
export const OUTPUT_NORM = 'output_norm.weight';
export const OUTPUT = 'output.weight';

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

/** Row-major shape of each per-layer weight: (out features, in features) for matrices. */
export function layerShape(c: ModelConfig, tensor: LayerTensor): number[] {
  switch (tensor) {
    case 'attnNorm':
    case 'ffnNorm':
      return [c.dim];
    case 'wq':
    case 'wo':
      return [c.dim, c.dim];
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

/** Every tensor a model of config `c` needs, with its row-major shape (output.weight only when not shared). */
export function expectedTensors(c: ModelConfig): { name: string; shape: number[] }[] {
  const list = [{ name: TOKEN_EMBD, shape: [c.vocabSize, c.dim] }];
  for (let l = 0; l < c.nLayers; l++) {
    for (const t of Object.keys(LAYER_TENSORS) as LayerTensor[]) list.push({ name: layerName(l, t), shape: layerShape(c, t) });
  }
  list.push({ name: OUTPUT_NORM, shape: [c.dim] });
  if (!c.sharedClassifier) list.push({ name: OUTPUT, shape: [c.vocabSize, c.dim] });
  return list;
}
