/**
 * The model of the end-to-end part: a GGUF file the user gives, or a
 * random-weight llama-shaped one written to a temporary directory (the speed of
 * a forward step depends on shapes and types, not on the weights' values).
 */
import { kvLabel, type Engine, type KVTypeChoice } from '@sparq/core';
import {
  GGUF_FILE_TYPES,
  MODEL_SHAPES,
  randomLlama,
  scratchBytes,
  sessionKvBytes,
  shapeFile,
  withGGUF,
  writeRandomGGUF,
  writeShapeGGUF,
  type GGUFFileType,
  type RandomModelOptions,
  type ShapeName,
  type ShapeWeights,
} from '@sparq/llm';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { llamaCppKvBytes } from './end-to-end.ts';
import { PREFILL_CHUNK } from './sparq-e2e.ts';

/** The generated model's shape: the measurements (16 heads of 128, Q8_0); 2 layers keep it quick. */
export const FULL_SHAPE = { dim: 2048, hiddenDim: 5632, nLayers: 2, nHeads: 16, nKvHeads: 16 } as const;
/** --quick: the smallest shape with a realistic head dim. */
export const QUICK_SHAPE = { dim: 256, hiddenDim: 512, nLayers: 1, nHeads: 2, nKvHeads: 2 } as const;
export const GENERATED_TYPE: GGUFFileType = 'q8_0';

export interface BenchModel {
  path: string;
  /** 'generated' (--quick's or the default small llama), 'shape' (--shape, kept in --shape-dir) or 'file'. */
  source: 'generated' | 'shape' | 'file';
  description: string;
  /** Bytes of every tensor a decode step reads in full (all but the token embedding, read one row per token). */
  weightBytes: number;
  /** Removes what was generated (a no-op for a given file). */
  dispose(): void;
}

/** Bytes read per decode step for the weights of the GGUF at `path`. */
function decodeWeightBytes(path: string): number {
  return withGGUF(path, (f) =>
    f.tensors
      .filter((t) => t.name !== 'token_embd.weight')
      .reduce((sum, t) => sum + (t.ne.reduce((a, b) => a * b, 1) / t.type.elements) * t.type.bytes, 0),
  );
}

export function givenModel(path: string): BenchModel {
  return { path, source: 'file', description: path, weightBytes: decodeWeightBytes(path), dispose: () => {} };
}

/** A random llama of `shape` with `seqLen` positions, matrices in `type`, written by `engine`'s quantizers. */
export function generatedModel(
  engine: Engine,
  shape: RandomModelOptions,
  seqLen: number,
  type: GGUFFileType = GENERATED_TYPE,
): BenchModel {
  if (!GGUF_FILE_TYPES.includes(type))
    throw new RangeError(`generated model type ${type}, expected one of ${GGUF_FILE_TYPES.join(', ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'sparq-bench-'));
  try {
    const path = writeRandomGGUF(engine, randomLlama({ ...shape, seqLen }), type, join(dir, `random-${type}.gguf`));
    const s = shape;
    return {
      path,
      source: 'generated',
      weightBytes: decodeWeightBytes(path),
      description: `random llama: dim ${s.dim}, ${s.nHeads} heads of ${s.dim! / s.nHeads!}, ${s.nLayers} layer${s.nLayers === 1 ? '' : 's'}, FFN ${s.hiddenDim}, ${type.toUpperCase()}`,
      dispose: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** Where --shape files are kept between runs unless --shape-dir says otherwise. */
export const DEFAULT_SHAPE_DIR = join(tmpdir(), 'sparq-shapes');

/**
 * The random-weight GGUF of a real model's shape (model-shapes.ts), `layers` of its layers, in
 * `dir`: reused when a file of that name and the expected size is there, else written (the
 * reference backend quantizes the row pools). Kept after the run: the files are large.
 */
/** The whole model's memory at one context length and KV type, for sparq (its SparQ layout) and llama.cpp (K and V rows). */
export interface WholeModelMemory {
  S: number;
  /** The KV row types as --kv spells them ('q8_0', 'q8_0/q4_0'). */
  kv: string;
  weightBytes: number;
  sparqKvBytes: number;
  scratchBytes: number;
  sparqTotal: number;
  llamaCppKvBytes: number;
  llamaCppTotal: number;
}

/**
 * What a --shape slice stands for: every layer of the model at context S (S positions) with KV type
 * `kv`: weights (the whole file), the KV cache (sparq: kvCacheBytes of the 'k-twice' layout SparQ
 * runs, with core's default kT for the type; llama.cpp: K and V rows) and sparq's scratch
 * (memory-plan.ts) on `threads` threads.
 */
export function wholeModelMemory(
  name: ShapeName,
  weights: ShapeWeights,
  S: number,
  kv: KVTypeChoice,
  threads: number,
): WholeModelMemory {
  const { config: c, bytes } = shapeFile(MODEL_SHAPES[name], { weights });
  const sparqKvBytes = sessionKvBytes(c, S, kv, 'k-twice');
  const scratch = scratchBytes(c, S, PREFILL_CHUNK, threads);
  const llamaKv = llamaCppKvBytes(c, kv, S);
  return {
    S,
    kv: kvLabel(kv),
    weightBytes: bytes,
    sparqKvBytes,
    scratchBytes: scratch,
    sparqTotal: bytes + sparqKvBytes + scratch,
    llamaCppKvBytes: llamaKv,
    llamaCppTotal: bytes + llamaKv,
  };
}

export function shapeModel(
  name: ShapeName,
  layers: number,
  weights: ShapeWeights,
  dir: string,
  quantizer: Engine,
  log: (line: string) => void,
): BenchModel & { reused: boolean; fileBytes: number } {
  const shape = MODEL_SHAPES[name];
  const file = shapeFile(shape, { layers, weights });
  const path = join(dir, `${name}-${layers}of${shape.nLayers}-${weights}.gguf`);
  const reused = existsSync(path) && statSync(path).size === file.bytes;
  if (!reused) {
    mkdirSync(dir, { recursive: true });
    log(`writing ${path} (${(file.bytes / 2 ** 30).toFixed(2)} GiB) ...`);
    writeShapeGGUF(quantizer, shape, { layers, weights }, path);
  }
  const c = file.config;
  return {
    path,
    source: 'shape',
    weightBytes: decodeWeightBytes(path),
    reused,
    fileBytes: file.bytes,
    description: `${name} shape (${shape.source}), ${layers} of ${shape.nLayers} layers: dim ${c.dim}, ${c.nHeads} heads over ${c.nKvHeads} KV heads of ${c.headDim}, FFN ${c.hiddenDim}, vocab ${c.vocabSize}, RoPE base ${c.ropeTheta}, ${weights.toUpperCase()}; ${file.bytes} bytes`,
    dispose: () => {},
  };
}
