/**
 * sparq: the engine in one package. Importing it registers both backends
 * (native, when its addon loads, else the reference) and gives the names a
 * user imports (docs/api.md lists them by group):
 *
 *   - text generation: `loadModel(path, options)` → a LanguageModel;
 *     `model.createSession()`; `session.generate(prompt, options)`, an
 *     AsyncIterable<string> of text pieces; Chat on top of it;
 *   - the kernels: Tensor, KVCache, Engine and every op (`selectBackend()`),
 *     the backends themselves, AttentionPool;
 *   - model files (llama2.c, GGUF), the tokenizer, the low-level session and
 *     sampler, and the error classes.
 *
 * The rest of the runtime (validation helpers, GGUF and tokenizer internals,
 * the eval harness, test fixtures) is `sparq/llm` and `sparq/core`.
 */
import './backends.ts';
import { checkNativeSettings } from '@sparq/native';
import { SparqRangeError, selectBackend } from '@sparq/core';
import { checkModelOptions, openModel, type LanguageModel, type ModelOptions } from '@sparq/llm';

// Text generation: the options' names, choices and defaults are @sparq/llm's options.ts.
export {
  LanguageModel,
  TextSession,
  Generation,
  ATTENTION_METHODS,
  ATTENTION_PARAMETERS,
  defaultAttention,
  WEIGHT_TYPES,
  PRODUCT_PATHS,
  DEFAULT_KV_DTYPE,
  DEFAULT_PRODUCT_PATH,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_CONTEXT_CAP,
  DEFAULT_TOP_P,
  DEFAULT_TEMPERATURE,
  saveSessionState,
  loadSessionState,
  type ModelOptions,
  type CreateSessionOptions,
  type TextSessionOptions,
  type GenerationOptions,
  type GenerationResult,
  type FinishReason,
  type PrefillProgress,
  type SessionStats,
  type AttentionReport,
  type AttentionSettings,
  type AttentionConfig,
  type AttentionParameter,
  attentionCost,
  type WeightType,
} from '@sparq/llm';
export {
  KV_DTYPES,
  KV_LAYOUTS,
  KT_DTYPES,
  type AttentionMethod,
  type KVDType,
  type KVTypes,
  type KVTypeChoice,
  type KVLayout,
  type KTDType,
  type ProductPath,
} from '@sparq/core';

// Chat.
export { createChat, Chat, ChatTemplate, type ChatOptions, type ChatReply, type ChatMessage } from '@sparq/llm';

// Tokenizers.
export { Tokenizer, readTokenizerOnly, type EncodeOptions } from '@sparq/llm';

// Backends.
export {
  selectBackend,
  loadBackends,
  backendReport,
  formatBackendReport,
  registerBackend,
  type Backend,
  type BackendInfo,
  type BackendStatus,
  type BackendFactory,
} from '@sparq/core';
export { createReferenceBackend } from '@sparq/reference';
export { createNativeBackend } from '@sparq/native';

// Kernels: tensors, the KV cache, the ops' options and statistics.
export {
  Engine,
  Tensor,
  BLOCK_DTYPES,
  KVCache,
  AttentionStats,
  Int4Matrix,
  f32ToF16,
  f16ToF32,
  type TensorOptions,
  type DType,
  type BlockDType,
  type KVCacheOptions,
  H2OState,
  type AttentionOptions,
  type SparqParams,
  type SparqOptions,
  type BudgetParams,
  type Int4MatrixOptions,
  type Int4GroupSize,
  type OpName,
} from '@sparq/core';
export { AttentionPool, type AttentionPoolOptions, type PooledMethod } from '@sparq/pool';

// Model files: llama2.c checkpoints and GGUF v3, read and written.
export {
  openModel,
  readModelFile,
  readModelHeader,
  describeConfig,
  ARCHITECTURES,
  readGGUF,
  writeGGUFFile,
  ggufTensors,
  llamaMetadata,
  GGUF_FILE_TYPES,
  buildModel,
  type LoadedModel,
  type ModelConfig,
  type Architecture,
  type GGUFFile,
  type GGUFFileType,
} from '@sparq/llm';

// Low-level generation: the forward session, run.c's sampler and generation loop.
export {
  Session,
  Sampler,
  generate,
  type SessionOptions,
  type SamplerOptions,
  type GenerateOptions,
  type GenerateResult,
} from '@sparq/llm';

// Errors: every error sparq throws on purpose is a SparqError.
export {
  SparqError,
  ShapeError,
  DTypeError,
  SparqRangeError,
  NonFiniteError,
  CapacityError,
  UnsupportedOpError,
  BackendUnavailableError,
  FormatError,
} from '@sparq/core';

/** The options of {@link loadModel}: a model's options, and the backend to load it on. */
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
 * choices is a SparqRangeError naming it.
 */
export async function loadModel(path: string, options: LoadModelOptions = {}): Promise<LanguageModel> {
  checkModelOptions('loadModel', options, ['backend']);
  // The environment as the CLI checks it (SPARQ_THREADS, SPARQ_NATIVE_KERNEL, ...): a bad value is an
  // error here too, not a native backend quietly unavailable and a model on the reference.
  checkNativeSettings();
  const { backend, ...rest } = options;
  if (backend !== undefined && typeof backend !== 'string')
    throw new SparqRangeError(
      `loadModel: backend ${String(backend)}, expected a backend name such as 'native' or 'reference'`,
    );
  const engine = await selectBackend(backend === undefined ? {} : { backend });
  // A backend chosen by the caller (or SPARQ_BACKEND) is kept; an automatic choice falls back per file.
  const fallback =
    backend === undefined && !process.env.SPARQ_BACKEND ? await selectBackend({ backend: 'reference' }) : undefined;
  return openModel(engine, path, { fallback, ...rest });
}
