/**
 * A model ready for text: weights on an engine, its tokenizer, and the
 * defaults its sessions start from (KV type, attention method and budget).
 * `openModel` (model-file.ts) reads the files; `createSession` makes a TextSession.
 * No file access here, so it runs in a browser too.
 */
import {
  SparqRangeError,
  type Engine,
  type ProductPath,
  type KVTypeChoice,
  type KTDType,
  type KVLayout,
} from '@sparq/core';
import { resolveAttention, type AttentionConfig } from './attention-method.ts';
import type { ModelConfig } from './config.ts';
import { stopRuleOf } from './generation-limits.ts';
import { TextSession } from './text-session.ts';
import {
  DEFAULT_CONTEXT_CAP,
  DEFAULT_KV_DTYPE,
  DEFAULT_PRODUCT_PATH,
  checkCacheChoices,
  checkChoice,
  checkKeys,
  checkNumber,
  contextCheck,
} from './options.ts';
import { detokenize } from './text-stream.ts';
import type { Tokenizer } from './tokenizer.ts';
import { WEIGHT_TYPES, type Model, type WeightType } from './weights.ts';

/** Decode attention; what is left out is sized to the session's context (see defaultAttention). */
export type AttentionSettings = Partial<AttentionConfig>;

/** What a model is loaded with; names and defaults are options.ts's, and checkModelOptions checks them as the CLI checks its flags. */
export interface ModelOptions {
  /** llama2.c tokenizer file; default: the GGUF's own, else tok<vocab>.bin or tokenizer.bin beside the model. */
  tokenizer?: string;
  /** Convert the matrices on load: one of WEIGHT_TYPES ('f32', 'q4_0', 'int4'); default: as the file stores them. */
  weights?: WeightType;
  /** KV cache element type of sessions, default DEFAULT_KV_DTYPE (f16); 'q8_0' / 'q4_0' need a head dim that is a multiple of 32. */
  kv?: KVTypeChoice;
  /** Type of SparQ's transposed K copy ('k-twice' layout), default DEFAULT_SESSION_KT of kv's K type (docs/kv-cache.md). */
  kt?: KTDType;
  /** KV cache layout of sessions, default defaultKVLayout(attention method). */
  kvLayout?: KVLayout;
  /** Decode attention of sessions, default { method: 'dense' }. */
  attention?: AttentionSettings;
  /** How products with quantized weights are computed, default DEFAULT_PRODUCT_PATH ('int8'). */
  productPath?: ProductPath;
  /**
   * The engine for a file whose tensor types `engine` does not compute on
   * (typically the reference); the model's notes say so. Without it such a file
   * fails with UnsupportedOpError naming the type.
   */
  fallback?: Engine;
  /** Verify every weight and quantization scale is finite at load (checkTensors), as llama.cpp's --check-tensors. */
  checkTensors?: boolean;
  /**
   * The context the model will run (positions, at most its seq_len): with it, openModel refuses before
   * loading anything a model and context whose weights, KV cache and scratch do not fit the memory
   * the process has (checkModelMemory), with the bytes it needs and has.
   */
  contextSize?: number;
}

/** The options of `LanguageModel.createSession`; unset ones take the model's. */
export interface CreateSessionOptions {
  /** Positions of the conversation; default: the model's seq_len, at most DEFAULT_CONTEXT_CAP (2048). */
  contextSize?: number;
  /** Overrides the model's attention settings. */
  attention?: AttentionSettings;
  /** Overrides the model's KV type. */
  kv?: KVTypeChoice;
  /** Overrides the model's transposed-K type. */
  kt?: KTDType;
  /** Most prompt tokens per forward step, default DEFAULT_PREFILL_CHUNK (512). */
  prefillChunk?: number;
}

const MODEL_OPTIONS = [
  'tokenizer',
  'weights',
  'kv',
  'kt',
  'kvLayout',
  'attention',
  'productPath',
  'fallback',
  'checkTensors',
  'contextSize',
] as const;

/**
 * Checks a model's options before any file is read, as the CLI checks the
 * flags of the same meaning (options.ts): an unknown key, a value outside its
 * choices (`weights 'q8_0'` is not quietly INT4), attention settings the
 * method does not read. `where` starts each message ("loadModel"); `extra`
 * names keys an entry point adds (loadModel's `backend`).
 */
export function checkModelOptions(where: string, options: ModelOptions, extra: readonly string[] = []): void {
  checkKeys(where, options, [...MODEL_OPTIONS, ...extra]);
  const o = options;
  if (o.tokenizer !== undefined && typeof o.tokenizer !== 'string')
    throw new SparqRangeError(`${where}: tokenizer ${String(o.tokenizer)}, expected a file path`);
  if (o.weights !== undefined) checkChoice(`${where}: weights`, o.weights, WEIGHT_TYPES);
  checkCacheChoices(where, o);
  if (o.checkTensors !== undefined && typeof o.checkTensors !== 'boolean')
    throw new SparqRangeError(`${where}: checkTensors ${String(o.checkTensors)}, expected true or false`);
  // Every check but r's upper bound, which needs the model's head dim (LanguageModel checks it).
  if (o.attention !== undefined)
    resolveAttention(o.attention, Number.MAX_SAFE_INTEGER, 1, (f) => `${where}: attention.${f}`);
}

/**
 * A model ready for text: weights on an engine, its tokenizer, and the defaults its sessions start
 * from. `loadModel` returns one.
 */
export class LanguageModel {
  readonly engine: Engine;
  readonly model: Model;
  readonly tokenizer: Tokenizer;
  /** Where the tokenizer came from. */
  readonly tokenizerSource: string;
  readonly kv: KVTypeChoice;
  /** undefined: DEFAULT_SESSION_KT of the session's KV type. */
  readonly kt: KTDType | undefined;
  readonly kvLayout: KVLayout | undefined;
  readonly attention: AttentionSettings;
  readonly productPath: ProductPath;

  constructor(
    engine: Engine,
    model: Model,
    tokenizer: Tokenizer,
    options: Omit<ModelOptions, 'tokenizer' | 'weights'> & { tokenizerSource?: string } = {},
  ) {
    this.engine = engine;
    this.model = model;
    this.tokenizer = tokenizer;
    const { tokenizerSource, ...rest } = options;
    checkModelOptions('LanguageModel', rest);
    this.tokenizerSource = tokenizerSource ?? 'given';
    this.kv = options.kv ?? DEFAULT_KV_DTYPE;
    this.kt = options.kt;
    this.kvLayout = options.kvLayout;
    this.attention = options.attention ?? {};
    resolveAttention(this.attention, model.config.headDim, model.config.seqLen);
    this.productPath = options.productPath ?? DEFAULT_PRODUCT_PATH;
  }

  get config(): ModelConfig {
    return this.model.config;
  }

  /** The backend the model runs on ('native' or 'reference'). */
  get backend(): string {
    return this.engine.name;
  }

  /** Storage of the matrices, e.g. 'f32' or 'q4_0 (w2 f32)'. */
  get weightType(): string {
    return this.model.weightType;
  }

  /**
   * The complete attention settings a session of `contextSize` positions uses:
   * `settings` over the model's (whose parameters carry over only to the same
   * method), checked against the model (resolveAttention, attention-method.ts).
   */
  resolveAttention(contextSize: number, settings: AttentionSettings = {}): AttentionConfig {
    const inherit = settings.method === undefined || settings.method === (this.attention.method ?? 'dense');
    return resolveAttention(
      inherit ? { ...this.attention, ...definedOnly(settings) } : settings,
      this.config.headDim,
      contextSize,
    );
  }

  /** A new conversation with its own KV cache. */
  createSession(options: CreateSessionOptions = {}): TextSession {
    checkKeys('createSession', options, ['contextSize', 'attention', 'kv', 'kt', 'prefillChunk']);
    const seqLen = this.config.seqLen;
    const contextSize = checkNumber(
      'createSession: contextSize',
      options.contextSize ?? Math.min(seqLen, DEFAULT_CONTEXT_CAP),
      contextCheck(seqLen),
    );
    checkCacheChoices('createSession', options);
    return new TextSession(this.engine, this.model, this.tokenizer, {
      contextSize,
      attention: this.resolveAttention(contextSize, options.attention),
      kv: options.kv ?? this.kv,
      kt: options.kt ?? (options.kv === undefined ? this.kt : undefined),
      kvLayout: this.kvLayout,
      productPath: this.productPath,
      prefillChunk: options.prefillChunk,
      stop: stopRuleOf(this.model.format),
    });
  }

  /** Token ids of `text`, with BOS (and EOS) as the vocab adds them unless `bos` is false (the tokenizer's dummy-prefix space included); special-token text stays text. */
  tokenize(text: string, options: { bos?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { addSpecial: options.bos ?? true });
  }

  /** The text of `tokens` as generation shows it (a leading BOS is dropped). */
  detokenize(tokens: readonly number[]): string {
    return detokenize(this.tokenizer, tokens);
  }
}

/** `o` without the fields set to undefined (so `{ r: undefined }` does not hide the model's r). */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
