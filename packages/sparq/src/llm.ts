/**
 * `sparq/llm`: everything of @sparq/llm, the Llama runtime under the curated
 * top level: GGUF internals (value types, key tables, tensor naming, partial
 * readers), tokenizer internals (BPE and SentencePiece encoders,
 * pre-tokenizers, UTF-8 helpers), the eval harness (`runSweep`, protocols), the
 * option checks (`checkChoice`, `checkKeys`, ...) and the test fixtures
 * (`randomLlama`, `writeRandomGGUF`, `smallTokenizer`). Both backends are
 * registered on import.
 */
import './backends.ts';

export * from '@sparq/llm';
export * from '@sparq/llm/options';
