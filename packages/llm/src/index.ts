/**
 * @sparq/llm: a Llama-architecture runtime on the sparq Engine. Loaders for
 * llama2.c checkpoints and GGUF v3 (read and write), the SentencePiece BPE
 * tokenizer of run.c, the forward pass with batched prefill and SparQ /
 * baseline decode attention, run.c's sampler, and the generation loop.
 * Start at generate.ts, then forward.ts.
 */
export * from './config.ts';
export * from './tensor-names.ts';
export * from './byte-reader.ts';
export * from './llama2c.ts';
export * from './tokenizer.ts';
export * from './tokenizer-file.ts';
export * from './gguf-format.ts';
export * from './gguf-read.ts';
export * from './gguf-write.ts';
export * from './gguf-llama.ts';
export * from './linear.ts';
export * from './weights.ts';
export * from './run-state.ts';
export * from './attention-method.ts';
export * from './forward.ts';
export * from './sampler.ts';
export * from './generate.ts';
export * from './model-file.ts';
export * from './gguf-convert.ts';
