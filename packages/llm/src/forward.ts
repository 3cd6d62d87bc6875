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
 *     att = attention(q, cache)  prefill: dense causal; decode: the chosen method
 *     x += att @ wo^T
 *     xb = rmsnorm(x) ; hb = silu(xb @ w1^T) * (xb @ w3^T) ; x += hb @ w2^T
 *   logits = rmsnorm(x[last]) @ classifier^T                       (vocab_size)
 * (the last layer, past k and v, forwards the last row alone: nothing else reads its output)
 *
 * Every op runs on the engine; the residual adds and SwiGLU's elementwise
 * product are plain loops here, in f32 as run.c computes them. A Session owns
 * the caches (allocated once, capacity positions) and the RunState.
 */
import { AttentionStats, H2OState, KVCache, NonFiniteError, SparqRangeError, Tensor, bf16ToF32, f16ToF32, kvBytesPerPosition, type Engine, type KTDType, type KVCacheOptions, type ProductPath, type KVDType, type KVLayout } from '@sparq/core';
import { attentionCost, decodeAttention, type AttentionConfig } from './attention-method.ts';
import { DEFAULT_PRODUCT_PATH, linear } from './linear.ts';
import { RunState } from './run-state.ts';
import { restoreCheckpoint, saveCheckpoint, type SessionCheckpoint } from './session-checkpoint.ts';
import type { Model } from './weights.ts';

/** The run state's views for one forward call of n rows. */
type Rows = ReturnType<RunState['rows']>;

export interface SessionOptions {
  /** KV positions per layer: prompt plus generated tokens, at most the model's seq_len. */
  capacity: number;
  /** Most tokens one prefill call forwards at once (RunState rows). */
  maxPrefill: number;
  attention: AttentionConfig;
  /** KV element type, default DEFAULT_KV_DTYPE. */
  kvDType?: KVDType;
  /** Element type of SparQ's transposed K ('k-twice' layout), default DEFAULT_SESSION_KT[kvDType]. */
  kTDType?: KTDType;
  /** KV layout, default defaultKVLayout(attention.method). */
  kvLayout?: KVLayout;
  /** How products with quantized weights are computed, default DEFAULT_PRODUCT_PATH ('int8'; linear.ts). */
  productPath?: ProductPath;
}

/**
 * f16 KV by default: half the cache memory and half the attention reads. Measured with
 * bench/kv-accuracy.ts on stories260K (200 greedy steps, teacher-forced): logits move by at
 * most 0.02 (dense) / 0.11 (SparQ) on a range of about 40, and the greedy tokens are unchanged.
 */
export const DEFAULT_KV_DTYPE: KVDType = 'f16';

/**
 * The transposed K copy each KV type gets (read by SparQ's step 1 only): the most accurate one
 * within 1.25x llama.cpp's bytes per position at the same KV type (issue 24). f16 + i8 would be
 * 1.26x, so f16 takes i4 (1.13x). Measured with bench/kt-accuracy.ts; numbers in docs/kv-cache.md.
 */
export const DEFAULT_SESSION_KT: Readonly<Record<KVDType, KTDType>> = { f32: 'f16', f16: 'i4', q8_0: 'i4', q4_0: 'i2' };

/**
 * SparQ's step 1 reads r components of every key: contiguous columns of K transposed with
 * 'k-twice' (1.5x the cache), strided out of the key rows with 'single-k'. Every other method
 * reads whole rows only.
 */
export function defaultKVLayout(method: AttentionConfig['method']): KVLayout {
  return method === 'sparq' ? 'k-twice' : 'single-k';
}

export class Session {
  readonly caches: KVCache[]; // (n_layers) each (1, n_kv_heads, capacity, head_dim)
  readonly h2o: (H2OState | null)[]; // (n_layers) H2O's accumulated scores, or null
  readonly state: RunState;
  /** Elements the decode attention kernels counted. */
  readonly stats = new AttentionStats();
  /** Decode steps taken, and SPEC 3 elements for the method and for dense over those steps. */
  decodeSteps = 0;
  methodCost = 0;
  denseCost = 0;
  /** Next position to fill. */
  pos = 0;
  private readonly productPath: ProductPath;
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
    if (!Number.isInteger(options.capacity) || options.capacity < 1 || options.capacity > c.seqLen) {
      throw new SparqRangeError(`Session: capacity ${options.capacity}, expected an integer in [1, ${c.seqLen}] (the model's seq_len)`);
    }
    const layout = options.kvLayout ?? defaultKVLayout(options.attention.method);
    this.caches = Array.from({ length: c.nLayers }, () => new KVCache(this.cacheOptions(layout)));
    this.h2o = this.caches.map((cache) => (options.attention.method === 'h2o' ? new H2OState(cache) : null));
    this.state = new RunState(c, Math.max(1, Math.min(options.maxPrefill, options.capacity)));
    this.productPath = options.productPath ?? DEFAULT_PRODUCT_PATH;
    this.dense = { ...options.attention, method: 'dense' };
    this.attention = options.attention;
  }

  /** The options of each layer's KV cache. */
  private cacheOptions(layout: KVLayout): KVCacheOptions {
    const c = this.model.config;
    const dtype = this.options.kvDType ?? DEFAULT_KV_DTYPE;
    return { nKvHeads: c.nKvHeads, headDim: c.headDim, capacity: this.options.capacity, dtype, kTDType: this.options.kTDType ?? DEFAULT_SESSION_KT[dtype], layout };
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
    if (attention.method === 'h2o' && this.h2o[0] === null) throw new SparqRangeError(`Session.setAttention: h2o needs its score state; create the session with method 'h2o'`);
    this.attention = attention;
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
  prefill(tokens: readonly number[], options: { allRows?: boolean } = {}): Float32Array {
    if (tokens.length < 1) throw new SparqRangeError('Session.prefill: no tokens, expected at least one');
    return this.atomically(() => {
      let logits = this.state.logits.data;
      for (let i = 0; i < tokens.length; i += this.state.maxRows) logits = this.forward(tokens.slice(i, i + this.state.maxRows), false, options.allRows ?? false);
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

  private forward(tokens: readonly number[], decode: boolean, allRows: boolean): Float32Array {
    const { engine, model } = this;
    const c = model.config;
    const w = model.weights;
    const n = tokens.length;
    const r = this.state.rows(n);
    // Embedding: row t of the table into row i of x; positions continue the cache.
    for (let i = 0; i < n; i++) {
      this.embed(tokens[i], i);
      r.positions.data[i] = this.pos + i;
    }
    for (let l = 0; l < c.nLayers; l++) {
      // The last layer's output feeds only the classifier, which reads the last row: past its K and V
      // projections (every row's keys and values go to the cache) that layer forwards the last row
      // alone (unless allRows), as llama.cpp's graph does (its output rows, inp_out_ids). Then the
      // query projection, attention, wo and the FFN of that layer cost 1 / n of the full rows' (in
      // a 1-layer model at 512 tokens, about 3/4 of all the products).
      const out = l === c.nLayers - 1 && !allRows ? this.state.lastRow(n) : r;
      try {
        this.layer(l, r, out, decode);
      } catch (error) {
        // An op refusing a NaN or infinity (a bad weight upstream): say where in the model it happened.
        if (error instanceof NonFiniteError) throw new NonFiniteError(`forward: step at ${this.positions(n)}: layer ${l}: ${error.message}`);
        throw error;
      }
      this.checkFinite(out.x, `layer ${l} output`, n);
    }
    // Classifier on the last row only: its logits predict the next token.
    engine.rmsnorm(this.state.xFinal, r.last, w.finalNorm, c.normEps);
    linear(engine, this.state.logits, w.classifier, this.state.xFinalIn, this.productPath);
    this.checkFinite(this.state.logits, 'logits (final norm and classifier)', n);
    this.pos += n;
    return this.state.logits.data;
  }

  /** 'position p' or 'positions p..q' of the n tokens being forwarded, for messages. */
  private positions(n: number): string {
    return n === 1 ? `position ${this.pos}` : `positions ${this.pos}..${this.pos + n - 1}`;
  }

  /**
   * One transformer layer over the rows r of the run state (see the file comment): their keys and
   * values, then the rest for the rows `out` (r itself, or its last row alone: forward).
   */
  private layer(l: number, r: Rows, out: Rows, decode: boolean): void {
    const { engine, model } = this;
    const c = model.config;
    const w = model.weights;
    const layer = w.layers[l];
    const cache = this.caches[l];
    // Attention block: rmsnorm, projections, rotary positions, cache append.
    engine.rmsnorm(r.xb, r.x, layer.attnNorm, c.normEps);
    linear(engine, out.q, layer.wq, out.xbIn, this.productPath);
    linear(engine, r.k, layer.wk, r.xbIn, this.productPath);
    linear(engine, r.v, layer.wv, r.xbIn, this.productPath);
    // The per-family differences (family.ts): biases, per-head norms; the rope options carry the rest.
    if (layer.bias) {
      addRows(this.state.q, layer.bias.q, out.n);
      addRows(this.state.k, layer.bias.k, r.n);
      addRows(this.state.v, layer.bias.v, r.n);
    }
    if (layer.qkNorm) {
      engine.rmsnorm(out.qRows, out.qRows, layer.qkNorm.q, c.normEps);
      engine.rmsnorm(r.kRows, r.kRows, layer.qkNorm.k, c.normEps);
    }
    engine.rope(out.qHeads, out.positions, c.ropeTheta, w.rope);
    engine.rope(r.kHeads, r.positions, c.ropeTheta, w.rope);
    engine.kvAppend(cache, 0, r.kHeads, r.vHeads);
    if (decode) {
      if (l === 0) this.countStep(cache.nValid(0));
      decodeAttention(engine, this.attention, out.att, out.qHeads, cache, this.h2o[l], this.stats);
    } else {
      // Query rows are the last out.n positions of the cache: the last row alone sees all of it.
      engine.attentionPrefill(out.att, out.qHeads, cache, 0);
    }
    linear(engine, out.xb2, layer.wo, out.attIn, this.productPath);
    addInto(out.x, out.xb2);
    // FFN block: rmsnorm, SwiGLU, down projection.
    engine.rmsnorm(out.xb, out.x, layer.ffnNorm, c.normEps);
    linear(engine, out.hb, layer.w1, out.xbIn, this.productPath);
    linear(engine, out.hb2, layer.w3, out.xbIn, this.productPath);
    engine.swiglu(out.hb, out.hb, out.hb2);
    linear(engine, out.xb2, layer.w2, out.hb, this.productPath);
    addInto(out.x, out.xb2);
  }

  /**
   * Throws NonFiniteError at the first NaN or infinity in x[0, count): a
   * non-finite hidden state only spreads (every later layer mixes all of it),
   * so the first layer that shows one is where it came from. Costs one pass
   * over the activations per layer, nothing next to the matrix products.
   */
  private checkFinite(t: Tensor<'f32'>, where: string, n: number): void {
    const x = t.data;
    for (let i = 0; i < t.size; i++) {
      const v = x[t.offset + i];
      // v - v is 0 for finite v, NaN for NaN and infinities.
      if (v - v !== 0) {
        throw new NonFiniteError(`forward: step at ${this.positions(n)}: ${where} holds ${v} (element ${i}); the first non-finite value appears here (check the weights with checkTensors / --check-tensors)`);
      }
    }
  }

  /** Copies embedding row `token` into row i of x (f16 converted, ggml blocks dequantized by the engine). */
  private embed(token: number, i: number): void {
    const table = this.model.weights.tokenEmbedding;
    const [vocab, dim] = table.shape;
    if (!Number.isInteger(token) || token < 0 || token >= vocab) throw new SparqRangeError(`forward: token ${token}, expected an integer in [0, ${vocab - 1}]`);
    const x = this.state.x;
    if (table.dtype === 'f32') {
      const from = table.offset + token * dim;
      x.set((table.data as Float32Array).subarray(from, from + dim), i * dim);
    } else if (table.dtype === 'f16' || table.dtype === 'bf16') {
      const src = table.data as Uint16Array;
      const widen = table.dtype === 'f16' ? f16ToF32 : bf16ToF32;
      for (let j = 0; j < dim; j++) x[i * dim + j] = widen(src[table.offset + token * dim + j]);
    } else {
      this.engine.dequantize(new Tensor('f32', x, [1, dim], undefined, i * dim), table.slice(0, token, token + 1) as Tensor<'q4_0'>);
    }
  }

  /** Adds one decode step over S valid positions to the SPEC 3 cost totals (all layers and KV heads). */
  private countStep(S: number): void {
    const c = this.model.config;
    const heads = c.nLayers * c.nKvHeads;
    this.decodeSteps++;
    this.methodCost += heads * attentionCost(this.attention, S, c.headDim);
    this.denseCost += heads * attentionCost(this.dense, S, c.headDim);
  }
}

/** x[i] += y[i] for i < n (the residual connection). */
function addInto(x: Tensor<'f32'>, y: Tensor<'f32'>): void {
  const xd = x.data, yd = y.data;
  for (let i = 0; i < x.size; i++) xd[x.offset + i] += yd[y.offset + i];
}

/** Adds `bias` (width) to each of the first n rows of x (n, width), in f32 as ggml's add. */
function addRows(x: Float32Array, bias: Tensor<'f32'>, n: number): void {
  const width = bias.size;
  for (let t = 0; t < n; t++) for (let i = 0; i < width; i++) x[t * width + i] += bias.data[bias.offset + i];
}

