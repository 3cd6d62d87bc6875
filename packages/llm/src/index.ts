/**
 * @sparq/llm: a Llama-architecture runtime on the sparq Engine. Loaders for
 * llama2.c checkpoints and GGUF v3 (read and write), the SentencePiece BPE
 * tokenizer of run.c, the forward pass with batched prefill and SparQ /
 * baseline decode attention, run.c's sampler, and the generation loop.
 * Start at language-model.ts and text-session.ts (the async API), then forward.ts.
 */
export * from './browser.ts';
export * from './gguf-write.ts';
export * from './model-file.ts';
export * from './chat.ts';
export * from './gguf-convert.ts';
export * from './tensor-check.ts';
export * from './eval/index.ts';
export * from './random-model.ts';
export * from './session-state.ts';
export * from './retrieval-model.ts';
export * from './model-shapes.ts';
export * from './pad-heads.ts';
