/**
 * The Llama-family architectures in GGUF (llama, qwen2, qwen3), both ways:
 * config <-> metadata keys (<arch>.*), weights <-> llama.cpp's tensor names.
 * Every key that would change the computation is either implemented or
 * refused by name; so is every tensor. The tokenizer's keys
 * (tokenizer.ggml.*) live in gguf-tokenizer.ts.
 *
 * RoPE layout. This engine rotates adjacent pairs (2i, 2i+1), as llama2.c
 * does. llama.cpp's llama architecture does too (its rope type NORM): its HF
 * converter permutes Q/K rows back from Hugging Face's rotate-half order into
 * exactly this layout. So wq/wk are stored as llama2.c has them and read
 * without any permutation. Files written here carry `sparq.rope_layout =
 * "adjacent"` to say so; files without the key are taken to follow
 * llama.cpp's convention (the same layout); any other value is refused.
 */
import { Tensor, bf16ToF32, f16ToF32, type Engine } from '@sparq/core';
import { ByteReader } from './byte-reader.ts';
import { makeConfig, type ConfigExtra, type ConfigFields, type ModelConfig } from './config.ts';
import { ARCHITECTURES, FAMILIES, isArchitecture } from './family.ts';
import { gguf, type GGUFValue } from './gguf-format.ts';
import { GGUFKeys } from './gguf-keys.ts';
import { ggufTensor, type GGUFFile } from './gguf-read.ts';
import { tokenizerMetadata } from './gguf-tokenizer.ts';
import type { LoadedModel } from './llama2c.ts';
import { NO_ROPE_SCALING, ROPE_SCALING_TYPES, type RopeScaling, type RopeScalingType } from './rope-scaling.ts';
import { LAYER_TENSORS, OUTPUT, ROPE_FREQS, TOKEN_EMBD, expectedTensors, extraLayerName } from './tensor-names.ts';
import type { Tokenizer } from './tokenizer.ts';

export const ROPE_LAYOUT_KEY = 'sparq.rope_layout';

/** llama.cpp's general.file_type (its llama_ftype) for a file mostly of this type; K-quants as their _S variants. */
const FILE_TYPE: Record<string, number> = {
  f32: 0,
  f16: 1,
  q4_0: 2,
  q4_1: 3,
  q8_0: 7,
  q5_0: 8,
  q5_1: 9,
  q2_k: 10,
  q3_k: 11,
  q4_k: 14,
  q5_k: 16,
  q6_k: 18,
  iq4_nl: 25,
  iq4_xs: 30,
  bf16: 32,
};

/** Metadata for a Llama-family model and its tokenizer, in llama.cpp's keys (`<arch>.*`). */
export function llamaMetadata(
  c: ModelConfig,
  tokenizer: Tokenizer | null,
  options: { name?: string; fileType?: string } = {},
): [string, GGUFValue][] {
  const a = c.arch;
  const m: [string, GGUFValue][] = [
    ['general.architecture', gguf.string(a)],
    ['general.name', gguf.string(options.name ?? a)],
    ['general.alignment', gguf.u32(32)],
    ['general.file_type', gguf.u32(FILE_TYPE[options.fileType ?? 'f32'] ?? 0)],
    [`${a}.context_length`, gguf.u32(c.seqLen)],
    [`${a}.embedding_length`, gguf.u32(c.dim)],
    [`${a}.block_count`, gguf.u32(c.nLayers)],
    [`${a}.feed_forward_length`, gguf.u32(c.hiddenDim)],
    [`${a}.attention.head_count`, gguf.u32(c.nHeads)],
    [`${a}.attention.head_count_kv`, gguf.u32(c.nKvHeads)],
    [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(c.normEps)],
    [`${a}.rope.freq_base`, gguf.f32(c.ropeTheta)],
    [`${a}.rope.dimension_count`, gguf.u32(c.headDim)],
    [`${a}.vocab_size`, gguf.u32(c.vocabSize)],
  ];
  if (c.qDim !== c.dim)
    m.push([`${a}.attention.key_length`, gguf.u32(c.headDim)], [`${a}.attention.value_length`, gguf.u32(c.headDim)]);
  const s = c.ropeScaling;
  if (s.type !== 'none') {
    m.push([`${a}.rope.scaling.type`, gguf.string(s.type)], [`${a}.rope.scaling.factor`, gguf.f32(s.factor)]);
    if (s.type === 'yarn') m.push([`${a}.rope.scaling.original_context_length`, gguf.u32(s.originalContext)]);
  }
  if (s.attnFactor !== 1) m.push([`${a}.rope.scaling.attn_factor`, gguf.f32(s.attnFactor)]);
  if (a === 'llama') m.push([ROPE_LAYOUT_KEY, gguf.string('adjacent')]);
  if (tokenizer) m.push(...tokenizerMetadata(tokenizer));
  return m;
}

/**
 * Keys that change the computation in some model and that this engine does not implement: refused
 * when present with anything but their neutral value (the value that changes nothing).
 */
const UNSUPPORTED_KEYS: { suffix: string; neutral: (v: GGUFValue['value']) => boolean; what: string }[] = [
  {
    suffix: 'rope.scaling.yarn_log_multiplier',
    neutral: (v) => v === 0,
    what: 'YaRN log multiplier (attention temperature)',
  },
  {
    suffix: 'rope.scaling.yarn_ext_factor',
    neutral: (v) => v === -1 || v === 1,
    what: "YaRN extrapolation factor other than llama.cpp's 1",
  },
  { suffix: 'rope.scaling.yarn_attn_factor', neutral: (v) => v === 1, what: 'YaRN attention factor other than 1' },
  { suffix: 'rope.scaling.yarn_beta_fast', neutral: (v) => v === 32, what: 'YaRN beta_fast other than 32' },
  { suffix: 'rope.scaling.yarn_beta_slow', neutral: (v) => v === 1, what: 'YaRN beta_slow other than 1' },
  { suffix: 'rope.scaling.alpha', neutral: (v) => v === 0, what: 'NTK alpha scaling' },
  { suffix: 'rope.dimension_sections', neutral: () => false, what: 'multi-section RoPE' },
  { suffix: 'attention.scale', neutral: (v) => v === 0, what: 'a custom attention scale' },
  { suffix: 'attention.sliding_window', neutral: (v) => v === 0, what: 'sliding-window attention' },
  { suffix: 'attention.clamp_kqv', neutral: (v) => v === 0, what: 'clamped q/k/v' },
  { suffix: 'logit_scale', neutral: (v) => v === 1, what: 'a logit scale' },
  { suffix: 'embedding_scale', neutral: (v) => v === 1, what: 'an embedding scale' },
  { suffix: 'residual_scale', neutral: (v) => v === 1, what: 'a residual scale' },
  { suffix: 'expert_count', neutral: (v) => v === 0 || v === 0n, what: 'mixture of experts' },
];

/** Length of an array value, or undefined. */
function arrayLength(v: GGUFValue | undefined): number | undefined {
  return v?.type === 'array' ? v.value.values.length : undefined;
}

/** Hyperparameters of a Llama-family GGUF (`<arch>.*` keys), each failure naming its key. */
function configFromKeys(keys: GGUFKeys, byName: ReadonlyMap<string, { ne: readonly number[] }>): ModelConfig {
  const arch = keys.string('general.architecture');
  if (!isArchitecture(arch))
    keys.fail(
      'general.architecture',
      `${arch === undefined ? 'missing' : `"${arch}"`}, expected one of ${ARCHITECTURES.map((a) => `"${a}"`).join(', ')}`,
    );
  const k = (suffix: string) => `${arch}.${suffix}`;
  const layout = keys.string(ROPE_LAYOUT_KEY);
  if (layout !== undefined && (layout !== 'adjacent' || arch !== 'llama'))
    keys.fail(
      ROPE_LAYOUT_KEY,
      `"${layout}", only "adjacent" (llama2.c / llama.cpp NORM) with architecture llama is supported`,
    );
  for (const { suffix, neutral, what } of UNSUPPORTED_KEYS) {
    const v = keys.get(k(suffix));
    if (v !== undefined && !neutral(v.value)) keys.fail(k(suffix), `${String(v.value)}: ${what} is not implemented`);
  }
  const nHeads = keys.int(k('attention.head_count'));
  const fields: ConfigFields = {
    dim: keys.int(k('embedding_length')),
    hiddenDim: keys.int(k('feed_forward_length')),
    nLayers: keys.int(k('block_count')),
    nHeads,
    nKvHeads: keys.int(k('attention.head_count_kv'), nHeads),
    vocabSize: keys.int(
      k('vocab_size'),
      arrayLength(keys.get('tokenizer.ggml.tokens')) ?? byName.get(TOKEN_EMBD)?.ne[1] ?? 0,
    ),
    seqLen: keys.int(k('context_length')),
  };
  const keyLength = keys.get(k('attention.key_length')) === undefined ? undefined : keys.int(k('attention.key_length'));
  const valueLength =
    keys.get(k('attention.value_length')) === undefined ? keyLength : keys.int(k('attention.value_length'));
  if (valueLength !== keyLength)
    keys.fail(
      k('attention.value_length'),
      `${valueLength}, differs from ${k('attention.key_length')} ${keyLength}; only equal key and value head sizes are supported`,
    );
  const extra: ConfigExtra = {
    arch,
    normEps: keys.float(k('attention.layer_norm_rms_epsilon'), 1e-5),
    ropeTheta: keys.float(k('rope.freq_base'), 10000),
    ropeScaling: ropeScalingFromKeys(keys, k, fields.seqLen),
    sharedClassifier: !byName.has(OUTPUT),
    attnBias: byName.has(extraLayerName(0, 'bq')),
    ropeFreqs: FAMILIES[arch].ropeFreqs && byName.has(ROPE_FREQS),
    headDim: keyLength,
  };
  const keyOf: Record<string, string> = {
    dim: 'embedding_length',
    hiddenDim: 'feed_forward_length',
    nLayers: 'block_count',
    nHeads: 'attention.head_count',
    nKvHeads: 'attention.head_count_kv',
    vocabSize: 'vocab_size',
    seqLen: 'context_length',
    normEps: 'attention.layer_norm_rms_epsilon',
    ropeTheta: 'rope.freq_base',
    headDim: 'attention.key_length',
  };
  const config = makeConfig(fields, extra, (field, what) => keys.fail(k(keyOf[field]), what));
  const rot = keys.int(k('rope.dimension_count'), config.headDim);
  if (rot !== config.headDim)
    keys.fail(k('rope.dimension_count'), `${rot}, only full rotary (head dim ${config.headDim}) is supported`);
  return config;
}

/** The rope.scaling.* keys as llama.cpp reads them: a factor without a type means linear; longrope is not implemented. */
function ropeScalingFromKeys(keys: GGUFKeys, k: (suffix: string) => string, seqLen: number): RopeScaling {
  const type = keys.string(k('rope.scaling.type')) ?? 'linear';
  if (!(ROPE_SCALING_TYPES as readonly string[]).includes(type))
    keys.fail(
      k('rope.scaling.type'),
      `"${type}", expected one of ${ROPE_SCALING_TYPES.map((t) => `"${t}"`).join(', ')} (others are not implemented)`,
    );
  // llama.cpp: rope.scaling.factor, else the older rope.scale_linear; 0 means none.
  const factorKey =
    keys.get(k('rope.scaling.factor')) !== undefined ? k('rope.scaling.factor') : k('rope.scale_linear');
  const factor = keys.float(factorKey, 0) || 1;
  if (!(factor > 0 && Number.isFinite(factor))) keys.fail(factorKey, `${factor}, expected a finite value > 0`);
  const attnFactor = keys.float(k('rope.scaling.attn_factor'), 1);
  if (!(attnFactor > 0 && Number.isFinite(attnFactor)))
    keys.fail(k('rope.scaling.attn_factor'), `${attnFactor}, expected a finite value > 0`);
  const originalContext = keys.int(k('rope.scaling.original_context_length'), seqLen);
  if (originalContext < 1)
    keys.fail(k('rope.scaling.original_context_length'), `${originalContext}, expected an integer >= 1`);
  const scaling: RopeScaling = { type: type as RopeScalingType, factor, originalContext, attnFactor };
  return scaling.type !== 'none' && factor === 1 && attnFactor === 1 ? NO_ROPE_SCALING : scaling;
}

/** The config of a Llama-family GGUF file from its header (no tensor read). */
export function llamaConfigFromGGUF(f: GGUFFile, file: string): ModelConfig {
  return configFromKeys(new GGUFKeys(f, file), new Map(f.tensors.map((t) => [t.name, t])));
}

/** Config and tensors of a Llama-family GGUF file; vectors (norms, biases, rope_freqs) come back as f32. */
export function llamaFromGGUF(f: GGUFFile, file: string, engine?: Engine): LoadedModel {
  const keys = new GGUFKeys(f, file);
  const byName = new Map(f.tensors.map((t) => [t.name, t]));
  const config = configFromKeys(keys, byName);
  const r = new ByteReader(f.source, file);
  // Limits from the file before the list of expected tensors is built: each layer has its own tensors.
  const perLayer = Object.keys(LAYER_TENSORS).length;
  if (config.nLayers * perLayer > f.tensors.length)
    keys.fail(
      `${config.arch}.block_count`,
      `${config.nLayers} layers need ${config.nLayers * perLayer} tensors, the file holds ${f.tensors.length}`,
    );
  const tensors = new Map<string, Tensor>();
  for (const { name, shape } of expectedTensors(config)) {
    const info = byName.get(name);
    if (!info) throw r.error(`tensor "${name}"`, 'missing', f.dataOffset);
    const got = [...info.ne].reverse();
    if (got.length !== shape.length || got.some((n, i) => n !== shape[i])) {
      throw r.error(
        `tensor "${name}" ne`,
        `shape [${got.join(', ')}] (row-major), expected [${shape.join(', ')}] from the metadata`,
        info.infoOffset,
      );
    }
    const t = ggufTensor(info);
    // Vectors feed rmsnorm, bias adds and the rope table, which take f32.
    tensors.set(name, shape.length === 1 ? toF32(t, engine) : t);
  }
  // A tensor the forward pass would not use changes the model in a way this engine does not implement.
  for (const info of f.tensors) {
    if (!tensors.has(info.name))
      throw r.error(
        `tensor "${info.name}"`,
        `not part of a ${config.arch} model this engine implements (it would be ignored)`,
        info.infoOffset,
      );
  }
  const types = new Set([...tensors.values()].filter((t) => t.rank === 2).map((t) => t.dtype));
  return { config, tensors, format: `GGUF v${f.version} (${[...types].join(', ')})` };
}

/** An f32 copy (or the tensor itself when already f32): f16 and bf16 widened here, blocks by the engine. */
export function toF32(t: Tensor, engine?: Engine): Tensor<'f32'> {
  if (t.dtype === 'f32') return t as Tensor<'f32'>;
  const out = Tensor.zeros('f32', t.shape);
  if (t.dtype === 'f16' || t.dtype === 'bf16') {
    const src = t.data as Uint16Array;
    const widen = t.dtype === 'f16' ? f16ToF32 : bf16ToF32;
    for (let i = 0; i < out.size; i++) out.data[i] = widen(src[t.offset + i]);
  } else {
    if (!engine) throw new Error(`toF32: dequantizing ${t.dtype} needs an engine`);
    engine.dequantize(out, t as Tensor<'q4_0'>);
  }
  return out;
}
