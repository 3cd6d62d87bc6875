/**
 * A model from bytes in memory (the browser has no file system): the format
 * known from its first bytes as model-file.ts does for files, GGUF with its
 * own tokenizer, llama2.c with a separate tokenizer file.
 */
import { FormatError, type Engine } from '@sparq/core';
import {
  GGUF_MAGIC,
  LanguageModel,
  buildModel,
  llamaFromGGUF,
  readGGUF,
  readLlama2c,
  readLlama2cTokenizer,
  tokenizerFromGGUF,
} from '@sparq/llm/browser';
import type { NamedBytes } from './protocol.ts';

function isGGUF(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === GGUF_MAGIC;
}

export function openModelBytes(engine: Engine, file: NamedBytes, tokenizerFile: NamedBytes | null): LanguageModel {
  if (isGGUF(file.bytes)) {
    const gguf = readGGUF(file.bytes, file.name);
    const loaded = llamaFromGGUF(gguf, file.name, engine);
    const tokenizer = tokenizerFile
      ? readLlama2cTokenizer(tokenizerFile.bytes, tokenizerFile.name, loaded.config.vocabSize)
      : tokenizerFromGGUF(gguf, file.name);
    if (!tokenizer)
      throw new FormatError(
        `${file.name}: GGUF without a tokenizer (no tokenizer.ggml.tokens): open a llama2.c tokenizer with it`,
      );
    return new LanguageModel(engine, buildModel(engine, loaded), tokenizer, {
      tokenizerSource: tokenizerFile?.name ?? `${file.name} (GGUF metadata)`,
    });
  }
  const loaded = readLlama2c(file.bytes, file.name);
  if (!tokenizerFile)
    throw new FormatError(
      `${file.name}: a llama2.c checkpoint needs its tokenizer file (tokenizer.bin or tok${loaded.config.vocabSize}.bin): open both`,
    );
  const tokenizer = readLlama2cTokenizer(tokenizerFile.bytes, tokenizerFile.name, loaded.config.vocabSize);
  return new LanguageModel(engine, buildModel(engine, loaded), tokenizer, { tokenizerSource: tokenizerFile.name });
}
