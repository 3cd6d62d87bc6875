/**
 * The flags `generate` and `chat` share: the model, its context, sampling,
 * decode attention, weight and KV types; parsed into the options the
 * library takes, each bad value a UsageError naming the flag.
 */
import {
  KT_DTYPES,
  type AttentionMethod,
  type ProductPath,
  type KTDType,
  type KVLayout,
  type KVTypeChoice,
} from '@sparq/core';
import { CHECKS, contextCheck, parseKvFlag } from '@sparq/llm/options';
import {
  ATTENTION_METHODS,
  DEFAULT_KV_DTYPE,
  DEFAULT_SESSION_KT,
  DEFAULT_PRODUCT_PATH,
  DEFAULT_TOP_P,
  KV_LAYOUTS,
  PRODUCT_PATHS,
  WEIGHT_TYPES,
  resolveAttention,
  type AttentionConfig,
  type AttentionSettings,
  type WeightType,
} from '@sparq/llm';
import { asUsage, choice, isInt, number } from './flags.ts';

/** The decode-attention and cache flags every command that runs a model takes (eval included). */
export const ATTENTION_FLAGS = {
  attention: { type: 'string' },
  r: { type: 'string' },
  k: { type: 'string' },
  l: { type: 'string' },
  'no-reallocate': { type: 'boolean' },
  weights: { type: 'string' },
  kv: { type: 'string' },
  kt: { type: 'string' },
} as const;

export const RUN_FLAGS = {
  model: { type: 'string' },
  tokenizer: { type: 'string' },
  ctx: { type: 'string' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string' },
  ...ATTENTION_FLAGS,
  product: { type: 'string' },
  'kv-layout': { type: 'string' },
  'check-tensors': { type: 'boolean' },
} as const;

type Values = { [K in keyof typeof RUN_FLAGS]?: (typeof RUN_FLAGS)[K]['type'] extends 'boolean' ? boolean : string };

/** Sampling flags, checked as the library checks the options of the same meaning (options.ts's CHECKS). */
export function sampling(
  values: Values,
  defaultTemperature: number,
): { temperature: number; topP: number; seed: bigint; seedGiven: boolean } {
  const temperature = number('temperature', values.temperature, defaultTemperature, CHECKS.temperature);
  const topP = number('top-p', values['top-p'], DEFAULT_TOP_P, CHECKS.topP);
  const given = number('seed', values.seed, 0, CHECKS.seed);
  const seedGiven = given > 0;
  const seed = BigInt(seedGiven ? given : Math.floor(Date.now() / 1000));
  return { temperature, topP, seed, seedGiven };
}

/** --ctx: the context size, up to the model's trained context (the default). */
export function contextFlag(values: Values, seqLen: number): number {
  return number('ctx', values.ctx, seqLen, contextCheck(seqLen));
}

/** The attention flags given, as the library's settings (absent flags left out, so the library's defaults apply). */
export function attentionSettings(values: Values): AttentionSettings {
  const int = (flag: 'r' | 'k' | 'l') =>
    values[flag] === undefined
      ? undefined
      : number(flag, values[flag], 0, isInt(Number.MIN_SAFE_INTEGER), 'an integer');
  const settings: AttentionSettings = {
    method: choice<AttentionMethod>('attention', values.attention, ATTENTION_METHODS, 'dense'),
    r: int('r'),
    k: int('k'),
    l: int('l'),
    reallocate: values['no-reallocate'] ? false : undefined,
  };
  return Object.fromEntries(Object.entries(settings).filter(([, v]) => v !== undefined)) as AttentionSettings;
}

/** The flag that sets each attention field, for messages. */
const ATTENTION_FLAG = (field: keyof AttentionConfig) =>
  field === 'method' ? '--attention' : field === 'reallocate' ? '--no-reallocate' : `--${field}`;

/**
 * Decode attention for a model of head dim `headDim` over `context` positions:
 * the library's resolveAttention on the flags (its checks, in flag names), a
 * bad value or a flag the method does not read a UsageError.
 */
export function attention(values: Values, headDim: number, context: number): AttentionConfig {
  return asUsage(() => resolveAttention(attentionSettings(values), headDim, context, ATTENTION_FLAG));
}

/** --kv TYPE or --kv K/V (options.ts's parseKvFlag), DEFAULT_KV_DTYPE when absent; a bad value a UsageError. */
export function kvFlag(raw: string | undefined): KVTypeChoice {
  return raw === undefined ? DEFAULT_KV_DTYPE : asUsage(() => parseKvFlag('--kv', raw));
}

/**
 * Weight conversion on load, product path for quantized weights, KV element types (one, or K/V),
 * transposed-K type (undefined: DEFAULT_SESSION_KT of the K type) and layout (undefined: the method's default), whether
 * to check the weights at load; the library's names, choices and defaults (options.ts).
 */
export function storage(values: Values): {
  weights: WeightType | undefined;
  productPath: ProductPath;
  kv: KVTypeChoice;
  kt: KTDType | undefined;
  kvLayout: KVLayout | undefined;
  checkTensors: boolean;
} {
  return {
    checkTensors: values['check-tensors'] === true,
    weights:
      values.weights === undefined ? undefined : choice<WeightType>('weights', values.weights, WEIGHT_TYPES, 'f32'),
    productPath: choice<ProductPath>('product', values.product, PRODUCT_PATHS, DEFAULT_PRODUCT_PATH),
    kv: kvFlag(values.kv),
    kt: values.kt === undefined ? undefined : choice<KTDType>('kt', values.kt, KT_DTYPES, 'f16'),
    kvLayout:
      values['kv-layout'] === undefined
        ? undefined
        : choice<KVLayout>('kv-layout', values['kv-layout'], KV_LAYOUTS, 'k-twice'),
  };
}

/** " r=.. k=.. l=.." for summaries. */
export function describeAttention(a: AttentionConfig): string {
  if (a.method === 'dense') return '';
  return a.method === 'sparq' ? ` r=${a.r} k=${a.k} l=${a.l}${a.reallocate ? '' : ' no-reallocate'}` : ` k=${a.k}`;
}

/** Usage lines of RUN_FLAGS. */
export const runUsage = (
  defaultTemperature: number,
) => `  --model FILE        llama2.c checkpoint (.bin) or GGUF v3 model (llama, qwen2, qwen3)
  --tokenizer FILE    llama2.c tokenizer; default: the GGUF's own, else tok<vocab>.bin
                      or tokenizer.bin next to the model
  --ctx N             context size (KV positions), up to the model's trained context (the default)
  --temperature T     default ${defaultTemperature}; 0 = greedy
  --top-p P           nucleus sampling, default 0.9 (<= 0 or >= 1: full distribution)
  --seed S            xorshift seed as in run.c; default (or 0): the time in seconds
  --attention METHOD  decode attention, default dense; prefill is always dense
  --r R               SparQ query components, default ceil(head_dim / 4)
  --k K               positions kept (sparq, oracle, h2o, lminf), default max(16, floor(ctx / 8))
  --l L               SparQ local window, default floor(k / 4)
  --no-reallocate     SparQ without the mean-value interpolation
  --weights TYPE      convert matrices on load: f32, q4_0 (ggml) or int4 (group 32);
                      default: as the file stores them
  --product PATH      products with quantized weights (ggml blocks, int4): int8 (default;
                      activations rounded to 8 bits per 32-element block or INT4 group,
                      integer dot products, as llama.cpp) or dequant (weights to f32)
  --kv TYPE | K/V     KV cache element type: f16 (default), f32, q8_0 or q4_0 (ggml blocks;
                      the head dim must be a multiple of 32); K/V sets K's and V's apart,
                      e.g. q8_0/q4_0 (llama.cpp's -ctk q8_0 -ctv q4_0: 4-bit keys cost far
                      more accuracy than 4-bit values, docs/kv-cache.md)
  --kt TYPE           SparQ's transposed key copy (k-twice): f32 (f32 K only), f16, i8, i4
                      or i2 (codes with a scale per 64 positions); default per K type:
                      f32 ${DEFAULT_SESSION_KT.f32}, f16 ${DEFAULT_SESSION_KT.f16}, q8_0 ${DEFAULT_SESSION_KT.q8_0}, q4_0 ${DEFAULT_SESSION_KT.q4_0} (docs/kv-cache.md)
  --kv-layout L       k-twice (keys also transposed: SparQ's default) or single-k
                      (keys once, 2/3 of the memory; the other methods' default)
  --check-tensors     check every weight and quantization scale is finite at load`;
