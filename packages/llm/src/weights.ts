/**
 * A runnable model: config plus weights, built from a loader's named tensors.
 * Matrices are kept as stored (f32 from llama2.c; f32/f16/q4_0/q4_1/q8_0 from
 * GGUF), or converted on load:
 *   'f32'   everything dequantized to f32
 *   'q4_0'  ggml Q4_0 blocks via engine.quantize
 *   'int4'  the engine's group-wise INT4 (group 32, symmetric) via engine.quantizeInt4
 * Quantized formats need rows of whole 32-element groups: a matrix whose cols
 * are not a multiple of 32 (stories260K's w2, 172 columns) stays f32, and the
 * model's `notes` say so. Norms are always f32. The token embedding stays as
 * stored for row lookups; with a shared classifier the classifier is its own
 * quantized copy of it. Vectors (norms, biases, rope_freqs) are f32.
 */
import {
  Int4Matrix,
  Tensor,
  isBlockDType,
  type DType,
  type Engine,
  type MatrixDType,
  type RopeOptions,
} from '@sparq/core';
import type { ModelConfig } from './config.ts';
import { toF32 } from './gguf-llama.ts';
import type { LoadedModel } from './llama2c.ts';
import { matrixType, type Matrix } from './linear.ts';
import { ropeOptions } from './rope-scaling.ts';
import { namingTensor } from './tensor-check.ts';
import {
  LAYER_TENSORS,
  OUTPUT,
  OUTPUT_NORM,
  ROPE_FREQS,
  TOKEN_EMBD,
  extraLayerName,
  extraLayerTensors,
  layerName,
  type ExtraLayerTensor,
  type LayerTensor,
} from './tensor-names.ts';

/** How the runtime stores weights: as f32, as ggml q4_0 blocks, or as group-wise INT4. */
export type WeightType = 'f32' | 'q4_0' | 'int4';
/** The `weights` option's choices. */
export const WEIGHT_TYPES: readonly WeightType[] = ['f32', 'q4_0', 'int4'];
/** Group size of the INT4 weights and the block of Q4_0. */
export const QUANT_GROUP = 32;

export interface LayerWeights {
  attnNorm: Tensor<'f32'>; // (dim)
  wq: Matrix; // (q_dim, dim)
  wk: Matrix; // (kv_dim, dim)
  wv: Matrix; // (kv_dim, dim)
  wo: Matrix; // (dim, q_dim)
  ffnNorm: Tensor<'f32'>; // (dim)
  w1: Matrix; // (hidden_dim, dim)
  w2: Matrix; // (dim, hidden_dim)
  w3: Matrix; // (hidden_dim, dim)
  /** q, k, v biases (Qwen 2), when the model has them. */
  bias?: { q: Tensor<'f32'>; k: Tensor<'f32'>; v: Tensor<'f32'> }; // (q_dim), (kv_dim), (kv_dim)
  /** Per-head RMSNorm weights of q and k (Qwen 3), when the family has them. */
  qkNorm?: { q: Tensor<'f32'>; k: Tensor<'f32'> }; // (head_dim) each
}

export interface ModelWeights {
  tokenEmbedding: Tensor; // (vocab_size, dim), any stored dtype
  layers: LayerWeights[];
  finalNorm: Tensor<'f32'>; // (dim)
  classifier: Matrix; // (vocab_size, dim)
  /** How rope turns q and k: the family's pair layout, and the frequency table and scale of RoPE scaling / rope_freqs. */
  rope: RopeOptions;
}

export interface Model {
  config: ModelConfig;
  weights: ModelWeights;
  /** The file format, e.g. 'llama2.c legacy (version 0), f32'. */
  format: string;
  /** Storage of the matrices, e.g. 'q4_0 (w2 f32)'. */
  weightType: string;
  /** Anything the summary should mention (matrices kept f32, ...). */
  notes: string[];
}

/** Converts one matrix to the requested type (or keeps it when `type` is undefined). */
function convert(engine: Engine, name: string, t: Tensor, type: WeightType | undefined, notes: string[]): Matrix {
  if (type === undefined) return t;
  const f32 = toF32(t, engine);
  if (type === 'f32') return f32;
  const [rows, cols] = f32.shape;
  if (cols % QUANT_GROUP !== 0) {
    notes.push(`${name} kept f32: ${cols} columns are not whole ${QUANT_GROUP}-element groups`);
    return f32;
  }
  if (type === 'q4_0') {
    const q = Tensor.zeros('q4_0', [rows, cols]);
    namingTensor(name, () => engine.quantize(q, f32));
    return q;
  }
  const w = new Int4Matrix(rows, cols, { groupSize: QUANT_GROUP, symmetric: true });
  namingTensor(name, () => engine.quantizeInt4(w, f32));
  return w;
}

/** Dtypes of the model's tensors that `engine` cannot compute on as stored (products, and row lookups of block types). */
export function unsupportedDTypes(engine: Engine, loaded: LoadedModel): DType[] {
  const dtypes = new Set([...loaded.tensors.values()].map((t) => t.dtype));
  return [...dtypes].filter((d) => !engine.has('matvec', d) || (isBlockDType(d) && !engine.has('dequantize', d)));
}

/**
 * Builds the runnable model; `type` undefined keeps the matrices as the file stores them.
 * `constant` (default true) marks the matrices constant (Engine.markConstant), so the backend may
 * keep repacked copies of them; false when the memory plan leaves no room for the copies.
 */
export function buildModel(
  engine: Engine,
  loaded: LoadedModel,
  type?: WeightType,
  { constant: keep = true }: { constant?: boolean } = {},
): Model {
  const { config, tensors } = loaded;
  const notes: string[] = [];
  const get = (name: string) => tensors.get(name)!;
  const norm = (name: string) => toF32(get(name), engine);
  const layers: LayerWeights[] = [];
  const extras = new Set(extraLayerTensors(config));
  // The matrices never change once built: the backend may keep layouts derived from them.
  const constant = (w: Matrix): Matrix => (keep && w instanceof Tensor && engine.markConstant(w), w);
  for (let l = 0; l < config.nLayers; l++) {
    const m = (t: LayerTensor) => constant(convert(engine, layerName(l, t), get(layerName(l, t)), type, notes));
    const v = (t: ExtraLayerTensor) => norm(extraLayerName(l, t));
    layers.push({
      ...(extras.has('bq') && { bias: { q: v('bq'), k: v('bk'), v: v('bv') } }),
      ...(extras.has('qNorm') && { qkNorm: { q: v('qNorm'), k: v('kNorm') } }),
      attnNorm: norm(layerName(l, 'attnNorm')),
      wq: m('wq'),
      wk: m('wk'),
      wv: m('wv'),
      wo: m('wo'),
      ffnNorm: norm(layerName(l, 'ffnNorm')),
      w1: m('w1'),
      w2: m('w2'),
      w3: m('w3'),
    });
  }
  const tokenEmbedding = get(TOKEN_EMBD);
  const classifierName = config.sharedClassifier ? TOKEN_EMBD : OUTPUT;
  const classifier = constant(convert(engine, classifierName, get(classifierName), type, notes));
  const rope = ropeOptions(config, config.ropeFreqs ? norm(ROPE_FREQS) : undefined);
  const weights: ModelWeights = { tokenEmbedding, layers, finalNorm: norm(OUTPUT_NORM), classifier, rope };
  return { config, weights, format: loaded.format, weightType: describeTypes(weights), notes: collapse(notes) };
}

/** The matrices of a layer (LayerWeights' products), in the order of the file's layer tensors. */
const LAYER_MATRICES = ['wq', 'wk', 'wv', 'wo', 'w1', 'w2', 'w3'] as const;

/**
 * Makes now the copies of the model's matrices that the backend lays out for its blocked products
 * (Engine.repackNow; buildModel's `constant` matrices only), which it would otherwise make at each
 * one's first such product: `sparq serve` with several slots calls it at start, so that its memory is
 * fixed there and the first batched step does not wait for them. Returns the bytes of the copies.
 */
export function repackModel(engine: Engine, model: Model): number {
  const { layers, classifier } = model.weights;
  let bytes = 0;
  for (const w of [...layers.flatMap((l) => LAYER_MATRICES.map((t) => l[t])), classifier])
    if (w instanceof Tensor && engine.repackNow(w))
      bytes += engine.backend.repackedBytes?.(w.dtype as MatrixDType, w.shape[0], w.shape[1]) ?? 0;
  return bytes;
}

/** 'q4_0 (ffn_down f32)': the main matrix type and the exceptions by kind. */
function describeTypes(w: ModelWeights): string {
  const counts = new Map<string, Set<string>>();
  for (const layer of w.layers) {
    for (const t of LAYER_MATRICES) {
      const type = matrixType(layer[t]);
      if (!counts.has(type)) counts.set(type, new Set());
      counts.get(type)!.add(LAYER_TENSORS[t]);
    }
  }
  const sorted = [...counts].sort((a, b) => b[1].size - a[1].size);
  const [main, ...rest] = sorted;
  const extra = rest.map(([type, kinds]) => `${[...kinds].join(', ')} ${type}`);
  return `${main[0]}${extra.length ? ` (${extra.join('; ')})` : ''}, classifier ${matrixType(w.classifier)}`;
}

/** One note per kind of tensor instead of one per layer. */
function collapse(notes: string[]): string[] {
  return [...new Set(notes.map((n) => n.replace(/^blk\.\d+\./, 'blk.*.')))];
}
