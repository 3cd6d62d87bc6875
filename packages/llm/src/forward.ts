/**
 * The forward pass of a Llama-family model, as llama2.c's forward() with a
 * KV cache per layer and batched prefill:
 *
 *   x = embedding rows of the tokens                                (n, dim)
 *   per layer:
 *     xb = rmsnorm(x) ; q, k, v = xb @ wq^T, wk^T, wv^T              (n, q_dim), (n, kv_dim) x2
 *     [+ bq, bk, bv]          (Qwen 2: q/k/v biases)
 *     [rmsnorm each head of q and k]   (Qwen 3: per-head q/k norms)
 *     rope(q, k) at the tokens' positions (pair layout and frequency table per family / RoPE scaling)
 *     append k, v to the cache
 *     att = attention(q, cache)  prefill: dense causal (with H2O, its weights seed H2O's scores);
 *                                decode: the chosen method
 *     x += att @ wo^T
 *     xb = rmsnorm(x) ; hb = silu(xb @ w1^T) * (xb @ w3^T) ; x += hb @ w2^T
 *   logits = rmsnorm(x[last]) @ classifier^T                       (vocab_size)
 * (the last layer, past k and v, forwards the last row alone: nothing else reads its output)
 *
 * Every op runs on the engine, the residual adds and the checks of each layer's
 * output for NaN and infinities included (a prefill's are millions of elements).
 * A Session owns
 * the caches (allocated once, capacity positions) and the RunState, or is given
 * them (a server's slots share one RunState and view one batched cache).
 * Session.forwardBatch forwards the tokens of several sessions as the rows of one
 * pass: each session's tokens (one decode token, or a chunk of its prompt) are
 * consecutive rows of every weight product, so the weights are read once for all
 * of them, while each session appends to and attends over its own caches with its
 * own attention (decode: its method; prompt: dense causal). Its last layer, past
 * k and v, forwards each part's last row alone (moved to the front rows), and the
 * classifier takes those rows. Session.decodeBatch is forwardBatch with one
 * decode token per session. A session's own prefill and decode are the same pass with one part.
 */
import {
  AttentionStats,
  H2OState,
  KVCache,
  NonFiniteError,
  SparqRangeError,
  Tensor,
  bf16ToF32,
  f16ToF32,
  kvBytesPerPosition,
  kvRowBytes,
  kvTypes,
  type Engine,
  type KTDType,
  type KVCacheOptions,
  type ProductPath,
  type KVDType,
  type KVTypeChoice,
  type KVLayout,
} from '@sparq/core';
import { attentionCost, decodeAttention, type AttentionConfig } from './attention-method.ts';
import { linear } from './linear.ts';
import {
  CHECKS,
  DEFAULT_KV_DTYPE,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_PRODUCT_PATH,
  checkKv,
  checkNumber,
  contextCheck,
  renamed,
} from './options.ts';
import { RunState } from './run-state.ts';
import { restoreCheckpoint, saveCheckpoint, type SessionCheckpoint } from './session-checkpoint.ts';
import type { Model } from './weights.ts';

/** The run state's views for one forward call of n rows. */
type Rows = ReturnType<RunState['rows']>;

/** The names are options.ts's (one vocabulary for every entry point); the older ones still work. */
export interface SessionOptions {
  /** KV positions per layer: prompt plus generated tokens, at most the model's seq_len. Required (or its older name). */
  contextSize?: number;
  /** @deprecated The older name of contextSize. */
  capacity?: number;
  /** Most tokens one prefill call forwards at once (RunState rows), default DEFAULT_PREFILL_CHUNK (512). */
  prefillChunk?: number;
  /** @deprecated The older name of prefillChunk. */
  maxPrefill?: number;
  attention: AttentionConfig;
  /** KV element type, default DEFAULT_KV_DTYPE ('f16'). */
  kv?: KVTypeChoice;
  /** @deprecated The older name of kv. */
  kvDType?: KVTypeChoice;
  /** Element type of SparQ's transposed K ('k-twice' layout), default DEFAULT_SESSION_KT of kv's K type. */
  kt?: KTDType;
  /** KV layout, default defaultKVLayout(attention.method). */
  kvLayout?: KVLayout;
  /** How products with quantized weights are computed, default DEFAULT_PRODUCT_PATH ('int8'; linear.ts). */
  productPath?: ProductPath;
  /**
   * The run state to forward in, shared by sessions that run one at a time (a server's slots);
   * default: the session's own, of maxPrefill rows. Its maxRows bounds a prefill call's chunk.
   */
  state?: RunState;
  /**
   * The KV caches to fill (n_layers, each batch 1, capacity positions), e.g. one sequence's views
   * of caches with a batch dimension (KVCache.view); default: the session allocates its own.
   */
  caches?: readonly KVCache[];
}

/** How far a prefill has got: prompt tokens forwarded of those the call forwards, and their rate so far. */
export interface PrefillProgress {
  /** Prompt tokens forwarded so far in this call. */
  done: number;
  /** Prompt tokens this call forwards. */
  total: number;
  /** done over the prefill's time so far (its forward passes only). */
  tokensPerSecond: number;
}

/** A PrefillProgress after `ms` milliseconds of forwarding. */
export function prefillProgress(done: number, total: number, ms: number): PrefillProgress {
  return { done, total, tokensPerSecond: ms > 0 ? (1000 * done) / ms : 0 };
}

/**
/**
 * The transposed K copy each KV type gets (read by SparQ's step 1 only): the most accurate one
 * within 1.25x llama.cpp's bytes per position at the same KV type (issue 24). f16 + i8 would be
 * 1.26x, so f16 takes i4 (1.13x). Measured with bench/kt-accuracy.ts; numbers in docs/kv-cache.md.
 */
export const DEFAULT_SESSION_KT: Readonly<Record<KVDType, KTDType>> = { f32: 'f16', f16: 'i4', q8_0: 'i4', q4_0: 'i2' };

/** The transposed K a session gets for row types `kv`: K's (the copy is derived from the K rows). */
export function sessionKT(kv: KVTypeChoice): KTDType {
  return DEFAULT_SESSION_KT[kvTypes(kv).k];
}

/**
 * SparQ's step 1 reads r components of every key: contiguous columns of K transposed with
 * 'k-twice' (1.5x the cache), strided out of the key rows with 'single-k'. Every other method
 * reads whole rows only.
 */
export function defaultKVLayout(method: AttentionConfig['method']): KVLayout {
  return method === 'sparq' ? 'k-twice' : 'single-k';
}

/** The forward pass over one KV cache per layer: batched prefill and one-token decode steps returning logits. */
export class Session {
  readonly caches: KVCache[]; // (n_layers) each (1, n_kv_heads, capacity, head_dim)
  readonly h2o: (H2OState | null)[]; // (n_layers) H2O's accumulated scores, or null
  readonly state: RunState;
  /** Elements (and their bytes in the caches' types) the decode attention kernels counted. */
  readonly stats = new AttentionStats();
  /** Decode steps taken, and spec.md §3 elements for the method and for dense over those steps. */
  decodeSteps = 0;
  methodCost = 0;
  denseCost = 0;
  /** Bytes dense would read over those steps: spec.md §3's 2 S d K and V elements in the row type, 2 d f32 for q and the output. */
  denseBytes = 0;
  /** Next position to fill. */
  pos = 0;
  /**
   * Whether the last layer of a prefill forwards every row, not only the last (whose logits are
   * all a prefill returns). Off by default: on, the last layer's queries, attention and FFN cost
   * every row's work; tools that look at every prompt position's query (the playground) turn it on.
   */
  prefillAllRows = false;
  private readonly productPath: ProductPath;
  /** The one-part batch over `state` that prefill and decode run in (made at the first call). */
  private single: BatchState | null = null;
  private readonly dense: AttentionConfig;
  /** Decode attention: options.attention until setAttention changes it. */
  private attention: AttentionConfig;
  readonly engine: Engine;
  readonly model: Model;
  readonly options: SessionOptions;

  constructor(engine: Engine, model: Model, options: SessionOptions) {
    this.engine = engine;
    this.model = model;
    this.options = options;
    const c = model.config;
    const capacity = checkNumber(
      'Session: contextSize',
      renamed('Session', 'contextSize', options.contextSize, 'capacity', options.capacity),
      contextCheck(c.seqLen),
    );
    const chunk = checkNumber(
      'Session: prefillChunk',
      renamed('Session', 'prefillChunk', options.prefillChunk, 'maxPrefill', options.maxPrefill) ??
        DEFAULT_PREFILL_CHUNK,
      CHECKS.prefillChunk,
    );
    const dtype = checkKv(
      'Session: kv',
      renamed('Session', 'kv', options.kv, 'kvDType', options.kvDType) ?? DEFAULT_KV_DTYPE,
    );
    const layout = options.kvLayout ?? defaultKVLayout(options.attention.method);
    const cacheOptions: KVCacheOptions = {
      nKvHeads: c.nKvHeads,
      headDim: c.headDim,
      capacity,
      dtype,
      kTDType: options.kt ?? sessionKT(dtype),
      layout,
    };
    this.caches = options.caches
      ? checkCaches(options.caches, c, capacity)
      : Array.from({ length: c.nLayers }, () => new KVCache(cacheOptions));
    this.h2o = this.caches.map((cache) => (options.attention.method === 'h2o' ? new H2OState(cache) : null));
    this.state = options.state ?? new RunState(c, Math.min(chunk, capacity));
    if (this.state.config !== c) throw new SparqRangeError('Session: the given run state was made for another model');
    this.productPath = options.productPath ?? DEFAULT_PRODUCT_PATH;
    this.dense = { ...options.attention, method: 'dense' };
    this.attention = options.attention;
  }

  /** Bytes the KV caches of all layers hold (K, K transposed with its scales, V). */
  get kvBytes(): number {
    return this.caches.reduce((sum, cache) => sum + cache.byteLength, 0);
  }

  /** KV bytes per position over all layers (kvBytesPerPosition of each layer's cache). */
  get kvBytesPerPosition(): number {
    return this.caches.reduce((sum, cache) => sum + kvBytesPerPosition(cache.options), 0);
  }

  /**
   * Decode attention from the next step on, over the same caches (e.g. dense then SparQ after one
   * prefill, as `sparq bench` times them). The cache layout stays as created: SparQ reads K rows on
   * either layout, faster with K twice. H2O needs the state a session created for it.
   */
  setAttention(attention: AttentionConfig): void {
    if (attention.method === 'h2o' && this.h2o[0] === null)
      throw new SparqRangeError(
        `Session.setAttention: h2o needs its score state; create the session with method 'h2o'`,
      );
    this.attention = attention;
  }

  /**
   * Keeps the first `length` positions and drops the rest (a prompt cache reusing a common prefix):
   * each cache's running V sum is summed again over the kept rows (KVCache.truncate). Not with H2O,
   * whose evictions cannot be undone.
   */
  truncate(length: number): void {
    if (this.h2o[0] !== null)
      throw new SparqRangeError('Session.truncate: an h2o session has evicted positions for good; reset it instead');
    if (!Number.isInteger(length) || length < 0 || length > this.pos)
      throw new SparqRangeError(
        `Session.truncate: length ${length}, expected an integer in [0, ${this.pos}] (the positions filled)`,
      );
    for (const cache of this.caches) {
      // Block rows are decoded by the engine's dequantize, as attention reads them, to sum the kept V rows again.
      const dtype = cache.vDType;
      const rowsOf = (values: number) => (values / cache.headDim) * cache.vRowStride; // bytes of values / headDim V rows
      const decodeRows =
        dtype === 'q8_0' || dtype === 'q4_0'
          ? (out: Float32Array, rows: Uint8Array, at: number) =>
              this.engine.dequantize(
                Tensor.wrap('f32', out, [out.length]),
                Tensor.wrap(dtype, rows.subarray(at, at + rowsOf(out.length)), [out.length]),
              )
          : undefined;
      cache.truncate(0, length, decodeRows);
    }
    this.pos = length;
  }

  /** Empties the caches (and H2O's history) for a new sequence from position 0; statistics are kept. */
  reset(): void {
    for (const cache of this.caches) cache.reset(0);
    for (const h of this.h2o) h?.reset(0);
    this.pos = 0;
  }

  /**
   * Forwards the prompt with dense causal attention, in chunks of maxPrefill;
   * logits of its last token. All or nothing: if any chunk throws, the
   * session is restored to where it was before the call. With `allRows`, the last
   * layer forwards every row of the last chunk, so the run state's x holds each row's
   * final residual stream (AllLogits scores them all); otherwise the last row's alone.
   */
  prefill(
    tokens: readonly number[],
    options: { allRows?: boolean; onProgress?: (progress: PrefillProgress) => void } = {},
  ): Float32Array {
    if (tokens.length < 1) throw new SparqRangeError('Session.prefill: no tokens, expected at least one');
    return this.atomically(() => {
      let logits!: Float32Array; // tokens is not empty: the loop runs
      const t0 = performance.now();
      for (let i = 0; i < tokens.length; i += this.state.maxRows) {
        logits = this.forward(tokens.slice(i, i + this.state.maxRows), false, options.allRows ?? this.prefillAllRows);
        const done = Math.min(i + this.state.maxRows, tokens.length);
        options.onProgress?.(prefillProgress(done, tokens.length, performance.now() - t0));
      }
      return logits;
    });
  }

  /** Forwards one token with the configured decode attention; the next token's logits. All or nothing, as prefill. */
  decode(token: number): Float32Array {
    return this.atomically(() => this.forward([token], true, false));
  }

  /** The state a failed call is rolled back to (see session-checkpoint.ts). */
  checkpoint(): SessionCheckpoint {
    return saveCheckpoint(this);
  }

  /** Puts the caches, position and counters back as they were at `cp`. */
  restore(cp: SessionCheckpoint): void {
    restoreCheckpoint(this, cp);
  }

  private atomically(run: () => Float32Array): Float32Array {
    const cp = this.checkpoint();
    try {
      return run();
    } catch (error) {
      this.restore(cp);
      throw error;
    }
  }

  /** The one-part run of this session's own calls: its tokens as the rows of `run`, its logits. */
  private forward(tokens: readonly number[], decode: boolean, allRows: boolean): Float32Array {
    this.single ??= new BatchState(this.state, 1);
    const n = tokens.length;
    const part = { session: this, tokens, prefill: !decode };
    return Session.run([part], [0, n], this.single, allRows, `forward: step at ${this.positions(n)}`)[0];
  }

  /** Decode attention of layer l for this session's one new token (its k and v appended): q, out (1, n_heads, head_dim). */
  private attendDecode(l: number, out: Tensor<'f32'>, q: Tensor<'f32'>): void {
    const cache = this.caches[l];
    if (l === 0) this.countStep(cache.nValid(0));
    decodeAttention(this.engine, this.attention, out, q, cache, this.h2o[l], this.stats);
  }

  /**
   * One forward pass over the rows of several sessions: part i's tokens are consecutive rows of every
   * weight product (each weight matrix is read once for all rows of all parts), appended at its
   * session's next positions to that session's caches. A decode part (prefill false, one token)
   * attends with its session's decode attention, as `decode` does; a prefill part (one or more
   * tokens) with dense causal attention over its session's cache, its rows being the last of it, as
   * one chunk of `prefill` does (with H2O, whose prefill weights seed its scores). The parts share
   * the model, engine and product path, and `batch` holds all their rows. Per row this computes
   * what the part alone computes, with the same ops; only the products see all rows, so a backend
   * whose product kernels for many rows add in another order (native's blocked kernels, from 8
   * rows) moves the logits in their last bits. All or nothing: if a row fails, every session is put
   * back. Returns the logits of each part's last row, views of batch.logits valid until its next call.
   */
  static forwardBatch(parts: readonly BatchPart[], batch: BatchState): Float32Array[] {
    return Session.forwardParts(parts, batch, 'Session.forwardBatch');
  }

  /**
   * One decode step of several sessions as one forward pass: forwardBatch with session i's one
   * decode token tokens[i] as part i. Returns each session's logits (views of batch.logits).
   */
  static decodeBatch(sessions: readonly Session[], tokens: readonly number[], batch: BatchState): Float32Array[] {
    if (sessions.length !== tokens.length)
      throw new SparqRangeError(
        `Session.decodeBatch: ${sessions.length} sessions and ${tokens.length} tokens, expected as many of each`,
      );
    const parts = sessions.map((session, i) => ({ session, tokens: [tokens[i]], prefill: false }));
    return Session.forwardParts(parts, batch, 'Session.decodeBatch');
  }

  /** forwardBatch, its messages naming `who` (the public call): checked, then run; all or nothing. */
  private static forwardParts(parts: readonly BatchPart[], batch: BatchState, who: string): Float32Array[] {
    const offsets = Session.checkParts(parts, batch, who);
    const checkpoints = parts.map((p) => p.session.checkpoint());
    try {
      return Session.run(parts, offsets, batch, false, who);
    } catch (error) {
      parts.forEach((p, i) => p.session.restore(checkpoints[i]));
      throw error;
    }
  }

  /**
   * The forward pass (the file comment) over the rows of `parts`, part i's at rows offsets[i]..:
   * every session's calls run here, one part for prefill and decode, several for forwardBatch.
   * With `allRows` the last layer forwards every row, so the run state's x ends holding each row's
   * final residual stream, in order (AllLogits scores them all). Messages start with `who`.
   */
  private static run(
    parts: readonly BatchPart[],
    offsets: readonly number[],
    batch: BatchState,
    allRows: boolean,
    who: string,
  ): Float32Array[] {
    const sessions = parts.map((p) => p.session);
    const { engine, model, productPath } = sessions[0];
    const c = model.config;
    const w = model.weights;
    const state = batch.state;
    const r = state.rows(offsets[parts.length]);
    // Embedding and position of every row: part i's tokens at rows offsets[i].., positions from its session's.
    parts.forEach((p, i) =>
      p.tokens.forEach((token, j) => {
        embed(engine, model, r.x.data, token, offsets[i] + j);
        r.positions.data[offsets[i] + j] = p.session.pos + j;
      }),
    );
    // The last layer's output feeds only the classifier, which reads each part's last row: past its
    // keys and values (every row's go to the cache) that layer forwards those rows alone, moved to
    // rows 0.., as llama.cpp's graph does (its output rows, inp_out_ids). Its query projection,
    // attention, wo and FFN then cost parts / rows of the full rows' (a 512-token prompt in a 1-layer
    // model: about 3/4 of all the products). Not with allRows, nor with H2O, whose scores need every
    // row's query (h2oSeed); an H2O prompt still attends with its last row alone (attendLastRow).
    const last = c.nLayers - 1;
    const lastOnly = !allRows && sessions.every((s) => s.h2o[last] === null);
    const lastRows = state.rows(parts.length);
    const select = () => {
      lastRowsTo(state.x, state.x, c.dim, offsets);
      lastRowsTo(state.xb, state.xb, c.dim, offsets);
      lastRowsTo(state.positions, state.positions, 1, offsets);
    };
    for (let l = 0; l < c.nLayers; l++) {
      const fewer = l === last && lastOnly;
      const attend = () =>
        parts.forEach((p, i) => {
          const s = p.session;
          const cache = s.caches[l];
          const all = batch.part(offsets[i], p.tokens.length);
          engine.kvAppend(cache, 0, all.kHeads, all.vHeads);
          // Queries: the part's rows, the last rows of its cache; or its last row alone, at row i.
          const q = fewer ? batch.part(i, 1) : all;
          const h2o = s.h2o[l];
          if (!p.prefill) s.attendDecode(l, q.att, q.qHeads);
          else if (h2o && l === last && !allRows && p.tokens.length > 1) {
            // H2O as its authors run it: the prompt's attention weights start the accumulated scores.
            attendLastRow(engine, all, cache);
            engine.h2oSeed(h2o, all.qHeads, cache, 0);
          } else engine.attentionPrefill(q.att, q.qHeads, cache, 0, h2o ? { h2o } : undefined);
        });
      const out = fewer ? lastRows : r;
      try {
        layer(engine, model, productPath, l, r, out, attend, fewer ? select : undefined);
      } catch (error) {
        // An op refusing a NaN or infinity (a bad weight upstream): say where in the model it happened.
        if (error instanceof NonFiniteError) throw new NonFiniteError(`${who}: layer ${l}: ${error.message}`);
        throw error;
      }
      checkFinite(engine, out.x, `${who}: layer ${l} output`);
    }
    // Classifier on each part's last row: at rows 0.. of x after the last layer's select; otherwise
    // copied to rows 0.. of xb2, so that x keeps every row in order.
    if (!lastOnly) lastRowsTo(state.xb2, state.x, c.dim, offsets);
    const logits = batch.logits(parts.length);
    engine.rmsnorm(lastRows.xb, lastOnly ? lastRows.x : lastRows.xb2Rows, w.finalNorm, c.normEps);
    linear(engine, logits, w.classifier, lastRows.xbIn, productPath);
    checkFinite(engine, logits, `${who}: logits (final norm and classifier)`);
    for (const p of parts) p.session.pos += p.tokens.length;
    return parts.map((_, i) => logits.data.subarray(i * c.vocabSize, (i + 1) * c.vocabSize));
  }

  /**
   * Checks forwardBatch's arguments before anything runs; returns each part's first row in the
   * batch, then the number of rows in all.
   */
  private static checkParts(parts: readonly BatchPart[], batch: BatchState, who: string): number[] {
    if (parts.length < 1) throw new SparqRangeError(`${who}: no parts, expected at least one`);
    const { engine, model, productPath } = parts[0].session;
    if (batch.state.config !== model.config)
      throw new SparqRangeError(`${who}: the batch state was made for another model than the sessions'`);
    const offsets = [0];
    const seen = new Map<Session, number>();
    parts.forEach((p, i) => {
      const s = p.session;
      const n = p.tokens.length;
      if (n < 1) throw new SparqRangeError(`${who}: parts[${i}].tokens is empty, expected at least one token`);
      if (!p.prefill && n !== 1)
        throw new SparqRangeError(
          `${who}: parts[${i}].tokens has ${n} tokens, expected exactly 1 for a decode part (prefill: false)`,
        );
      const first = seen.get(s);
      if (first !== undefined)
        throw new SparqRangeError(`${who}: parts[${first}] and parts[${i}] are the same session`);
      seen.set(s, i);
      if (s.model !== model || s.engine !== engine || s.productPath !== productPath)
        throw new SparqRangeError(
          `${who}: parts[${i}].session has another model, engine or product path than parts[0].session; the parts must share them`,
        );
      s.caches[0].checkRoom(`${who}: parts[${i}]`, 0, n);
      offsets.push(offsets[i] + n);
    });
    const rows = offsets[parts.length];
    if (rows > batch.state.maxRows)
      throw new SparqRangeError(
        `${who}: ${rows} rows in all (${parts.length} parts), the batch state holds at most ${batch.state.maxRows}`,
      );
    if (parts.length > batch.maxParts)
      throw new SparqRangeError(`${who}: ${parts.length} parts, the batch state takes at most ${batch.maxParts}`);
    return offsets;
  }

  /** 'position p' or 'positions p..q' of the n tokens being forwarded, for messages. */
  private positions(n: number): string {
    return n === 1 ? `position ${this.pos}` : `positions ${this.pos}..${this.pos + n - 1}`;
  }

  /** Adds one decode step over S valid positions to the spec.md §3 cost totals (all layers and KV heads). */
  private countStep(S: number): void {
    const c = this.model.config;
    const heads = c.nLayers * c.nKvHeads;
    this.decodeSteps++;
    this.methodCost += heads * attentionCost(this.attention, S, c.headDim);
    this.denseCost += heads * attentionCost(this.dense, S, c.headDim);
    const { kDType, vDType } = this.caches[0];
    this.denseBytes +=
      heads * (S * (kvRowBytes(kDType, c.headDim) + kvRowBytes(vDType, c.headDim)) + 2 * c.headDim * 4);
  }
}

/** One session's rows in a Session.forwardBatch call. */
export interface BatchPart {
  session: Session;
  /** Tokens forwarded at the session's next positions: exactly one for a decode part, at least one for a prefill part. */
  tokens: readonly number[];
  /** true: dense causal attention over the session's cache (a prompt chunk); false: the session's decode attention. */
  prefill: boolean;
}

/**
 * The rows of a batched step (Session.forwardBatch): a run state whose maxRows bounds the rows of
 * a call (a server's slots share it), each part's views as a batch-1 operand of the attention ops,
 * and the classifier's output, one row per part for at most `maxParts` parts (default maxRows; a
 * server whose slots are each at most one part gives its slot count: with a vocabulary of 128k,
 * each row is 0.5 MB).
 */
export class BatchState {
  readonly state: RunState;
  /** Parts a call takes at most (rows of the logits). */
  readonly maxParts: number;
  private readonly logitsData: Float32Array; // (maxParts, vocab_size)
  private readonly partViews = new Map<number, PartViews>();
  private readonly logitViews = new Map<number, Tensor<'f32'>>();

  constructor(state: RunState, maxParts = state.maxRows) {
    if (!Number.isInteger(maxParts) || maxParts < 1 || maxParts > state.maxRows)
      throw new SparqRangeError(
        `BatchState: maxParts ${maxParts}, expected an integer in [1, ${state.maxRows}] (the run state's rows)`,
      );
    this.state = state;
    this.maxParts = maxParts;
    this.logitsData = new Float32Array(maxParts * state.config.vocabSize);
  }

  /** Rows offset..offset + n - 1's q, k, v and attention output as (n, heads, head_dim), made once per (offset, n). */
  part(offset: number, n: number): PartViews {
    const key = offset * (this.state.maxRows + 1) + n;
    let v = this.partViews.get(key);
    if (v) return v;
    const { nHeads, nKvHeads, headDim, qDim, kvDim } = this.state.config;
    const { q, k, v: vv, att } = this.state;
    v = {
      qHeads: new Tensor('f32', q, [n, nHeads, headDim], undefined, offset * qDim),
      kHeads: new Tensor('f32', k, [n, nKvHeads, headDim], undefined, offset * kvDim),
      vHeads: new Tensor('f32', vv, [n, nKvHeads, headDim], undefined, offset * kvDim),
      att: new Tensor('f32', att, [n, nHeads, headDim], undefined, offset * qDim),
    };
    this.partViews.set(key, v);
    return v;
  }

  /** Logits of n rows: (n, vocab_size), or (vocab_size) for one row, matching RunState.rows(n).xbIn. */
  logits(n: number): Tensor<'f32'> {
    let t = this.logitViews.get(n);
    if (t) return t;
    const vocab = this.state.config.vocabSize;
    t = new Tensor('f32', this.logitsData, n === 1 ? [vocab] : [n, vocab]);
    this.logitViews.set(n, t);
    return t;
  }
}

/** One part's rows of the run state, as the attention ops take them. */
interface PartViews {
  qHeads: Tensor<'f32'>;
  kHeads: Tensor<'f32'>;
  vHeads: Tensor<'f32'>;
  att: Tensor<'f32'>;
}

/**
 * One transformer layer over the rows r of the run state (see the file comment): their keys and
 * values, then the rest for the rows `out` (r itself, or fewer: each part's last row, which
 * `select` first moves to the rows out views, once r's keys are done with r's normed input and
 * positions). `attend` appends r's keys and values to the cache(s) and writes out's attention
 * output from out's queries.
 */
function layer(
  engine: Engine,
  model: Model,
  productPath: ProductPath,
  l: number,
  r: Rows,
  out: Rows,
  attend: () => void,
  select?: () => void,
): void {
  const c = model.config;
  const layer = model.weights.layers[l];
  // Attention block: rmsnorm, projections, rotary positions, cache append and attention. The
  // per-family differences (family.ts): biases, per-head norms; the rope options carry the rest.
  engine.rmsnorm(r.xb, r.x, layer.attnNorm, c.normEps);
  linear(engine, r.k, layer.wk, r.xbIn, productPath);
  linear(engine, r.v, layer.wv, r.xbIn, productPath);
  if (layer.bias) {
    addRows(r.k.data, layer.bias.k, r.n);
    addRows(r.v.data, layer.bias.v, r.n);
  }
  if (layer.qkNorm) engine.rmsnorm(r.kRows, r.kRows, layer.qkNorm.k, c.normEps);
  engine.rope(r.kHeads, r.positions, c.ropeTheta, model.weights.rope);
  select?.();
  linear(engine, out.q, layer.wq, out.xbIn, productPath);
  if (layer.bias) addRows(out.q.data, layer.bias.q, out.n);
  if (layer.qkNorm) engine.rmsnorm(out.qRows, out.qRows, layer.qkNorm.q, c.normEps);
  engine.rope(out.qHeads, out.positions, c.ropeTheta, model.weights.rope);
  attend();
  linear(engine, out.xb2, layer.wo, out.attIn, productPath);
  engine.add(out.x, out.x, out.xb2Rows);
  // FFN block: rmsnorm, SwiGLU, down projection.
  engine.rmsnorm(out.xb, out.x, layer.ffnNorm, c.normEps);
  linear(engine, out.hb, layer.w1, out.xbIn, productPath);
  linear(engine, out.hb2, layer.w3, out.xbIn, productPath);
  engine.swiglu(out.hb, out.hb, out.hb2);
  linear(engine, out.xb2, layer.w2, out.hb, productPath);
  engine.add(out.x, out.x, out.xb2Rows);
}

/**
 * Prefill attention of the last of r's rows alone, the other rows' outputs zero: in the last layer
 * of an H2O session, whose rows all need their queries (h2oSeed) but whose output only the last row
 * feeds (the classifier). The rows before it would cost a quadratic attention for nothing.
 */
function attendLastRow(engine: Engine, r: PartViews, cache: KVCache): void {
  const [n, nHeads, d] = r.qHeads.shape;
  const at = (n - 1) * nHeads * d;
  r.att.data.fill(0, r.att.offset, r.att.offset + at);
  engine.attentionPrefill(
    new Tensor('f32', r.att.data, [1, nHeads, d], undefined, r.att.offset + at),
    new Tensor('f32', r.qHeads.data, [1, nHeads, d], undefined, r.qHeads.offset + at),
    cache,
    0,
  );
}

/**
 * Copies each part's last row of `from` to row i of `to` (rows of `width`; part i's rows start at
 * offsets[i], the last part's end at offsets[parts]). `to` may be `from`: part i's last row is at or
 * after row i and the parts are in row order, so no row is overwritten before it is copied.
 */
function lastRowsTo<A extends Float32Array | Int32Array>(
  to: A,
  from: A,
  width: number,
  offsets: readonly number[],
): void {
  for (let i = 0; i + 1 < offsets.length; i++) {
    const last = offsets[i + 1] - 1;
    if (to !== from || last !== i) to.set(from.subarray(last * width, (last + 1) * width), i * width);
  }
}

/**
 * Throws NonFiniteError at the first NaN or infinity in t: a non-finite hidden state only spreads
 * (every later layer mixes all of it), so the first layer that shows one is where it came from.
 * Costs one pass over the activations per layer, nothing next to the matrix products.
 */
function checkFinite(engine: Engine, t: Tensor<'f32'>, where: string): void {
  const i = engine.firstAbove(t);
  if (i >= 0)
    throw new NonFiniteError(
      `${where} holds ${t.data[t.offset + i]} (element ${i}); the first non-finite value appears here (check the weights with checkTensors / --check-tensors)`,
    );
}

/** Copies embedding row `token` into row i of x (f16 converted, ggml blocks dequantized by the engine). */
function embed(engine: Engine, model: Model, x: Float32Array, token: number, i: number): void {
  const table = model.weights.tokenEmbedding;
  const [vocab, dim] = table.shape;
  if (!Number.isInteger(token) || token < 0 || token >= vocab)
    throw new SparqRangeError(`forward: token ${token}, expected an integer in [0, ${vocab - 1}]`);
  if (table.dtype === 'f32') {
    const from = table.offset + token * dim;
    x.set((table.data as Float32Array).subarray(from, from + dim), i * dim);
  } else if (table.dtype === 'f16' || table.dtype === 'bf16') {
    const src = table.data as Uint16Array;
    const widen = table.dtype === 'f16' ? f16ToF32 : bf16ToF32;
    for (let j = 0; j < dim; j++) x[i * dim + j] = widen(src[table.offset + token * dim + j]);
  } else {
    engine.dequantize(
      new Tensor('f32', x, [1, dim], undefined, i * dim),
      table.slice(0, token, token + 1) as Tensor<'q4_0'>,
    );
  }
}

/** Given caches: one per layer, batch 1, the model's KV shape and `capacity` positions. */
function checkCaches(caches: readonly KVCache[], c: Model['config'], capacity: number): KVCache[] {
  if (caches.length !== c.nLayers)
    throw new SparqRangeError(`Session: ${caches.length} caches given, expected ${c.nLayers} (one per layer)`);
  for (const cache of caches) {
    if (
      cache.batch !== 1 ||
      cache.nKvHeads !== c.nKvHeads ||
      cache.headDim !== c.headDim ||
      cache.capacity !== capacity
    ) {
      throw new SparqRangeError(
        `Session: a given cache has batch ${cache.batch}, ${cache.nKvHeads} KV heads of ${cache.headDim}, capacity ${cache.capacity}; expected batch 1, ${c.nKvHeads} of ${c.headDim}, capacity ${capacity}`,
      );
    }
  }
  return [...caches];
}

/** Adds `bias` (width) to each of the first n rows of x (n, width), in f32 as ggml's add. */
function addRows(x: Float32Array, bias: Tensor<'f32'>, n: number): void {
  const width = bias.size;
  for (let t = 0; t < n; t++) for (let i = 0; i < width; i++) x[t * width + i] += bias.data[bias.offset + i];
}
