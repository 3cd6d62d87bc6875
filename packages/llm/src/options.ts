/**
 * The settings a user chooses, one name each, their defaults in one place, and
 * the checks every entry point runs: loadModel / openModel, createSession, a
 * TextSession, generate(), Chat and createChat in the library, and the CLI's
 * flags of the same meaning. The checks and their words are shared; only the
 * name differs (`kv` in the library, `--kv` on the command line).
 *
 *   name          default                                     CLI flag        older names (deprecated)
 *   weights       as the file stores them                     --weights
 *   kv            'f16' (DEFAULT_KV_DTYPE); a type for K and  --kv            kvDType
 *                 V, or { k, v } (checkKv)                    TYPE or K/V (parseKvFlag)
 *   kvLayout      'k-twice' for SparQ, else 'single-k'        --kv-layout
 *   productPath   'int8' (DEFAULT_PRODUCT_PATH)               --product
 *   contextSize   the model's seq_len, at most 2048           --ctx, -n       context, capacity (Session)
 *                 (DEFAULT_CONTEXT_CAP; the CLI: -n's positions)
 *   prefillChunk  512 (DEFAULT_PREFILL_CHUNK)                                 maxPrefill (Session)
 *   temperature   1 (DEFAULT_TEMPERATURE; `sparq chat`: 0.8)  --temperature
 *   topP          0.9 (DEFAULT_TOP_P)                         --top-p         topp
 *   seed          random (the CLI: the time in seconds)       --seed
 *   attention     dense (attention-method.ts)                 --attention, --r, --k, --l, --no-reallocate
 */
import {
  KT_DTYPES,
  KV_DTYPES,
  KV_LAYOUTS,
  SparqRangeError,
  kvChoice,
  type KVDType,
  type KVTypeChoice,
  type ProductPath,
} from '@sparq/core';

/**
 * f16 KV by default: half the cache memory and half the attention reads. Measured with
 * bench/kv-accuracy.ts on stories260K (200 greedy steps, teacher-forced): logits move by at
 * most 0.02 (dense) / 0.11 (SparQ) on a range of about 40, and the greedy tokens are unchanged.
 */
export const DEFAULT_KV_DTYPE: KVDType = 'f16';

/**
 * How the runtime multiplies by quantized weights unless told otherwise: 'int8', for ggml blocks and
 * group-wise INT4 alike. It is what llama.cpp does (its quantized matmuls quantize the activations
 * to 8-bit blocks) and Neural Speed's INT4 compute path; the integer kernels are native's fast ones
 * (`pnpm bench:matvec` re-measures them); and it costs little accuracy: on stories260K it keeps
 * about as many teacher-forced tokens as 'dequant' (test/llm/quantized.spec.ts), and our logits stay
 * about as close to llama.cpp's as with f32 activations (test/llm/llama-cpp.spec.ts, families.spec.ts).
 * 'dequant' stays one option away for f32 activations; `sparq eval` keeps it so that its documented
 * results (docs/eval) reproduce. Float weights take the f32 product on either path.
 */
export const DEFAULT_PRODUCT_PATH: ProductPath = 'int8';

/** Prompt tokens forwarded in one step unless a session says otherwise. */
export const DEFAULT_PREFILL_CHUNK = 512;

/** The context a library session gets unless it asks: the model's, capped so the KV cache stays modest. */
export const DEFAULT_CONTEXT_CAP = 2048;

/** Sampling temperature unless given (0 is greedy). */
export const DEFAULT_TEMPERATURE = 1;

/** Nucleus sampling threshold unless given. */
export const DEFAULT_TOP_P = 0.9;

/** The KV row types and layouts are core's (kv-cache.ts); re-exported here beside the other choices. */
export { KT_DTYPES, KV_DTYPES, KV_LAYOUTS } from '@sparq/core';
/** The `productPath` choices: dequantize weights to f32, or multiply in int8 blocks. */
export const PRODUCT_PATHS: readonly ProductPath[] = ['dequant', 'int8'];

/** `value` when it is one of `allowed`, else SparqRangeError: `<name> <value>, expected one of a, b` (or `expected`). */
export function checkChoice<T extends string>(
  name: string,
  value: unknown,
  allowed: readonly T[],
  expected = `one of ${allowed.join(', ')}`,
): T {
  if (!(allowed as readonly unknown[]).includes(value))
    throw new SparqRangeError(`${name} ${String(value)}, expected ${expected}`);
  return value as T;
}

/**
 * The `kv` option: one row type for K and V ('q8_0'), or `{ k, v }` each its own (llama.cpp's
 * `-ctk q8_0 -ctv q4_0`: 4-bit keys cost far more accuracy than 4-bit values, docs/kv-cache.md).
 * Returns the canonical form (one type when k and v agree), else SparqRangeError naming the field:
 * `<name> q8, expected one of f32, f16, q8_0, q4_0, or { k, v } of them`, `<name>.v q5, expected ...`.
 */
export function checkKv(name: string, value: unknown): KVTypeChoice {
  const expected = `${KV_DTYPES.join(', ')}, or { k, v } of them`;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const extra = keys.find((key) => key !== 'k' && key !== 'v');
    if (extra !== undefined || keys.length !== 2)
      throw new SparqRangeError(
        `${name} ${JSON.stringify(value)}, expected one of ${KV_DTYPES.join(', ')}, or { k, v } with both fields`,
      );
    const { k, v } = value as { k: unknown; v: unknown };
    return kvChoice(
      checkChoice(`${name}.k`, k, KV_DTYPES, `one of ${expected}`),
      checkChoice(`${name}.v`, v, KV_DTYPES, `one of ${expected}`),
    );
  }
  return checkChoice(name, value, KV_DTYPES, `one of ${expected}`);
}

/**
 * A `--kv` flag's text: 'q8_0' (K and V) or 'q8_0/q4_0' (K's type, then V's), each part checked
 * against KV_DTYPES: `--kv q8_0/q5: the V type q5, expected one of f32, f16, q8_0, q4_0`.
 */
export function parseKvFlag(name: string, text: string): KVTypeChoice {
  const parts = text.split('/');
  if (parts.length === 1) return checkChoice(name, text, KV_DTYPES, `one of ${KV_DTYPES.join(', ')}, or K/V of them`);
  if (parts.length !== 2)
    throw new SparqRangeError(`${name} ${text}, expected TYPE or K/V, each of ${KV_DTYPES.join(', ')}`);
  const [k, v] = parts.map((part, i) =>
    checkChoice(`${name} ${text}: the ${i === 0 ? 'K' : 'V'} type`, part, KV_DTYPES),
  );
  return kvChoice(k, v);
}

/**
 * The cache and product choices a model, a session, Chat and generate() share, each checked when
 * given: `<where>: kv q8, expected one of f32, f16, q8_0, q4_0, ...` (the CLI: `--kv q8, expected ...`).
 */
export function checkCacheChoices(
  where: string,
  o: { kv?: unknown; kt?: unknown; kvLayout?: unknown; productPath?: unknown },
): void {
  if (o.kv !== undefined) checkKv(`${where}: kv`, o.kv);
  if (o.kt !== undefined) checkChoice(`${where}: kt`, o.kt, KT_DTYPES);
  if (o.kvLayout !== undefined) checkChoice(`${where}: kvLayout`, o.kvLayout, KV_LAYOUTS);
  if (o.productPath !== undefined) checkChoice(`${where}: productPath`, o.productPath, PRODUCT_PATHS);
}

/** A check of a number: what it accepts and how a message says so. */
export interface NumberCheck {
  ok: (n: number) => boolean;
  /** "a number >= 0": the end of the message. */
  expected: string;
  /** Written as a decimal integer on the command line. */
  integer?: boolean;
}

/** The number checks shared by the library's options and the CLI's flags. */
export const CHECKS = {
  temperature: { ok: (t) => Number.isFinite(t) && t >= 0, expected: 'a finite number >= 0' },
  topP: { ok: (p) => Number.isFinite(p), expected: 'a finite number (0..1)' },
  // Seeds stay below 2^53 so the same seed means the same thing as a JS number (no wrap-around).
  seed: {
    ok: (s) => Number.isSafeInteger(s) && s >= 0,
    expected: `an integer in [0, ${Number.MAX_SAFE_INTEGER}] (below 2^53)`,
    integer: true,
  },
  prefillChunk: { ok: (n) => Number.isSafeInteger(n) && n >= 1, expected: 'an integer >= 1', integer: true },
  maxTokens: {
    ok: (n) => n === Infinity || (Number.isSafeInteger(n) && n >= 0),
    expected: 'an integer >= 0',
    integer: true,
  },
} satisfies Record<string, NumberCheck>;

/** A context size's check: an integer in [1, seqLen], the model's trained context. */
export function contextCheck(seqLen: number): NumberCheck {
  return {
    ok: (n) => Number.isSafeInteger(n) && n >= 1 && n <= seqLen,
    expected: `an integer in [1, ${seqLen}] (the model's trained context)`,
    integer: true,
  };
}

/** `value` when `check` accepts it, else SparqRangeError: `<name> <value>, expected ...`. */
export function checkNumber(name: string, value: unknown, check: NumberCheck): number {
  if (typeof value !== 'number' || !check.ok(value))
    throw new SparqRangeError(`${name} ${String(value)}, expected ${check.expected}`);
  return value;
}

/** A seed as the sampler takes it: a safe non-negative integer or a bigint below 2^64. */
export function checkSeed(name: string, seed: unknown): bigint | number {
  if (typeof seed === 'bigint' && seed >= 0n && seed < 1n << 64n) return seed;
  return checkNumber(name, seed, CHECKS.seed);
}

/** Throws SparqRangeError naming the first key of `options` that is not one of `known` (a mistyped option would otherwise do nothing). */
export function checkKeys(where: string, options: object, known: readonly string[]): void {
  const unknown = Object.keys(options).find((key) => !known.includes(key));
  if (unknown !== undefined)
    throw new SparqRangeError(`${where}: unknown option '${unknown}', expected one of ${known.join(', ')}`);
}

/**
 * The value of a setting that has a newer name and an older, deprecated one:
 * the newer wins; both given with different values is an error.
 */
export function renamed<T>(
  where: string,
  name: string,
  value: T | undefined,
  old: string,
  oldValue: T | undefined,
): T | undefined {
  if (value !== undefined && oldValue !== undefined && !sameSetting(value, oldValue))
    throw new SparqRangeError(
      `${where}: ${name} ${showSetting(value)} and ${old} ${showSetting(oldValue)} disagree; ${old} is the older name of ${name}, give ${name} only`,
    );
  return value ?? oldValue;
}

/** Equal settings: the same primitive, or plain objects with the same keys and values (`kv: { k, v }`). */
function sameSetting(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every(
      (key) => Object.hasOwn(b, key) && (a as Record<string, unknown>)[key] === (b as Record<string, unknown>)[key],
    )
  );
}

function showSetting(value: unknown): string {
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}
