/**
 * An Engine that remembers every attention query the model asks: the forward
 * pass calls attention once per layer per step (prefill rows or one decode
 * row), so the n-th call is layer n mod nLayers. The keys and values stay in
 * the session's KV cache (a position's K and V never change once written), so
 * a query and the cache's first position+1 rows replay any step afterwards.
 */
import {
  Engine,
  type AttentionOptions,
  type BudgetParams,
  type H2OState,
  type KVCache,
  type SparqOptions,
  type SparqParams,
  type Tensor,
} from '@sparq/core';

export interface QueryRecord {
  /** (nHeads * headDim) the query as attention receives it (after rotary positions). */
  q: Float32Array;
  /** True for a decode step (the run's attention method), false for a prefill row (dense). */
  decode: boolean;
}

export class ProbeEngine extends Engine {
  /** records[layer].get(position): the query at that position. */
  readonly records: Map<number, QueryRecord>[] = [];
  private calls = 0;
  private readonly nLayers: number;

  constructor(base: Engine, nLayers: number) {
    super(base.backend);
    this.nLayers = nLayers;
    for (let l = 0; l < nLayers; l++) this.records.push(new Map());
  }

  /** Forgets every record (a new run). */
  clear(): void {
    for (const r of this.records) r.clear();
    this.calls = 0;
  }

  /** q (rows, nHeads, headDim): row i is position nPast - rows + i of sequence 0. */
  private record(q: Tensor<'f32'>, cache: KVCache, decode: boolean): void {
    const layer = this.calls++ % this.nLayers;
    const [rows, nHeads, d] = q.shape;
    const flat = Float32Array.from(q.toArray()); // (rows, nHeads, d) whatever the strides
    const first = cache.nPast[0] - rows;
    for (let i = 0; i < rows; i++)
      this.records[layer].set(first + i, { q: flat.slice(i * nHeads * d, (i + 1) * nHeads * d), decode });
  }

  override attentionPrefill(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    seq: number,
    options?: AttentionOptions,
  ): void {
    super.attentionPrefill(out, q, cache, seq, options);
    this.record(q, cache, false);
  }

  override attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void {
    this.record(q, cache, true);
    super.attentionDecode(out, q, cache, options);
  }

  override sparqDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: SparqParams,
    options?: SparqOptions,
  ): void {
    this.record(q, cache, true);
    super.sparqDecode(out, q, cache, params, options);
  }

  override topkDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    this.record(q, cache, true);
    super.topkDecode(out, q, cache, params, options);
  }

  override h2oDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    state: H2OState,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    this.record(q, cache, true);
    super.h2oDecode(out, q, cache, state, params, options);
  }

  override lmInfiniteDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: BudgetParams,
    options?: AttentionOptions,
  ): void {
    this.record(q, cache, true);
    super.lmInfiniteDecode(out, q, cache, params, options);
  }
}
