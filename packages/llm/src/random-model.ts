/**
 * Random-weight llama models, written as GGUF in any type: seeded, so every
 * run makes the same file. Tests use small ones; `sparq bench` a model of a
 * real model's shape when it is given no file (the speed of a forward step
 * depends on the shapes and types, not on the values).
 *
 * The tokenizer is the smallest llama.cpp accepts for its SentencePiece
 * ('llama') vocab: <unk>, <s>, </s>, the 256 byte tokens, then a few letters.
 * Widths that are multiples of 256 (the K-quant block) let every type apply
 * to every matrix.
 */
import { Tensor, type Engine } from '@sparq/core';
import { makeConfig, type ModelConfig } from './config.ts';
import { convertTensor, ggufTensors, type GGUFFileType } from './gguf-convert.ts';
import { llamaMetadata } from './gguf-llama.ts';
import { writeGGUFFile } from './model-file.ts';
import { expectedTensors } from './tensor-names.ts';
import { Tokenizer } from './tokenizer.ts';
import { sentencePieceVocab } from './vocab.ts';
import type { LoadedModel } from './llama2c.ts';

/** mulberry32: a tiny seeded generator, uniform in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface RandomModelOptions {
  dim?: number;
  hiddenDim?: number;
  nLayers?: number;
  nHeads?: number;
  nKvHeads?: number;
  seqLen?: number;
  /** Letters after the 259 special and byte tokens. */
  extraTokens?: number;
  seed?: number;
  /**
   * Weight of a planted path in the classifier: row j also holds the
   * embedding of token perm^-1(j) (scaled to unit norm), so the token after t
   * tends to be perm(t) with a clear margin. 0 leaves the classifier random.
   */
  margin?: number;
}

/** Letter pieces 'a'..'z', 'aa'..'zz', ... up to this length; past them, 't<i>' (short pieces for a real model's vocab size). */
const MAX_LETTER_REPEAT = 8;

/** <unk>, <s>, </s>, <0x00>..<0xFF>, then `extra` pieces: single letters repeated, then 't<i>'. */
export function smallTokenizer(extra: number): Tokenizer {
  const pieces = ['<unk>', '<s>', '</s>'];
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  for (let i = 0; i < extra; i++)
    pieces.push(
      i < 26 * MAX_LETTER_REPEAT ? String.fromCharCode(0x61 + (i % 26)).repeat(1 + Math.floor(i / 26)) : `t${i}`,
    );
  return new Tokenizer(
    sentencePieceVocab(
      pieces,
      Float32Array.from(pieces, (_, i) => (i < 259 ? 0 : -i)),
    ),
  );
}

/**
 * A random llama model: matrices uniform with variance 1/cols (so each
 * product keeps the activations' scale), norms near 1, an untied classifier.
 */
export function randomLlama(options: RandomModelOptions = {}): { loaded: LoadedModel; tokenizer: Tokenizer } {
  const {
    dim = 256,
    hiddenDim = 512,
    nLayers = 2,
    nHeads = 4,
    nKvHeads = 2,
    seqLen = 256,
    extraTokens = 29,
    seed = 1,
    margin = 0,
  } = options;
  const tokenizer = smallTokenizer(extraTokens);
  const config: ModelConfig = makeConfig(
    { dim, hiddenDim, nLayers, nHeads, nKvHeads, vocabSize: tokenizer.vocabSize, seqLen },
    { normEps: Math.fround(1e-5), ropeTheta: 10000, sharedClassifier: false },
    (field, what) => {
      throw new Error(`randomLlama: ${field} ${what}`);
    },
  );
  const random = mulberry32(seed);
  const tensors = new Map<string, Tensor>();
  for (const { name, shape } of expectedTensors(config)) {
    const t = Tensor.zeros('f32', shape);
    // Uniform in [-a, a] has variance a^2 / 3: a = sqrt(3 / cols) gives 1 / cols. The embedding gets variance 1.
    const a = shape.length === 1 ? 0.2 : name === 'token_embd.weight' ? Math.sqrt(3) : Math.sqrt(3 / shape[1]);
    for (let i = 0; i < t.size; i++) t.data[i] = (shape.length === 1 ? 1 : 0) + a * (2 * random() - 1);
    tensors.set(name, t);
  }
  if (margin > 0) {
    const embd = tensors.get('token_embd.weight')!.data as Float32Array;
    const out = tensors.get('output.weight')!.data as Float32Array;
    const vocab = config.vocabSize;
    // A fixed permutation: t -> (7t + 3) mod vocab (7 is coprime to the vocab sizes used here).
    for (let t = 0; t < vocab; t++) {
      const j = (7 * t + 3) % vocab;
      for (let c = 0; c < dim; c++) out[j * dim + c] += (margin * embd[t * dim + c]) / Math.sqrt(dim);
    }
  }
  return { loaded: { config, tensors, format: 'random' }, tokenizer };
}

/** Q4_K_M's recipe in short (llama.cpp's mix): Q6_K where precision matters most (attn_v, ffn_down, the classifier), Q4_K elsewhere, norms F32. */
export const q4kmLike = (name: string): GGUFFileType =>
  name.endsWith('_norm.weight') ? 'f32' : /attn_v|ffn_down|^output\./.test(name) ? 'q6_k' : 'q4_k';

/** Writes `model` as GGUF with matrices of `type` (norms F32), or each tensor of the type `type(name)` gives; returns the path. */
export function writeRandomGGUF(
  engine: Engine,
  model: { loaded: LoadedModel; tokenizer: Tokenizer },
  type: GGUFFileType | ((name: string) => GGUFFileType),
  path: string,
): string {
  const tensors =
    typeof type === 'string'
      ? ggufTensors(engine, model.loaded, type).tensors
      : expectedTensors(model.loaded.config).map(({ name }) => ({
          name,
          tensor: convertTensor(engine, model.loaded.tensors.get(name)!, type(name)),
        }));
  const fileType = typeof type === 'string' ? type : 'f32';
  writeGGUFFile(
    path,
    llamaMetadata(model.loaded.config, model.tokenizer, { name: `random-${fileType}`, fileType }),
    tensors,
  );
  return path;
}
