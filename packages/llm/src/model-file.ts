/**
 * Opening model and tokenizer files by path: one readFileSync per file, the
 * format told by its magic ("GGUF" or else llama2.c's legacy header), and
 * the tokenizer found the way the CLI promises: the explicit path, else the
 * one inside a GGUF file, else tok<vocab>.bin or tokenizer.bin next to the model.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FormatError, type Engine } from '@sparq/core';
import { alignedBytes } from './byte-reader.ts';
import { GGUF_MAGIC } from './gguf-format.ts';
import { llamaFromGGUF, tokenizerFromGGUF } from './gguf-llama.ts';
import { readGGUF, type GGUFFile } from './gguf-read.ts';
import { readLlama2c, type LoadedModel } from './llama2c.ts';
import { readLlama2cTokenizer } from './tokenizer-file.ts';
import type { Tokenizer } from './tokenizer.ts';

export interface ModelFile {
  path: string;
  loaded: LoadedModel;
  /** The parsed GGUF container, when the file is GGUF. */
  gguf: GGUFFile | null;
}

/** The file's bytes, 8-byte aligned so tensors can be typed-array views. */
export function readBytes(path: string): Uint8Array {
  return alignedBytes(readFileSync(path));
}

/** Reads a llama2.c checkpoint or a GGUF llama model (the engine dequantizes non-f32 norms). */
export function readModelFile(path: string, engine?: Engine): ModelFile {
  const bytes = readBytes(path);
  const isGGUF = bytes.length >= 4 && new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true) === GGUF_MAGIC;
  if (!isGGUF) return { path, loaded: readLlama2c(bytes, path), gguf: null };
  const gguf = readGGUF(bytes, path);
  return { path, loaded: llamaFromGGUF(gguf, path, engine), gguf };
}

/** Reads a llama2.c tokenizer file holding exactly `vocabSize` tokens (or any count when omitted). */
export function readTokenizerFile(path: string, vocabSize?: number): Tokenizer {
  return readLlama2cTokenizer(readBytes(path), path, vocabSize);
}

/** The tokenizer for `model`: `explicit`, else the GGUF's own, else tok<vocab>.bin / tokenizer.bin beside it. */
export function findTokenizer(model: ModelFile, explicit?: string): { tokenizer: Tokenizer; source: string } {
  const vocab = model.loaded.config.vocabSize;
  if (explicit) return { tokenizer: readTokenizerFile(explicit, vocab), source: explicit };
  if (model.gguf) {
    const t = tokenizerFromGGUF(model.gguf, model.path);
    if (t) {
      if (t.vocabSize !== vocab) throw new FormatError(`${model.path}: tokenizer.ggml.tokens has ${t.vocabSize} tokens, the model's vocab is ${vocab}`);
      return { tokenizer: t, source: `${model.path} (GGUF metadata)` };
    }
  }
  const candidates = [`tok${vocab}.bin`, 'tokenizer.bin'].map((f) => join(dirname(model.path), f));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new FormatError(`${model.path}: no tokenizer given and none found (looked for ${candidates.join(', ')}); pass --tokenizer`);
  return { tokenizer: readTokenizerFile(found, vocab), source: found };
}
