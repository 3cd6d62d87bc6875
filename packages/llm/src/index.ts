/**
 * @sparq/llm: a Llama-architecture runtime on the sparq Engine. Loaders for
 * llama2.c checkpoints and GGUF v3 (read and write), the SentencePiece BPE
 * tokenizer of run.c, the forward pass with batched prefill and SparQ /
 * baseline decode attention, run.c's sampler, and the generation loop.
 * Start at language-model.ts and text-session.ts (the async API), then forward.ts.
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
export * from './gguf-write.ts';
export * from './gguf-keys.ts';
export * from './gguf-llama.ts';
export * from './gguf-tokenizer.ts';
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
export * from './generate.ts';
export * from './generation-limits.ts';
export * from './chat.ts';
export * from './model-file.ts';
export * from './gguf-convert.ts';
export * from './random-model.ts';
