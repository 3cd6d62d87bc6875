/**
 * The attention ops of the native backend: KV-cache append, dense decode and
 * prefill, SparQ and the baselines (spec.md §1-4), bound to bind_attention.cc.
 * The cache's typed arrays go to C++ as they are (zero-copy); the kernels count
 * the elements they read into a small Float64Array that is added to the
 * caller's AttentionStats (the same counts the reference reports).
 * Threads: SPARQ_THREADS, else every core; see `nativeAttention.setThreads`.
 */
import type {
  AttentionOptions,
  AttentionStats,
  BackendOps,
  BudgetParams,
  H2OState,
  KVCache,
  PrefillOptions,
  SparqOptions,
  SparqParams,
  Tensor,
} from '@sparq/core';
import type { NativeAddon } from './addon.ts';

/** The addon functions of bind_attention.cc (argument order as there). */
export interface AttentionAddon {
  attnKvAppend(cache: KVCache, seq: number, k: Float32Array, v: Float32Array, nTokens: number): void;
  attnDecode(cache: KVCache, q: Float32Array, out: Float32Array, nHeads: number, stats?: Float64Array | null): void;
  attnPrefill(
    cache: KVCache,
    seq: number,
    q: Float32Array,
    out: Float32Array,
    nTokens: number,
    nHeads: number,
    stats?: Float64Array | null,
    acc?: Float32Array,
  ): void;
  attnSparq(
    cache: KVCache,
    q: Float32Array,
    out: Float32Array,
    nHeads: number,
    r: number,
    k: number,
    l: number,
    reallocate: boolean,
    stats?: Float64Array | null,
    trace?: object | null,
  ): void;
  attnTopk(
    cache: KVCache,
    q: Float32Array,
    out: Float32Array,
    nHeads: number,
    k: number,
    stats?: Float64Array | null,
  ): void;
  attnLmInfinite(
    cache: KVCache,
    q: Float32Array,
    out: Float32Array,
    nHeads: number,
    k: number,
    stats?: Float64Array | null,
  ): void;
  attnH2O(
    cache: KVCache,
    q: Float32Array,
    out: Float32Array,
    nHeads: number,
    k: number,
    acc: Float32Array,
    evicted: Uint8Array,
    stats?: Float64Array | null,
  ): void;
  attnH2OSeed(
    cache: KVCache,
    seq: number,
    q: Float32Array,
    q2: Float32Array,
    nTokens: number,
    nHeads: number,
    acc: Float32Array,
  ): void;
  attnThreads(): number;
  attnSetThreads(n: number): number;
  attnKernel(): string;
  /** Sums x with every pool thread: the streaming read the benchmark measures bandwidth with. */
  attnReadSum(x: Float32Array): number;
  /**
   * Tests: scores (g, n) = q (g, d) · K^T, unscaled, over n consecutive q8_0 / q4_0 rows k, in integers as
   * the attention ops score them on the current kernel path (src/attention_int8_simd.h); returns the path's name.
   */
  attnKeyScores(
    dtype: 'q8_0' | 'q4_0',
    k: Uint8Array,
    d: number,
    n: number,
    q: Float32Array,
    g: number,
    scores: Float32Array,
  ): string;
}

/** The addon's attention functions (NativeAddon has them all; kept for callers that want only these). */
export function attentionAddon(addon: NativeAddon): AttentionAddon {
  return addon;
}

/** The view of a tensor's elements the addon reads: contiguous (core validated it) from its offset. */
function view(t: Tensor<'f32'>): Float32Array {
  return t.offset === 0 && t.data.length === t.size ? t.data : t.data.subarray(t.offset, t.offset + t.size);
}

/** Runs `call` with a counts buffer when stats are wanted, then adds the counts (one call). */
function counted(stats: AttentionStats | undefined, call: (counts: Float64Array | null) => void): void {
  if (!stats) {
    call(null);
    return;
  }
  const counts = new Float64Array(4);
  call(counts);
  stats.kElements += counts[0];
  stats.vElements += counts[1];
  stats.auxElements += counts[2];
  stats.ioElements += counts[3];
  stats.calls++;
}

/** KV-cache append, dense attention, SparQ and the baselines, bound to the addon. */
export function attentionOps(addon: NativeAddon): Partial<BackendOps> {
  const a = attentionAddon(addon);
  return {
    kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void {
      a.attnKvAppend(cache, seq, view(k), view(v), k.shape[0]);
    },
    attentionDecode(out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, options?: AttentionOptions): void {
      counted(options?.stats, (s) => a.attnDecode(cache, view(q), view(out), q.shape[1], s));
    },
    attentionPrefill(
      out: Tensor<'f32'>,
      q: Tensor<'f32'>,
      cache: KVCache,
      seq: number,
      options?: PrefillOptions,
    ): void {
      counted(options?.stats, (s) =>
        a.attnPrefill(cache, seq, view(q), view(out), q.shape[0], q.shape[1], s, options?.h2o?.acc),
      );
    },
    sparqDecode(
      out: Tensor<'f32'>,
      q: Tensor<'f32'>,
      cache: KVCache,
      params: SparqParams,
      options?: SparqOptions,
    ): void {
      counted(options?.stats, (s) =>
        a.attnSparq(
          cache,
          view(q),
          view(out),
          q.shape[1],
          params.r,
          params.k,
          params.l ?? 0,
          params.reallocate ?? true,
          s,
          options?.trace ?? null,
        ),
      );
    },
    topkDecode(
      out: Tensor<'f32'>,
      q: Tensor<'f32'>,
      cache: KVCache,
      params: BudgetParams,
      options?: AttentionOptions,
    ): void {
      counted(options?.stats, (s) => a.attnTopk(cache, view(q), view(out), q.shape[1], params.k, s));
    },
    h2oDecode(
      out: Tensor<'f32'>,
      q: Tensor<'f32'>,
      cache: KVCache,
      state: H2OState,
      params: BudgetParams,
      options?: AttentionOptions,
    ): void {
      counted(options?.stats, (s) =>
        a.attnH2O(cache, view(q), view(out), q.shape[1], params.k, state.acc, state.evicted, s),
      );
    },
    h2oSeed(state: H2OState, q: Tensor<'f32'>, cache: KVCache, seq: number): void {
      a.attnH2OSeed(cache, seq, view(q), view(q), q.shape[0], q.shape[1], state.acc);
    },
    lmInfiniteDecode(
      out: Tensor<'f32'>,
      q: Tensor<'f32'>,
      cache: KVCache,
      params: BudgetParams,
      options?: AttentionOptions,
    ): void {
      counted(options?.stats, (s) => a.attnLmInfinite(cache, view(q), view(out), q.shape[1], params.k, s));
    },
  };
}
