/**
 * Decode-time attention by method (prefill is always dense), its parameters
 * and their defaults, and the SPEC section 3 cost model used to report the
 * compression ratio against dense attention.
 *
 *   dense   engine.attentionDecode       2*S*d + 2*d       elements per KV head and step
 *   sparq   engine.sparqDecode           S*r + 2*k'*d + 4*d (2*d less without reallocation)
 *   oracle  engine.topkDecode            S*d + k'*d + 2*d   (FlexGen's reads)
 *   h2o     engine.h2oDecode             2*k'*d + 2*d + 2*S
 *   lminf   engine.lmInfiniteDecode      2*k'*d + 2*d
 * with S the valid positions and k' = min(k, S) (a budget larger than the
 * cache reads the cache, no more).
 */
import type { AttentionMethod, AttentionStats, Engine, H2OState, KVCache, Tensor } from '@sparq/core';

export const ATTENTION_METHODS: readonly AttentionMethod[] = ['dense', 'sparq', 'h2o', 'lminf', 'oracle'];

export interface AttentionConfig {
  method: AttentionMethod;
  /** SparQ query components, 1..headDim. */
  r: number;
  /** Positions kept (SparQ, oracle, H2O, LM-Infinite). */
  k: number;
  /** SparQ local window. */
  l: number;
  /** SparQ interpolation with the mean value. */
  reallocate: boolean;
}

/** Defaults sized to the model: r = ceil(d/4), k = max(16, floor(context/8)), l = floor(k/4). */
export function defaultAttention(method: AttentionMethod, headDim: number, context: number): AttentionConfig {
  const k = Math.max(16, Math.floor(context / 8));
  return { method, r: Math.ceil(headDim / 4), k, l: Math.floor(k / 4), reallocate: true };
}

/** One decode step of layer attention: q, out (1, n_heads, head_dim). `h2o` is the layer's H2O state. */
export function decodeAttention(engine: Engine, a: AttentionConfig, out: Tensor<'f32'>, q: Tensor<'f32'>, cache: KVCache, h2o: H2OState | null, stats: AttentionStats): void {
  const options = { stats };
  switch (a.method) {
    case 'dense':
      return engine.attentionDecode(out, q, cache, options);
    case 'sparq':
      return engine.sparqDecode(out, q, cache, { r: a.r, k: a.k, l: a.l, reallocate: a.reallocate }, options);
    case 'oracle':
      return engine.topkDecode(out, q, cache, { k: a.k }, options);
    case 'h2o':
      return engine.h2oDecode(out, q, cache, h2o!, { k: a.k }, options);
    case 'lminf':
      return engine.lmInfiniteDecode(out, q, cache, { k: a.k }, options);
  }
}

/** SPEC 3 elements transferred per KV head for one step over S valid positions of head dim d. */
export function attentionCost(a: AttentionConfig, S: number, d: number): number {
  const k = Math.min(a.k, S);
  switch (a.method) {
    case 'dense':
      return 2 * S * d + 2 * d;
    case 'sparq':
      return S * a.r + 2 * k * d + (a.reallocate ? 4 : 2) * d;
    case 'oracle':
      return S * d + k * d + 2 * d;
    case 'h2o':
      return 2 * k * d + 2 * d + 2 * S;
    case 'lminf':
      return 2 * k * d + 2 * d;
  }
}
