/**
 * Parameters, outputs and state shared by the attention ops (spec.md sections 2 and 3).
 */
import type { KVCache } from './kv-cache.ts';

/** SparQ decode parameters (spec.md §2). */
export interface SparqParams {
  /** Query components used for approximate scores, 1..headDim. */
  r: number;
  /** Positions attended exactly, >= 1 (clamped to the valid positions). */
  k: number;
  /** Local window: the last `l` positions always rank first. Default 0. */
  l?: number;
  /** Interpolate with the mean value by the coverage alpha. Default true. */
  reallocate?: boolean;
}

/** Budget of the baselines: positions kept per KV head. */
export interface BudgetParams {
  k: number;
}

/** The attention methods this engine implements, by their CLI names. */
export type AttentionMethod = 'dense' | 'sparq' | 'oracle' | 'h2o' | 'lminf';

/**
 * Elements an attention call transferred, counted by the kernels as they read
 * (spec.md §3's cost model). Summed over sequences and heads of the call.
 *   kElements   key elements read from the cache
 *   vElements   value elements read from the cache
 *   auxElements side data: the running mean of V (read and update) for SparQ with
 *               reallocation, the accumulated scores (read and write) for H2O
 *   ioElements  query elements read plus output elements written
 * and the same in bytes (kBytes, vBytes, auxBytes, ioBytes), which differ from the elements by
 * the cache's types: the Engine converts each call's counts (countBytes, engine.ts), so a q4_0 cache
 * read costs 18 bytes per 32 elements and SparQ's data ratio is the bytes' ratio.
 */
export class AttentionStats {
  kElements = 0;
  vElements = 0;
  auxElements = 0;
  ioElements = 0;
  kBytes = 0;
  vBytes = 0;
  auxBytes = 0;
  ioBytes = 0;
  calls = 0;

  get total(): number {
    return this.kElements + this.vElements + this.auxElements + this.ioElements;
  }

  get totalBytes(): number {
    return this.kBytes + this.vBytes + this.auxBytes + this.ioBytes;
  }

  reset(): void {
    this.kElements = this.vElements = this.auxElements = this.ioElements = this.calls = 0;
    this.kBytes = this.vBytes = this.auxBytes = this.ioBytes = 0;
  }
}

/**
 * What SparQ chose, filled in when passed to `sparqDecode` (for test vectors and
 * debugging). Per sequence b and KV head h (index bh = b * nKvHeads + h), and
 * per query head (index bq = b * nHeads + q):
 *   i1      (batch, nKvHeads, r)  query components chosen (any order)
 *   i2      (batch, nKvHeads, k)  positions chosen; only the first i2Count[bh] are set
 *   i2Count (batch, nKvHeads)     k' = min(k, nValid)
 *   alpha   (batch, nHeads)       coverage of the chosen positions
 *   tau     (batch, nHeads)       softmax temperature of the approximate scores
 */
export class SparqTrace {
  readonly i1: Int32Array;
  readonly i2: Int32Array;
  readonly i2Count: Int32Array;
  readonly alpha: Float32Array;
  readonly tau: Float32Array;
  readonly batch: number;
  readonly nHeads: number;
  readonly nKvHeads: number;
  readonly r: number;
  readonly k: number;

  constructor(batch: number, nHeads: number, nKvHeads: number, r: number, k: number) {
    this.batch = batch;
    this.nHeads = nHeads;
    this.nKvHeads = nKvHeads;
    this.r = r;
    this.k = k;
    this.i1 = new Int32Array(batch * nKvHeads * r);
    this.i2 = new Int32Array(batch * nKvHeads * k);
    this.i2Count = new Int32Array(batch * nKvHeads);
    this.alpha = new Float32Array(batch * nHeads);
    this.tau = new Float32Array(batch * nHeads);
  }
}

/**
 * H2O's per-KV-head state across decode steps (spec.md §3): the attention
 * weight each position has accumulated (averaged over the group's query heads,
 * summed over steps) and whether it has been evicted for good.
 *   acc     (batch, nKvHeads, capacity)
 *   evicted (batch, nKvHeads, capacity)  1 = evicted
 */
export class H2OState {
  readonly acc: Float32Array;
  readonly evicted: Uint8Array;
  readonly batch: number;
  readonly nKvHeads: number;
  readonly capacity: number;

  constructor(cache: KVCache) {
    this.batch = cache.batch;
    this.nKvHeads = cache.nKvHeads;
    this.capacity = cache.capacity;
    const n = this.batch * this.nKvHeads * this.capacity;
    this.acc = new Float32Array(n);
    this.evicted = new Uint8Array(n);
  }

  /** Forgets sequence `seq`'s history (call with KVCache.reset). */
  reset(seq: number): void {
    const n = this.nKvHeads * this.capacity;
    this.acc.fill(0, seq * n, (seq + 1) * n);
    this.evicted.fill(0, seq * n, (seq + 1) * n);
  }
}

/** Options every attention op accepts. */
export interface AttentionOptions {
  /** Counts elements transferred (added to, not reset). */
  stats?: AttentionStats;
}

/** Options of attentionPrefill: the common ones, and H2O's scores to seed from the same weights. */
export interface PrefillOptions extends AttentionOptions {
  /**
   * Also adds the prefill's attention weights to these scores, exactly as h2oSeed(h2o, q, cache,
   * seq) after the call would; a backend may compute both from one pass over K.
   */
  h2o?: H2OState;
}

/** Options of the SparQ attention op: the common ones, and a trace of its selection (i1, i2, alpha, tau). */
export interface SparqOptions extends AttentionOptions {
  /** Records i1, i2, alpha and tau. */
  trace?: SparqTrace;
}
