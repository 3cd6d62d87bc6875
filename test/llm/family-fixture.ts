/**
 * Random-weight GGUF models of each family, written with our GGUF writer so
 * that both sparq and llama.cpp (node-llama-cpp) can load them: llama.cpp's
 * keys and tensor names, a small SentencePiece vocabulary llama.cpp accepts
 * (<unk>, <s>, </s>, the 256 byte tokens, a few words), and weights drawn from
 * a seeded generator, so every run writes the same file.
 *
 * Weight scales keep the network away from both saturation and flat logits:
 * projections uniform with variance 1/fan_in (outputs of unit size), norm
 * weights near 1, an embedding small enough that the current token does not
 * dominate its own logit through the residual stream (a tied model would
 * otherwise repeat it forever), and a classifier (or, when tied, a final norm)
 * that spreads logits over a few units, so the greedy choice is rarely a near tie.
 */
import { Tensor, type Engine } from '@sparq/core';
import {
  convertTensor,
  expectedTensors,
  gguf,
  llamaMetadata,
  makeConfig,
  writeGGUFFile,
  type Architecture,
  type GGUFFileType,
  type GGUFValue,
  type ModelConfig,
  type RopeScaling,
} from '@sparq/llm';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seeded } from '../conformance/numeric.ts';

export interface FamilySpec {
  name: string;
  arch: Architecture;
  dim: number;
  nHeads: number;
  nKvHeads: number;
  /** Explicit head size (attention.key_length) when not dim / nHeads. */
  headDim?: number;
  hiddenDim: number;
  nLayers: number;
  seqLen: number;
  ropeTheta: number;
  ropeScaling?: RopeScaling;
  /** Writes a rope_freqs tensor with Llama 3's per-pair divisors for these parameters. */
  llama3?: { factor: number; lowFreqFactor: number; highFreqFactor: number; originalContext: number };
  attnBias?: boolean;
  tied: boolean;
  type: GGUFFileType;
  seed: number;
  /** tokenizer.chat_template to write. */
  chatTemplate?: string;
}

/** A small llama (GQA 4 over 2 heads, f32, tied classifier) the other families vary. */
export const LLAMA_FAMILY: FamilySpec = {
  name: 'llama',
  arch: 'llama',
  dim: 256,
  nHeads: 4,
  nKvHeads: 2,
  hiddenDim: 512,
  nLayers: 2,
  seqLen: 256,
  ropeTheta: 10000,
  tied: true,
  type: 'f32',
  seed: 1,
};

/** <unk>, <s>, </s>, ChatML's two control tokens, 256 byte tokens, 59 words: 320 tokens. */
export const VOCAB = 320;
export const IM_START = 3;
export const IM_END = 4;

function vocabulary(): [string, GGUFValue][] {
  const tokens = ['<unk>', '<s>', '</s>', '<|im_start|>', '<|im_end|>'];
  const types = [2, 3, 3, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6);
  }
  for (let i = 0; tokens.length < VOCAB; i++) {
    tokens.push(`\u2581w${i}`);
    types.push(1);
  }
  return [
    ['tokenizer.ggml.model', gguf.string('llama')],
    ['tokenizer.ggml.tokens', gguf.array({ itemType: 'string', values: tokens })],
    ['tokenizer.ggml.scores', gguf.array({ itemType: 'f32', values: Float32Array.from(tokens, (_, i) => -i) })],
    ['tokenizer.ggml.token_type', gguf.array({ itemType: 'i32', values: Int32Array.from(types) })],
    ['tokenizer.ggml.bos_token_id', gguf.u32(1)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(2)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(0)],
  ];
}

/**
 * Llama 3's frequency divisors, as Meta's reference and llama.cpp's converter compute them: pairs whose
 * wavelength is shorter than originalContext / highFreqFactor keep their frequency, longer than
 * originalContext / lowFreqFactor are divided by `factor`, and in between the divisor blends smoothly.
 */
export function llama3FreqFactors(headDim: number, theta: number, p: NonNullable<FamilySpec['llama3']>): Float32Array {
  const out = new Float32Array(headDim / 2);
  for (let i = 0; i < headDim / 2; i++) {
    const wavelength = (2 * Math.PI) / Math.pow(theta, (-2 * i) / headDim);
    if (wavelength < p.originalContext / p.highFreqFactor) out[i] = 1;
    else if (wavelength > p.originalContext / p.lowFreqFactor) out[i] = p.factor;
    else {
      const smooth = (p.originalContext / wavelength - p.lowFreqFactor) / (p.highFreqFactor - p.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / p.factor + smooth);
    }
  }
  return out;
}

export function specConfig(s: FamilySpec): ModelConfig {
  return makeConfig(
    {
      dim: s.dim,
      hiddenDim: s.hiddenDim,
      nLayers: s.nLayers,
      nHeads: s.nHeads,
      nKvHeads: s.nKvHeads,
      vocabSize: VOCAB,
      seqLen: s.seqLen,
    },
    {
      arch: s.arch,
      normEps: Math.fround(1e-5),
      ropeTheta: s.ropeTheta,
      ropeScaling: s.ropeScaling,
      sharedClassifier: s.tied,
      attnBias: s.attnBias ?? false,
      ropeFreqs: s.llama3 !== undefined,
      headDim: s.headDim,
    },
    (field, what) => {
      throw new Error(`fixture ${s.name}: ${field} ${what}`);
    },
  );
}

/** Writes the model to a fresh temp dir (the caller removes it); returns its path. */
export function writeFamilyModel(
  engine: Engine,
  s: FamilySpec,
  dir = mkdtempSync(join(tmpdir(), 'sparq-family-')),
): string {
  const c = specConfig(s);
  const random = seeded(s.seed);
  // Uniform with variance v: half-width sqrt(3 v).
  const draw = (shape: number[], variance: number, mean = 0) => {
    const t = Tensor.zeros('f32', shape);
    const a = Math.sqrt(3 * variance);
    for (let i = 0; i < t.size; i++) t.data[i] = mean + a * (2 * random() - 1);
    return t;
  };
  const tensors = expectedTensors(c).map(({ name, shape }) => {
    let t: Tensor<'f32'>;
    if (name === 'rope_freqs.weight') t = Tensor.f32(shape, llama3FreqFactors(c.headDim, c.ropeTheta, s.llama3!));
    // The final norm sets the logits' spread: x 4 when the classifier is the (small) embedding.
    else if (name === 'output_norm.weight') t = draw(shape, 0.01, c.sharedClassifier ? 4 : 1);
    else if (name.endsWith('norm.weight')) t = draw(shape, 0.01, 1);
    else if (name.endsWith('.bias')) t = draw(shape, 0.25);
    // Embedding rows of unit norm; classifier rows of norm 4, so logits of a unit-RMS state spread over ~4 units.
    else if (name === 'token_embd.weight') t = draw(shape, 1 / c.dim);
    else if (name === 'output.weight') t = draw(shape, 16 / c.dim);
    else t = draw(shape, 1 / shape[1]);
    return { name, tensor: shape.length === 1 ? t : convertTensor(engine, t, s.type) };
  });
  const path = join(dir, 'model.gguf');
  const template: [string, GGUFValue][] =
    s.chatTemplate === undefined ? [] : [['tokenizer.chat_template', gguf.string(s.chatTemplate)]];
  writeGGUFFile(
    path,
    [...llamaMetadata(c, null, { name: s.name, fileType: s.type }), ...vocabulary(), ...template],
    tensors,
  );
  return path;
}
