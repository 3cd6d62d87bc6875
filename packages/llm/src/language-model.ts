/**
 * A model ready for text: weights on an engine, its tokenizer, and the
 * defaults its sessions start from (KV type, attention method and budget).
 * `openModel` (model-file.ts) reads the files; `createSession` makes a TextSession.
 * No file access here, so it runs in a browser too.
 */
import { SparqRangeError, type AttentionMethod, type Engine, type ProductPath, type KVDType, type KTDType, type KVLayout } from '@sparq/core';
import { DEFAULT_PRODUCT_PATH } from './linear.ts';
import { ATTENTION_METHODS, defaultAttention, type AttentionConfig } from './attention-method.ts';
import type { ModelConfig } from './config.ts';
import { stopRuleOf } from './generation-limits.ts';
import { TextSession } from './text-session.ts';
import { DEFAULT_KV_DTYPE } from './forward.ts';
import { detokenize } from './text-stream.ts';
import type { Tokenizer } from './tokenizer.ts';
import type { Model, WeightType } from './weights.ts';

/** Decode attention; what is left out is sized to the session's context (see defaultAttention). */
export type AttentionSettings = Partial<AttentionConfig>;

export interface ModelOptions {
  /** llama2.c tokenizer file; default: the GGUF's own, else tok<vocab>.bin or tokenizer.bin beside the model. */
  tokenizer?: string;
  /** Convert the matrices on load: 'f32', 'q4_0' or 'int4'; default: as the file stores them. */
  weights?: WeightType;
  /** KV cache element type of sessions, default DEFAULT_KV_DTYPE (f16); 'q8_0' / 'q4_0' need a head dim that is a multiple of 32. */
  kv?: KVDType;
  /** Type of SparQ's transposed K copy ('k-twice' layout), default DEFAULT_SESSION_KT[kv] (docs/kv-cache.md). */
  kt?: KTDType;
  /** KV cache layout of sessions, default defaultKVLayout(attention method). */
  kvLayout?: KVLayout;
  /** Decode attention of sessions, default { method: 'dense' }. */
  attention?: AttentionSettings;
  /** How products with quantized weights are computed, default DEFAULT_PRODUCT_PATH ('int8'; linear.ts). */
  productPath?: ProductPath;
  /**
   * The engine for a file whose tensor types `engine` does not compute on
   * (typically the reference); the model's notes say so. Without it such a file
   * fails with UnsupportedOpError naming the type.
   */
  fallback?: Engine;
  /** Verify every weight and quantization scale is finite at load (checkTensors), as llama.cpp's --check-tensors. */
  checkTensors?: boolean;
}

export interface CreateSessionOptions {
  /** Positions of the conversation; default: the model's seq_len, at most 2048. */
  contextSize?: number;
  /** Overrides the model's attention settings. */
  attention?: AttentionSettings;
  /** Overrides the model's KV type. */
  kv?: KVDType;
  /** Overrides the model's transposed-K type. */
  kt?: KTDType;
  /** Most prompt tokens per forward step (default DEFAULT_PREFILL_CHUNK). */
  prefillChunk?: number;
}

/** The context a session gets unless it asks: the model's, capped so the KV cache stays modest. */
export const DEFAULT_CONTEXT_CAP = 2048;

export class LanguageModel {
  readonly engine: Engine;
  readonly model: Model;
  readonly tokenizer: Tokenizer;
  /** Where the tokenizer came from. */
  readonly tokenizerSource: string;
  readonly kv: KVDType;
  /** undefined: DEFAULT_SESSION_KT of the session's KV type. */
  readonly kt: KTDType | undefined;
  readonly kvLayout: KVLayout | undefined;
  readonly attention: AttentionSettings;
  readonly productPath: ProductPath;

  constructor(engine: Engine, model: Model, tokenizer: Tokenizer, options: Omit<ModelOptions, 'tokenizer' | 'weights'> & { tokenizerSource?: string } = {}) {
    this.engine = engine;
    this.model = model;
    this.tokenizer = tokenizer;
    this.tokenizerSource = options.tokenizerSource ?? 'given';
    this.kv = options.kv ?? DEFAULT_KV_DTYPE;
    this.kt = options.kt;
    this.kvLayout = options.kvLayout;
    this.attention = options.attention ?? {};
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

  /** The complete attention settings a session of `contextSize` positions uses, checked against the model. */
  resolveAttention(contextSize: number, settings: AttentionSettings = {}): AttentionConfig {
    const wanted = { ...this.attention, ...settings };
    const method: AttentionMethod = wanted.method ?? 'dense';
    if (!ATTENTION_METHODS.includes(method)) throw new SparqRangeError(`attention.method '${method}', expected one of ${ATTENTION_METHODS.join(', ')}`);
    const d = defaultAttention(method, this.config.headDim, contextSize);
    const k = wanted.k ?? d.k;
    const a: AttentionConfig = { method, r: wanted.r ?? d.r, k, l: wanted.l ?? Math.floor(k / 4), reallocate: wanted.reallocate ?? d.reallocate };
    const int = (v: number, min: number, max: number) => Number.isInteger(v) && v >= min && v <= max;
    if (!int(a.r, 1, this.config.headDim)) throw new SparqRangeError(`attention.r ${a.r}, expected an integer in [1, ${this.config.headDim}] (the head dim)`);
    if (!int(a.k, 1, Number.MAX_SAFE_INTEGER)) throw new SparqRangeError(`attention.k ${a.k}, expected an integer >= 1`);
    if (!int(a.l, 0, Number.MAX_SAFE_INTEGER)) throw new SparqRangeError(`attention.l ${a.l}, expected an integer >= 0`);
    return a;
  }

  /** A new conversation with its own KV cache. */
  createSession(options: CreateSessionOptions = {}): TextSession {
    const seqLen = this.config.seqLen;
    const contextSize = options.contextSize ?? Math.min(seqLen, DEFAULT_CONTEXT_CAP);
    if (!Number.isInteger(contextSize) || contextSize < 1 || contextSize > seqLen) {
      throw new SparqRangeError(`createSession: contextSize ${contextSize}, expected an integer in [1, ${seqLen}] (the model's seq_len)`);
    }
    return new TextSession(this.engine, this.model, this.tokenizer, {
      contextSize,
      attention: this.resolveAttention(contextSize, options.attention),
      kvDType: options.kv ?? this.kv,
      kTDType: options.kt ?? (options.kv === undefined ? this.kt : undefined),
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
