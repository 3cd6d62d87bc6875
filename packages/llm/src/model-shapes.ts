/**
 * Random-weight GGUF files with the shapes of models people run: the speed and
 * memory of a forward step depend on the dimensions, head counts, FFN width,
 * vocabulary and weight types, not on the values, so `sparq bench --shape`
 * measures these without downloading a model. llama.cpp loads the same file.
 *
 * The hyperparameters, from each model's Hugging Face config.json:
 *
 *   shape        arch   dim   layers heads kv  FFN    vocab   RoPE base  ctx    source
 *   llama3-8b    llama  4096  32     32    8   14336  128256  500000     8192   meta-llama/Meta-Llama-3-8B
 *   llama2-7b    llama  4096  32     32    32  11008  32000   10000      4096   meta-llama/Llama-2-7b-hf
 *   qwen2.5-7b   qwen2  3584  28     28    4   18944  152064  1000000    32768  Qwen/Qwen2.5-7B (q/k/v biases)
 *   mistral-7b   llama  4096  32     32    8   14336  32768   1000000    32768  mistralai/Mistral-7B-v0.3
 *
 * Head dim 128 in all four. Mistral is v0.3 (no sliding window, which this
 * engine does not implement; v0.1 had a 4096-token window, RoPE base 10000 and
 * vocab 32000). The file's context_length is SHAPE_FILE_CONTEXT (a random model
 * has no trained length to respect), so one file serves every context length.
 *
 * Weights:
 *   q8_0    every matrix Q8_0 (token embedding and classifier too), norms F32.
 *   q4_k_m  llama.cpp's Q4_K_M recipe (llama-quant.cpp, llama_tensor_get_type): Q4_K, with Q6_K
 *           for the classifier and for attn_v and ffn_down in the layers where its use_more_bits(i, n)
 *           holds (the first and last eighth of the layers and every third one between: 16 of 32).
 * A slice of N layers stands for the whole model: its layer i gets the types of the model's layer
 * floor(i * L / N), so the mix of Q4_K and Q6_K, and with it the weight bytes per layer against the
 * KV bytes per layer, is the whole model's (N = 2 of Llama 3's 32: layers 0 and 16, Q6_K and Q4_K).
 * The token embedding and the classifier are the whole model's too: a slice reads the classifier
 * every step as the whole model does, so it weighs more in a slice's decode time.
 *
 * Values: each matrix's rows are copies of a pool of rows quantized from uniform random numbers
 * with variance 1 / cols (realistic blocks, activations of unit scale; a copy costs nothing, so a
 * multi-GB file is written at disk speed). The order of rows is seeded: every run makes the same file.
 */
import { Tensor, type Engine } from '@sparq/core';
import { makeConfig, type ModelConfig } from './config.ts';
import type { Architecture } from './family.ts';
import { convertTensor, type GGUFFileType } from './gguf-convert.ts';
import { tensorByteSize, tensorBytes, type GGUFValue } from './gguf-format.ts';
import { llamaMetadata } from './gguf-llama.ts';
import { layoutGGUF, type GGUFTensorSpec } from './gguf-write.ts';
import { writeGGUFStream } from './model-file.ts';
import { mulberry32, smallTokenizer } from './random-model.ts';
import { OUTPUT, TOKEN_EMBD, expectedTensors } from './tensor-names.ts';

export interface ModelShape {
  arch: Architecture;
  dim: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  hiddenDim: number;
  vocabSize: number;
  ropeTheta: number;
  normEps: number;
  /** The model's trained context. */
  context: number;
  /** Where the numbers come from. */
  source: string;
}

/** See the table above. */
export const MODEL_SHAPES = {
  'llama3-8b': {
    arch: 'llama',
    dim: 4096,
    nLayers: 32,
    nHeads: 32,
    nKvHeads: 8,
    hiddenDim: 14336,
    vocabSize: 128256,
    ropeTheta: 500000,
    normEps: 1e-5,
    context: 8192,
    source: 'meta-llama/Meta-Llama-3-8B config.json',
  },
  'llama2-7b': {
    arch: 'llama',
    dim: 4096,
    nLayers: 32,
    nHeads: 32,
    nKvHeads: 32,
    hiddenDim: 11008,
    vocabSize: 32000,
    ropeTheta: 10000,
    normEps: 1e-5,
    context: 4096,
    source: 'meta-llama/Llama-2-7b-hf config.json',
  },
  'qwen2.5-7b': {
    arch: 'qwen2',
    dim: 3584,
    nLayers: 28,
    nHeads: 28,
    nKvHeads: 4,
    hiddenDim: 18944,
    vocabSize: 152064,
    ropeTheta: 1000000,
    normEps: 1e-6,
    context: 32768,
    source: 'Qwen/Qwen2.5-7B config.json',
  },
  'mistral-7b': {
    arch: 'llama',
    dim: 4096,
    nLayers: 32,
    nHeads: 32,
    nKvHeads: 8,
    hiddenDim: 14336,
    vocabSize: 32768,
    ropeTheta: 1000000,
    normEps: 1e-5,
    context: 32768,
    source: 'mistralai/Mistral-7B-v0.3 config.json',
  },
} as const satisfies Record<string, ModelShape>;

export type ShapeName = keyof typeof MODEL_SHAPES;
export const SHAPE_NAMES = Object.keys(MODEL_SHAPES) as ShapeName[];

export type ShapeWeights = 'q4_k_m' | 'q8_0';
export const SHAPE_WEIGHTS: readonly ShapeWeights[] = ['q4_k_m', 'q8_0'];

export interface ShapeFileOptions {
  /** Layers of the slice, 1..the model's (default all). */
  layers?: number;
  weights: ShapeWeights;
  /** Positions the file must allow (context_length is at least this). */
  positions?: number;
}

/**
 * llama.cpp's use_more_bits(i, n): the layers Q4_K_M gives Q6_K for attn_v and ffn_down (the first
 * and last n/8, and every third layer between). Integer division, as in C.
 */
export function useMoreBits(i: number, n: number): boolean {
  const eighth = Math.trunc(n / 8);
  return i < eighth || i >= Math.trunc((7 * n) / 8) || (i - eighth) % 3 === 2;
}

/** The type of tensor `name` in a file of `weights` that is a slice of `sliceLayers` of a `fullLayers` model. */
export function shapeTensorType(
  name: string,
  shape: readonly number[],
  weights: ShapeWeights,
  sliceLayers: number,
  fullLayers: number,
): GGUFFileType {
  if (shape.length === 1) return 'f32';
  if (weights === 'q8_0') return 'q8_0';
  if (name === OUTPUT) return 'q6_k';
  const layer = /^blk\.(\d+)\.(attn_v|ffn_down)\.weight$/.exec(name);
  if (layer && useMoreBits(Math.floor((Number(layer[1]) * fullLayers) / sliceLayers), fullLayers)) return 'q6_k';
  return 'q4_k';
}

/**
 * Context length written into the files: long enough for any bench run up to 256k positions, so
 * one file per shape, slice and weights serves every S (the shape's trained context is in the table).
 */
export const SHAPE_FILE_CONTEXT = 1 << 18;

/** The config of an N-layer slice of `shape` (checked as a loader checks a file's), for `positions` positions. */
export function shapeConfig(shape: ModelShape, layers: number, positions = 0): ModelConfig {
  const seqLen = Math.max(SHAPE_FILE_CONTEXT, 2 ** Math.ceil(Math.log2(Math.max(1, positions))));
  return makeConfig(
    {
      dim: shape.dim,
      hiddenDim: shape.hiddenDim,
      nLayers: layers,
      nHeads: shape.nHeads,
      nKvHeads: shape.nKvHeads,
      vocabSize: shape.vocabSize,
      seqLen,
    },
    {
      arch: shape.arch,
      normEps: Math.fround(shape.normEps),
      ropeTheta: shape.ropeTheta,
      sharedClassifier: false,
      attnBias: shape.arch === 'qwen2',
    },
    (field, what) => {
      throw new RangeError(`shapeConfig: ${field} ${what}`);
    },
  );
}

/** What a shape file holds: its config, metadata (tokenizer included), tensors (name, type, shape) and its size in bytes. */
export function shapeFile(
  shape: ModelShape,
  options: ShapeFileOptions,
): { config: ModelConfig; metadata: [string, GGUFValue][]; tensors: GGUFTensorSpec[]; bytes: number } {
  const layers = options.layers ?? shape.nLayers;
  if (!Number.isInteger(layers) || layers < 1 || layers > shape.nLayers)
    throw new RangeError(`shape file: layers ${layers}, expected an integer in [1, ${shape.nLayers}]`);
  const config = shapeConfig(shape, layers, options.positions);
  const tensors = expectedTensors(config).map(({ name, shape: s }) => ({
    name,
    shape: s,
    dtype: shapeTensorType(name, s, options.weights, layers, shape.nLayers),
  }));
  const metadata = llamaMetadata(config, smallTokenizer(shape.vocabSize - 259), {
    name: `random-${options.weights}`,
    fileType: options.weights === 'q8_0' ? 'q8_0' : 'q4_k',
  });
  return { config, metadata, tensors, bytes: layoutGGUF(metadata, tensors).size };
}

/** Rows in each matrix's pool of distinct quantized rows. */
const POOL_ROWS = 64;
/** Rows written per piece: bounds the memory a piece takes (a 14336-wide Q6_K row is 11.8 KB). */
const PIECE_ROWS = 2048;

/**
 * Writes the random-weight GGUF of `shape` to `path`; returns the file size. `engine` quantizes
 * the row pools (64 rows per matrix: the reference backend is quick enough, and has every type). `onTensor(done, total, name)` hears each tensor as it is written.
 */
export function writeShapeGGUF(
  engine: Engine,
  shape: ModelShape,
  options: ShapeFileOptions,
  path: string,
  onTensor?: (done: number, total: number, name: string) => void,
): number {
  const { metadata, tensors: infos } = shapeFile(shape, options);
  return writeGGUFStream(path, metadata, infos, (i, put) => {
    const { name, dtype, shape: s } = infos[i];
    const random = mulberry32(1 + i);
    if (s.length === 1) {
      // Norms near 1, biases near 0.
      const base = name.endsWith('.bias') ? 0 : 1;
      put(
        tensorBytes(
          Tensor.f32(
            [...s],
            Array.from({ length: s[0] }, () => base + 0.2 * (2 * random() - 1)),
          ),
        ),
      );
    } else {
      const [rows, cols] = s;
      // Uniform in [-a, a] has variance a^2 / 3: a = sqrt(3 / cols) keeps each product's scale; the embedding gets variance 1.
      const a = name === TOKEN_EMBD ? Math.sqrt(3) : Math.sqrt(3 / cols);
      const pool = Tensor.zeros('f32', [POOL_ROWS, cols]);
      for (let j = 0; j < pool.size; j++) pool.data[j] = a * (2 * random() - 1);
      const rowBytes = tensorByteSize(dtype, cols);
      const quantized = tensorBytes(convertTensor(engine, pool, dtype as GGUFFileType));
      const piece = new Uint8Array(Math.min(rows, PIECE_ROWS) * rowBytes);
      for (let r0 = 0; r0 < rows; r0 += PIECE_ROWS) {
        const n = Math.min(PIECE_ROWS, rows - r0);
        for (let r = 0; r < n; r++) {
          const from = Math.floor(random() * POOL_ROWS) * rowBytes;
          piece.set(quantized.subarray(from, from + rowBytes), r * rowBytes);
        }
        put(piece.subarray(0, n * rowBytes));
      }
    }
    onTensor?.(i + 1, infos.length, name);
  });
}
