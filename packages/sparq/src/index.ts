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
import { checkNativeSettings } from '@sparq/native';
import { SparqRangeError, selectBackend } from '@sparq/core';
import { checkModelOptions, openModel, type LanguageModel, type ModelOptions } from '@sparq/llm';

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
 * tokenizer onto the selected backend. Everything but the path has a default
 * (options.ts in @sparq/llm lists them): the fastest backend that loads,
 * weights as the file stores them, an f16 KV cache, dense decode attention.
 * The options and the native backend's environment variables are checked
 * first, as the CLI checks them: an unknown key or a value outside its
 * choices is a RangeError naming it.
 */
export async function loadModel(path: string, options: LoadModelOptions = {}): Promise<LanguageModel> {
  checkModelOptions('loadModel', options, ['backend']);
  // The environment as the CLI checks it (SPARQ_THREADS, SPARQ_NATIVE_KERNEL, ...): a bad value is an
  // error here too, not a native backend quietly unavailable and a model on the reference.
  checkNativeSettings();
  const { backend, ...rest } = options;
  if (backend !== undefined && typeof backend !== 'string') throw new SparqRangeError(`loadModel: backend ${String(backend)}, expected a backend name such as 'native' or 'reference'`);
  const engine = await selectBackend(backend === undefined ? {} : { backend });
  // A backend chosen by the caller (or SPARQ_BACKEND) is kept; an automatic choice falls back per file.
  const fallback = backend === undefined && !process.env.SPARQ_BACKEND ? await selectBackend({ backend: 'reference' }) : undefined;
  return openModel(engine, path, { fallback, ...rest });
}
