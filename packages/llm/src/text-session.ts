/**
 * A text session: one KV cache that a conversation fills, and generation from
 * it as an async stream of text pieces.
 *
 *   const session = new TextSession(engine, model, tokenizer, { contextSize, attention });
 *   for await (const piece of session.generate('Once upon a time', { maxTokens: 50 })) write(piece);
 *
 * Generation is a sequence of steps, each at most one forward pass: a prefill
 * chunk of at most `prefillChunk` prompt tokens, or one decode token. Between
 * steps the async iterator yields to the event loop (a macrotask turn), so
 * timers, I/O and an AbortSignal run while a model generates.
 *
 * State between calls, and what an abort leaves behind:
 *   - `tokens` are the tokens whose keys and values are in the cache. A
 *     prefill chunk is appended whole or not at all (a step is never cut), so
 *     an abort between chunks keeps the chunks already forwarded.
 *   - `pending` is the last sampled token: its text has been shown, it is not
 *     forwarded yet. The next generate() forwards it before its own prompt, so
 *     generating N tokens, stopping, and generating M more gives the same tokens
 *     as generating N + M at once (greedy, or with the same sampler state).
 *   - `reset()` empties the session.
 *   - A step that throws (a non-finite value, a failing backend) rolls the
 *     whole call back: the cache, `tokens`, `pending` and the logits are as
 *     they were before generate() ran. Only an abort keeps partial work.
 * The first generate() on an empty session starts with BOS.
 */
import {
  SparqError,
  SparqRangeError,
  type Engine,
  type ProductPath,
  type KVTypeChoice,
  type KTDType,
  type KVLayout,
} from '@sparq/core';
import type { AttentionConfig } from './attention-method.ts';
import { Session, prefillProgress, type PrefillProgress } from './forward.ts';
import {
  CHECKS,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_TEMPERATURE,
  DEFAULT_TOP_P,
  checkCacheChoices,
  checkKeys,
  checkNumber,
  checkSeed,
  renamed,
} from './options.ts';
import { stops, type StopRule } from './generation-limits.ts';
import { Sampler } from './sampler.ts';
import { StopFilter } from './stop-filter.ts';
import { TextStream } from './text-stream.ts';
import type { Tokenizer } from './tokenizer.ts';
import type { Model } from './weights.ts';

/** The names and defaults are options.ts's. */
export interface TextSessionOptions {
  /** KV positions: prompt and generated tokens of the whole conversation, at most the model's seq_len. */
  contextSize: number;
  /** Decode attention (prefill is always dense). */
  attention: AttentionConfig;
  /** KV cache element type, default DEFAULT_KV_DTYPE ('f16'). */
  kv?: KVTypeChoice;
  /** @deprecated The older name of kv. */
  kvDType?: KVTypeChoice;
  /** SparQ's transposed K type, default DEFAULT_SESSION_KT of kv's K type (forward.ts). */
  kt?: KTDType;
  /** KV cache layout, default defaultKVLayout(attention.method). */
  kvLayout?: KVLayout;
  /** How products with quantized weights are computed, default DEFAULT_PRODUCT_PATH ('int8'). */
  productPath?: ProductPath;
  /** Most prompt tokens forwarded in one step, default DEFAULT_PREFILL_CHUNK (512). Generation yields to the event loop between steps. */
  prefillChunk?: number;
  /** What ends the text (generation-limits.ts), default 'bos' (llama2.c's BOS, and end-of-generation tokens). */
  stop?: StopRule;
}

/** The options of `TextSession.generate`; names and defaults are options.ts's. */
export interface GenerationOptions {
  /** Most tokens to sample; default: until the end of text or a full context. */
  maxTokens?: number;
  /** 0 is greedy; default 1. */
  temperature?: number;
  /** Nucleus sampling threshold; <= 0 or >= 1 samples the full distribution; default DEFAULT_TOP_P (0.9). */
  topP?: number;
  /** Sampler seed (llama2.c's xorshift64*); 0 or absent picks one at random. */
  seed?: number | bigint;
  /** Text that ends generation; it is not part of the output. */
  stop?: string | readonly string[];
  /** Aborting stops generation before its next forward step; the iteration then ends normally with finishReason 'abort'. */
  signal?: AbortSignal;
  /** Called after each prefill chunk: tokens done, of the total, and the rate so far (a progress line, an ETA). */
  onProgress?: (progress: PrefillProgress) => void;
  /** Called with each sampled token's id, before its text is shown (the token that ends the text is not one). */
  onToken?: (token: number) => void;
}

/** Why generation ended: end-of-text token, maxTokens, the context is full, a stop string, or an abort (signal or `break`). */
export type FinishReason = 'eos' | 'length' | 'context' | 'stop' | 'abort';

/** Decode attention over some decode steps: what the kernels counted and spec.md §3's data ratio. */
export interface AttentionReport {
  method: AttentionConfig['method'];
  /** Elements the decode attention kernels read, all layers. */
  elementsRead: number;
  elementsPerToken: number;
  /** spec.md §3's elements for the method over those for dense, over the same steps (1 when there were none). */
  compressionRatio: number;
  /** elementsRead over spec.md §3's elements for dense. */
  countedRatio: number;
  /** Bytes the decode attention kernels read (the counted elements in the caches' types), all layers. */
  bytesRead: number;
  /** bytesRead over the bytes dense would read from the same caches: the data ratio of a quantized cache. */
  countedBytesRatio: number;
}

/** How a generation ended and what it did: finish reason, token counts, rates, attention read. */
export interface GenerationResult {
  /** All the text shown. */
  text: string;
  finishReason: FinishReason;
  /** Tokens this call forwarded before sampling: its prompt, and a token the previous call left pending. */
  promptTokens: number;
  /** Tokens sampled, including any a stop string hid. */
  generatedTokens: number;
  /** Decode forward passes (the last sampled token is not forwarded). */
  decodeSteps: number;
  prefillMs: number;
  /** Decode forward passes and sampling. */
  decodeMs: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  attention: AttentionReport;
}

/** A session's position and decode statistics (`session.stats`). */
export interface SessionStats {
  /** Positions filled. */
  position: number;
  contextSize: number;
  /** Tokens sampled over the session's life. */
  generatedTokens: number;
  /** Prompt tokens forwarded per second of prefill, over the session's life. */
  prefillTokensPerSecond: number;
  /** Decode steps per second of decoding and sampling, over the session's life. */
  decodeTokensPerSecond: number;
  attention: AttentionReport & { decodeSteps: number };
}

type Step = { kind: 'prefill'; done: number; total: number } | { kind: 'token'; token: number };

/** Counters of one generate() call. */
interface Tally {
  promptTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
}

/** Counter values of the forward session, to report a call's share. */
interface Counters {
  steps: number;
  read: number;
  method: number;
  dense: number;
  readBytes: number;
  denseBytes: number;
}

/** One KV cache a conversation fills, and generation from it as an async stream of text pieces (this file's header). */
export class TextSession {
  /** The forward pass and its caches (low level: decode statistics, spec.md §3 costs). */
  readonly forward: Session;
  readonly tokenizer: Tokenizer;
  readonly contextSize: number;
  private readonly stopRule: StopRule;
  readonly attention: AttentionConfig;
  /** Tokens whose keys and values are in the cache, in order. */
  private readonly cached: number[] = [];
  /** The last sampled token, shown but not forwarded yet; null when there is none. */
  private pending: number | null = null;
  /** (vocab) logits after the last forward step; valid when `cached` is not empty. */
  private readonly logits: Float32Array;
  private running: Generation | null = null;
  /** Counters over the session's life (promptTokens: tokens prefilled). */
  private readonly totals: Tally = { promptTokens: 0, generatedTokens: 0, prefillMs: 0, decodeMs: 0 };

  constructor(engine: Engine, model: Model, tokenizer: Tokenizer, options: TextSessionOptions) {
    checkKeys('TextSession', options, [
      'contextSize',
      'attention',
      'kv',
      'kvDType',
      'kt',
      'kvLayout',
      'productPath',
      'prefillChunk',
      'stop',
    ]);
    const chunk = checkNumber(
      'TextSession: prefillChunk',
      options.prefillChunk ?? DEFAULT_PREFILL_CHUNK,
      CHECKS.prefillChunk,
    );
    const kv = renamed('TextSession', 'kv', options.kv, 'kvDType', options.kvDType);
    checkCacheChoices('TextSession', { ...options, kv });
    this.forward = new Session(engine, model, {
      contextSize: options.contextSize,
      prefillChunk: chunk,
      attention: options.attention,
      kv,
      kt: options.kt,
      kvLayout: options.kvLayout,
      productPath: options.productPath,
    });
    this.tokenizer = tokenizer;
    this.contextSize = options.contextSize;
    this.stopRule = options.stop ?? 'bos';
    this.attention = options.attention;
    this.logits = new Float32Array(model.config.vocabSize);
  }

  /** Positions filled. */
  get position(): number {
    return this.forward.pos;
  }

  /** The conversation's tokens: those in the cache, then the pending one. */
  get history(): number[] {
    return this.pending === null ? [...this.cached] : [...this.cached, this.pending];
  }

  /** Throughput and decode attention over the session's life (reset() keeps them). */
  get stats(): SessionStats {
    const t = this.totals;
    return {
      position: this.position,
      contextSize: this.contextSize,
      generatedTokens: t.generatedTokens,
      prefillTokensPerSecond: perSecond(t.promptTokens, t.prefillMs),
      decodeTokensPerSecond: perSecond(this.forward.decodeSteps, t.decodeMs),
      attention: attentionReport(this.attention.method, zero(), this.counters()),
    };
  }

  /**
   * Text generated after `prompt` (text, or token ids used as given), as an
   * async iterable of pieces. Nothing runs until it is iterated. One
   * generation runs at a time per session.
   */
  generate(prompt: string | readonly number[] = '', options: GenerationOptions = {}): Generation {
    return new Generation(this, prompt, checkOptions(options));
  }

  /** Empties the cache: the next generate() starts a new text with BOS. */
  reset(): void {
    if (this.running) throw new SparqError('TextSession.reset: a generation is running; abort it first');
    this.forward.reset();
    this.cached.length = 0;
    this.pending = null;
  }

  /** @internal What the cache holds beside the KV rows (session-state.ts saves it): tokens, the pending token, the last logits. */
  snapshot(): { tokens: number[]; pending: number | null; logits: Float32Array } {
    if (this.running) throw new SparqError('TextSession: a generation is running; finish or abort it first');
    return { tokens: [...this.cached], pending: this.pending, logits: this.logits };
  }

  /** @internal Takes the tokens and logits of a loaded state whose KV rows are already in the caches (session-state.ts). */
  adopt(tokens: readonly number[], pending: number | null, logits: Float32Array): void {
    if (this.running) throw new SparqError('TextSession: a generation is running; finish or abort it first');
    this.cached.length = 0;
    this.cached.push(...tokens);
    this.pending = pending;
    this.logits.set(logits);
  }

  /**
   * Forgets the pending token (sampled and shown, not forwarded), so the next
   * generate() does not forward it: for a caller that continues from the
   * text instead, as Chat does with a reply cut short. Returns it, or null.
   */
  dropPending(): number | null {
    if (this.running) throw new SparqError('TextSession.dropPending: a generation is running; abort it first');
    const token = this.pending;
    this.pending = null;
    return token;
  }

  /** @internal Marks `g` as the running generation. */
  claim(g: Generation): void {
    if (this.running && this.running !== g)
      throw new SparqError(
        'TextSession.generate: another generation is running on this session; finish or abort it first',
      );
    this.running = g;
  }

  /** @internal Ends `g`'s hold on the session. */
  release(g: Generation): void {
    if (this.running === g) this.running = null;
  }

  /** @internal The session's counters, to report one call's share. */
  counters(): Counters {
    const f = this.forward;
    return {
      steps: f.decodeSteps,
      read: f.stats.total,
      method: f.methodCost,
      dense: f.denseCost,
      readBytes: f.stats.totalBytes,
      denseBytes: f.denseBytes,
    };
  }

  /**
   * @internal The steps of one call: prefill chunks, then sampled tokens, each
   * step at most one forward pass. Returns why it ended. If a step throws,
   * the session is put back as it was before the call.
   */
  *steps(
    prompt: string | readonly number[],
    maxTokens: number,
    sampler: Sampler,
    tally: Tally,
  ): Generator<Step, FinishReason, void> {
    const before = {
      forward: this.forward.checkpoint(),
      cached: this.cached.length,
      pending: this.pending,
      logits: this.logits.slice(),
    };
    try {
      return yield* this.unguardedSteps(prompt, maxTokens, sampler, tally);
    } catch (error) {
      this.forward.restore(before.forward);
      this.cached.length = before.cached;
      this.pending = before.pending;
      this.logits.set(before.logits);
      throw error;
    }
  }

  /** steps() without the rollback. */
  private *unguardedSteps(
    prompt: string | readonly number[],
    maxTokens: number,
    sampler: Sampler,
    tally: Tally,
  ): Generator<Step, FinishReason, void> {
    const fresh = this.cached.length === 0 && this.pending === null;
    const promptTokens =
      typeof prompt === 'string'
        ? this.tokenizer.encode(prompt, { addSpecial: fresh, parseSpecial: true })
        : [...prompt];
    const input = this.pending === null ? promptTokens : [this.pending, ...promptTokens];
    if (input.length === 0 && this.cached.length === 0)
      throw new SparqRangeError(
        'TextSession.generate: nothing to generate from; the session is empty and the prompt has no tokens',
      );
    if (this.position + input.length > this.contextSize) {
      throw new SparqRangeError(
        `TextSession.generate: ${input.length} prompt tokens at position ${this.position} need ${this.position + input.length} positions, the context holds ${this.contextSize} (createSession({ contextSize }) or session.reset())`,
      );
    }
    tally.promptTokens = input.length;
    if (input.length === 1 && this.pending !== null) {
      // Only the token the last call sampled: forwarded as that call would have, with decode attention.
      this.advance(input, true, tally);
    } else {
      for (let done = 0; done < input.length;) {
        const chunk = input.slice(done, done + this.forward.state.maxRows);
        this.advance(chunk, false, tally);
        done += chunk.length;
        yield { kind: 'prefill', done, total: input.length };
      }
    }
    while (tally.generatedTokens < maxTokens) {
      const t0 = performance.now();
      const next = sampler.sample(this.logits.slice()); // a copy: the logits stay for a later call to sample again
      this.count(tally, 'decodeMs', performance.now() - t0);
      if (stops(this.tokenizer, next, this.stopRule)) return 'eos';
      this.pending = next;
      this.count(tally, 'generatedTokens', 1);
      yield { kind: 'token', token: next };
      if (tally.generatedTokens >= maxTokens) break;
      if (this.position >= this.contextSize) return 'context';
      this.advance([next], true, tally);
    }
    return 'length';
  }

  /** One forward step over `tokens`; they join the cached tokens whole. */
  private advance(tokens: readonly number[], decode: boolean, tally: Tally): void {
    const t0 = performance.now();
    this.logits.set(decode ? this.forward.decode(tokens[0]) : this.forward.prefill(tokens));
    this.cached.push(...tokens);
    this.pending = null;
    this.count(tally, decode ? 'decodeMs' : 'prefillMs', performance.now() - t0);
    if (!decode) this.totals.promptTokens += tokens.length;
  }

  /** Adds to a call's counter and to the session's. */
  private count(tally: Tally, key: keyof Tally, amount: number): void {
    tally[key] += amount;
    this.totals[key] += amount;
  }
}

interface CheckedOptions {
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: bigint | number;
  stop: readonly string[];
  signal?: AbortSignal;
  onProgress?: (progress: PrefillProgress) => void;
  onToken?: (token: number) => void;
}

function checkOptions(o: GenerationOptions): CheckedOptions {
  checkKeys('generate', o, ['maxTokens', 'temperature', 'topP', 'seed', 'stop', 'signal', 'onProgress', 'onToken']);
  const maxTokens = checkNumber('generate: maxTokens', o.maxTokens ?? Infinity, CHECKS.maxTokens);
  const temperature = checkNumber('generate: temperature', o.temperature ?? DEFAULT_TEMPERATURE, CHECKS.temperature);
  const topP = checkNumber('generate: topP', o.topP ?? DEFAULT_TOP_P, CHECKS.topP);
  const given = o.seed === undefined ? 0 : checkSeed('generate: seed', o.seed);
  const seed = BigInt(given) === 0n ? randomSeed() : given;
  const stop = o.stop === undefined ? [] : typeof o.stop === 'string' ? [o.stop] : [...o.stop];
  return { maxTokens, temperature, topP, seed, stop, signal: o.signal, onProgress: o.onProgress, onToken: o.onToken };
}

/** A non-zero 53-bit seed (xorshift never leaves state 0). */
function randomSeed(): number {
  return 1 + Math.floor(Math.random() * (2 ** 53 - 1));
}

/** Node's setImmediate; a browser has none (the playground's worker). */
const immediate = (globalThis as { setImmediate?: (run: () => void) => unknown }).setImmediate;

/**
 * Lets timers, I/O and abort signals run: resolves on the next macrotask turn.
 * Without setImmediate, a MessageChannel message is the next turn (setTimeout
 * would do too, but browsers clamp nested timeouts to 4 ms, a cap of 250 tokens/s).
 */
function nextTurn(): Promise<void> {
  if (immediate) return new Promise((resolve) => immediate(resolve));
  return new Promise((resolve) => {
    // Typed by shape: Node's and the DOM's MessageChannel types differ, and only the browser's is used here.
    const channel = new MessageChannel() as unknown as {
      port1: { onmessage: (() => void) | null; close(): void };
      port2: { postMessage(message: null): void };
    };
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

function perSecond(n: number, ms: number): number {
  return ms > 0 ? n / (ms / 1000) : 0;
}

function zero(): Counters {
  return { steps: 0, read: 0, method: 0, dense: 0, readBytes: 0, denseBytes: 0 };
}

function attentionReport(
  method: AttentionConfig['method'],
  from: Counters,
  to: Counters,
): AttentionReport & { decodeSteps: number } {
  const steps = to.steps - from.steps;
  const read = to.read - from.read;
  const dense = to.dense - from.dense;
  return {
    method,
    decodeSteps: steps,
    elementsRead: read,
    elementsPerToken: steps ? read / steps : 0,
    compressionRatio: dense ? (to.method - from.method) / dense : 1,
    countedRatio: dense ? read / dense : 0,
    bytesRead: to.readBytes - from.readBytes,
    countedBytesRatio:
      to.denseBytes > from.denseBytes ? (to.readBytes - from.readBytes) / (to.denseBytes - from.denseBytes) : 0,
  };
}

/**
 * One generate() call: an async iterable of text pieces (iterate it once).
 * `step()` runs it synchronously instead, one forward step per call.
 */
export class Generation implements AsyncIterable<string> {
  /** Set when generation has ended (it stays null if a step threw). */
  result: GenerationResult | null = null;
  private readonly session: TextSession;
  private readonly options: CheckedOptions;
  private readonly run: Generator<Step, FinishReason, void>;
  private readonly stopFilter: StopFilter;
  private readonly tally: Tally = { promptTokens: 0, generatedTokens: 0, prefillMs: 0, decodeMs: 0 };
  private text = '';
  private textStream: TextStream | null = null;
  private before: Counters | null = null;
  private iterated = false;
  private ended = false;

  constructor(session: TextSession, prompt: string | readonly number[], options: CheckedOptions) {
    this.session = session;
    this.options = options;
    const sampler = new Sampler(session.tokenizer.vocabSize, {
      temperature: options.temperature,
      topP: options.topP,
      seed: options.seed,
    });
    this.run = session.steps(prompt, options.maxTokens, sampler, this.tally);
    this.stopFilter = new StopFilter(options.stop);
  }

  /**
   * Runs one step: a prefill chunk or one token. Returns the text it shows
   * ('' for none), or null once generation has ended.
   */
  step(): string | null {
    if (this.ended) return null;
    if (!this.before) {
      this.session.claim(this);
      this.before = this.session.counters();
    }
    if (this.options.signal?.aborted) return this.finish('abort');
    let next: IteratorResult<Step, FinishReason>;
    try {
      next = this.run.next();
    } catch (error) {
      this.ended = true;
      this.session.release(this);
      throw error;
    }
    if (next.done) return this.finish(next.value);
    const s = next.value;
    if (s.kind === 'prefill') {
      this.options.onProgress?.(prefillProgress(s.done, s.total, this.tally.prefillMs));
      return '';
    }
    this.options.onToken?.(s.token);
    this.textStream ??= new TextStream(this.session.tokenizer, this.previousToken());
    const { text, stopped } = this.stopFilter.push(this.textStream.push(s.token));
    this.text += text;
    return stopped ? this.finish('stop', text) : text;
  }

  /** Pieces of text as they are generated; yields to the event loop between forward steps. */
  async *[Symbol.asyncIterator](): AsyncGenerator<string, void, undefined> {
    if (this.iterated) throw new SparqError('Generation: a generation can be iterated once');
    this.iterated = true;
    try {
      for (let piece = this.step(); piece !== null; piece = this.step()) {
        if (piece) yield piece;
        await nextTurn();
      }
    } finally {
      // The consumer left the loop early (break, return, throw): that is an abort.
      if (!this.ended) this.finish('abort');
    }
  }

  /** Runs to the end (unless it was iterated already) and returns the result; its `text` is all the text. */
  async collect(): Promise<GenerationResult> {
    if (!this.iterated) for await (const piece of this) void piece;
    if (!this.result)
      throw new SparqError('Generation.collect: the generation is still being iterated, or a step threw');
    return this.result;
  }

  /** The token the first sampled token follows: the last of the prompt, or of the history. */
  private previousToken(): number {
    const history = this.session.history;
    // history ends with the first sampled token (pending): the one before it.
    return history.length >= 2 ? history[history.length - 2] : -1;
  }

  /** Ends generation: flushes held-back text (unless a stop string ended it) and builds the result. */
  private finish(reason: FinishReason, shownNow = ''): string {
    this.run.return(reason);
    let tail = '';
    if (reason !== 'stop') {
      const flushed = this.stopFilter.push(this.textStream?.flush() ?? '');
      tail = flushed.stopped ? flushed.text : flushed.text + this.stopFilter.flush();
      if (flushed.stopped) reason = 'stop';
    }
    this.text += tail;
    this.ended = true;
    this.session.release(this);
    this.result = this.summary(reason);
    return shownNow + tail;
  }

  private summary(reason: FinishReason): GenerationResult {
    const t = this.tally;
    const attention = attentionReport(
      this.session.attention.method,
      this.before ?? this.session.counters(),
      this.session.counters(),
    );
    const { decodeSteps, ...report } = attention;
    return {
      text: this.text,
      finishReason: reason,
      promptTokens: t.promptTokens,
      generatedTokens: t.generatedTokens,
      decodeSteps,
      prefillMs: t.prefillMs,
      decodeMs: t.decodeMs,
      prefillTokensPerSecond: perSecond(t.promptTokens, t.prefillMs),
      decodeTokensPerSecond: perSecond(decodeSteps, t.decodeMs),
      attention: report,
    };
  }
}
