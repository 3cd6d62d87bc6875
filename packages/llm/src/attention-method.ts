/**
 * Decode-time attention by method (prefill is always dense), its parameters
 * and their defaults, and the spec.md §3 cost model used to report the
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
import {
  SparqRangeError,
  type AttentionMethod,
  type AttentionStats,
  type Engine,
  type H2OState,
  type KVCache,
  type Tensor,
} from '@sparq/core';

/** The decode attention methods, the `attention.method` choices. */
export const ATTENTION_METHODS: readonly AttentionMethod[] = ['dense', 'sparq', 'h2o', 'lminf', 'oracle'];

/** A decode attention method with every budget set (`defaultAttention` fills the ones left out). */
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

/** A method's parameters (every field but the method). */
export type AttentionParameter = Exclude<keyof AttentionConfig, 'method'>;

/** The parameters each method reads. Giving one the method does not read is an error: it would change nothing. */
export const ATTENTION_PARAMETERS: Readonly<Record<AttentionMethod, readonly AttentionParameter[]>> = {
  dense: [],
  sparq: ['r', 'k', 'l', 'reallocate'],
  oracle: ['k'],
  h2o: ['k'],
  lminf: ['k'],
};

/**
 * `settings` completed with defaultAttention's values for a head dim and a
 * context, and checked: the method is one of ATTENTION_METHODS, r in
 * [1, headDim], k >= 1, l >= 0, and no parameter is given (defined) that the
 * method does not read. `name` spells a field in the messages (the CLI passes
 * its flags: `--r`), so the library and the CLI check alike and say the same.
 */
export function resolveAttention(
  settings: Partial<AttentionConfig>,
  headDim: number,
  context: number,
  name: (field: keyof AttentionConfig) => string = (f) => `attention.${f}`,
): AttentionConfig {
  if (typeof settings !== 'object' || settings === null)
    throw new SparqRangeError(
      `${name('method').replace(/\.method$/, '')} ${String(settings)}, expected an object such as { method: 'sparq', r: 8 }`,
    );
  const unknown = Object.keys(settings).find((key) => !['method', 'r', 'k', 'l', 'reallocate'].includes(key));
  if (unknown !== undefined)
    throw new SparqRangeError(
      `${name(unknown as keyof AttentionConfig)}: unknown attention setting, expected method, r, k, l or reallocate`,
    );
  const method = settings.method ?? 'dense';
  if (!ATTENTION_METHODS.includes(method))
    throw new SparqRangeError(`${name('method')} '${method}', expected one of ${ATTENTION_METHODS.join(', ')}`);
  for (const p of ['r', 'k', 'l', 'reallocate'] as const) {
    if (settings[p] === undefined || ATTENTION_PARAMETERS[method].includes(p)) continue;
    const readers = ATTENTION_METHODS.filter((m) => ATTENTION_PARAMETERS[m].includes(p));
    // A flag that is its own value (--no-reallocate) is named alone.
    const given = typeof settings[p] === 'boolean' && name(p).startsWith('--') ? name(p) : `${name(p)} ${settings[p]}`;
    throw new SparqRangeError(
      `${given}: attention ${method} does not read it (only ${readers.join(', ')} ${readers.length === 1 ? 'does' : 'do'})`,
    );
  }
  const d = defaultAttention(method, headDim, context);
  const k = settings.k ?? d.k;
  const a: AttentionConfig = {
    method,
    r: settings.r ?? d.r,
    k,
    l: settings.l ?? Math.floor(k / 4),
    reallocate: settings.reallocate ?? d.reallocate,
  };
  const int = (v: number, min: number, max: number) => Number.isInteger(v) && v >= min && v <= max;
  if (!int(a.r, 1, headDim))
    throw new SparqRangeError(`${name('r')} ${a.r}, expected an integer in [1, ${headDim}] (the head dim)`);
  if (!int(a.k, 1, Number.MAX_SAFE_INTEGER)) throw new SparqRangeError(`${name('k')} ${a.k}, expected an integer >= 1`);
  if (!int(a.l, 0, Number.MAX_SAFE_INTEGER)) throw new SparqRangeError(`${name('l')} ${a.l}, expected an integer >= 0`);
  if (typeof a.reallocate !== 'boolean')
    throw new SparqRangeError(`${name('reallocate')} ${String(a.reallocate)}, expected true or false`);
  return a;
}

/** Defaults sized to the model: r = ceil(d/4), k = max(16, floor(context/8)), l = floor(k/4). */
export function defaultAttention(method: AttentionMethod, headDim: number, context: number): AttentionConfig {
  const k = Math.max(16, Math.floor(context / 8));
  return { method, r: Math.ceil(headDim / 4), k, l: Math.floor(k / 4), reallocate: true };
}

/** One decode step of layer attention: q, out (1, n_heads, head_dim). `h2o` is the layer's H2O state. */
export function decodeAttention(
  engine: Engine,
  a: AttentionConfig,
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  h2o: H2OState | null,
  stats: AttentionStats,
): void {
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

/** spec.md §3 elements transferred per KV head for one step over S valid positions of head dim d. */
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
