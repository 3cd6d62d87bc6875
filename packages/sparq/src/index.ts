/**
 * sparq: the engine in one package. Importing it registers both backends
 * (native, when its addon loads, else the reference) and gives:
 *
 *   - the text API: `loadModel(path, options)` → a LanguageModel;
 *     `model.createSession()`; `session.generate(prompt, options)`, an
 *     AsyncIterable<string> of text pieces;
 *   - the low-level engine for kernel users: Tensor, KVCache, Engine and every
 *     op (`selectBackend()`), the backends themselves, AttentionPool;
 *   - the Llama runtime underneath (loaders, tokenizer, forward pass, sampler).
 */
import '@sparq/reference';
import '@sparq/native';
import { selectBackend } from '@sparq/core';
import { openModel, type LanguageModel, type ModelOptions } from '@sparq/llm';

export * from '@sparq/core';
export * from '@sparq/llm';
export { createReferenceBackend } from '@sparq/reference';
export { createNativeBackend } from '@sparq/native';
export { AttentionPool, type AttentionPoolOptions, type PooledMethod } from '@sparq/pool';

export interface LoadModelOptions extends ModelOptions {
  /** 'native' or 'reference'; default: SPARQ_BACKEND, else the fastest that loads (see `backendReport()`). */
  backend?: string;
}

/**
 * Reads a llama2.c checkpoint (.bin) or a GGUF v3 llama model and its
 * tokenizer onto the selected backend. Everything but the path has a default:
 * the fastest backend that loads, weights as the file stores them, an f32 KV
 * cache, dense decode attention.
 */
export async function loadModel(path: string, options: LoadModelOptions = {}): Promise<LanguageModel> {
  const { backend, ...rest } = options;
  const engine = await selectBackend(backend === undefined ? {} : { backend });
  // A backend chosen by the caller (or SPARQ_BACKEND) is kept; an automatic choice falls back per file.
  const fallback = backend === undefined && !process.env.SPARQ_BACKEND ? await selectBackend({ backend: 'reference' }) : undefined;
  return openModel(engine, path, { fallback, ...rest });
}
