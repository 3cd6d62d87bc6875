/**
 * @sparq/llm/browser: everything of the runtime that runs without Node:
 * parsers take bytes (Uint8Array or a ByteSource), no file system, no Buffer.
 * The browser playground bundles this entry; index.ts adds the file edge
 * (model-file.ts), the GGUF writer, chat templates and conversion.
 */
export * from './config.ts';
export * from './family.ts';
export * from './rope-scaling.ts';
export * from './tensor-names.ts';
export * from './byte-reader.ts';
export * from './llama2c.ts';
export * from './vocab.ts';
export * from './pre-tokenize.ts';
export * from './bpe.ts';
export * from './spm.ts';
export * from './special-tokens.ts';
export * from './tokenizer.ts';
export * from './tokenizer-file.ts';
export * from './gguf-format.ts';
export * from './gguf-read.ts';
export * from './gguf-keys.ts';
export * from './gguf-llama.ts';
export * from './gguf-tokenizer.ts';
// The defaults and choices of options.ts; its checks are '@sparq/llm/options' (the CLI's), not public API.
export {
  DEFAULT_CONTEXT_CAP,
  DEFAULT_KV_DTYPE,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_PRODUCT_PATH,
  DEFAULT_TEMPERATURE,
  DEFAULT_TOP_P,
  KV_DTYPES,
  KV_LAYOUTS,
  PRODUCT_PATHS,
} from './options.ts';
export * from './linear.ts';
export * from './weights.ts';
export * from './run-state.ts';
export * from './attention-method.ts';
export * from './forward.ts';
export * from './sampler.ts';
export * from './text-stream.ts';
export * from './stop-filter.ts';
export * from './text-session.ts';
export * from './language-model.ts';
export * from './memory-plan.ts';
export * from './generate.ts';
export * from './generation-limits.ts';
export * from './utf8.ts';
