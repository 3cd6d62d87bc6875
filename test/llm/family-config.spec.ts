/**
 * The Llama-family loader's keys and tensors: each family's config read back
 * from the metadata our writer produces, RoPE scaling read as llama.cpp reads
 * it, every key or tensor that would change the computation and is not
 * implemented refused by name, and the RoPE frequency table's math by hand.
 */
import { FormatError, Tensor } from '@sparq/core';
import {
  expectedTensors,
  gguf,
  llamaFromGGUF,
  llamaMetadata,
  makeConfig,
  readGGUF,
  ropeOptions,
  writeGGUF,
  type GGUFValue,
  type ModelConfig,
  type RopeScaling,
} from '@sparq/llm';
import { describe, expect, it } from 'vitest';

function config(extra: Partial<ModelConfig> = {}): ModelConfig {
  const fail = (field: string, what: string): never => {
    throw new Error(`${field} ${what}`);
  };
  return makeConfig(
    { dim: 64, hiddenDim: 96, nLayers: 1, nHeads: 4, nKvHeads: 2, vocabSize: 8, seqLen: 32 },
    { normEps: 1e-5, ropeTheta: 10000, sharedClassifier: true, ...extra },
    fail,
  );
}

/** A GGUF of config `c` (zero weights) with metadata edited by `edit`; `tensors` adds or drops tensors. */
function file(
  c: ModelConfig,
  edit: (m: Map<string, GGUFValue>) => void = () => {},
  extraTensors: string[] = [],
  drop: string[] = [],
): Uint8Array {
  const m = new Map(llamaMetadata(c, null));
  edit(m);
  const tensors = expectedTensors(c)
    .filter(({ name }) => !drop.includes(name))
    .map(({ name, shape }) => ({
      name,
      tensor:
        shape.length === 1 && name !== 'rope_freqs.weight'
          ? Tensor.f32(shape, new Array(shape[0]).fill(1))
          : Tensor.zeros('f32', shape),
    }));
  for (const name of extraTensors) tensors.push({ name, tensor: Tensor.zeros('f32', [c.dim]) });
  return writeGGUF(m, tensors);
}

const load = (bytes: Uint8Array) => llamaFromGGUF(readGGUF(bytes, 'm.gguf'), 'm.gguf');

function refused(bytes: Uint8Array, message: RegExp): void {
  expect(() => load(bytes)).toThrow(FormatError);
  expect(() => load(bytes)).toThrow(message);
}

describe('family configs from GGUF metadata', () => {
  it('reads back each family: architecture, explicit head size, biases, q/k norms, rope_freqs', () => {
    const qwen3 = config({ arch: 'qwen3', headDim: 32 });
    const got = load(file(qwen3)).config;
    expect(got).toMatchObject({ arch: 'qwen3', headDim: 32, qDim: 128, kvDim: 64, attnBias: false });
    const names = [...load(file(qwen3)).tensors.keys()];
    expect(names).toContain('blk.0.attn_q_norm.weight');
    expect(load(file(config({ arch: 'qwen2', attnBias: true }))).config.attnBias).toBe(true);
    expect(load(file(config({ ropeFreqs: true }))).tensors.get('rope_freqs.weight')?.shape).toEqual([8]);
  });

  it('reads RoPE scaling as llama.cpp does: a factor without a type is linear; yarn with its original context', () => {
    const linear = load(file(config(), (m) => m.set('llama.rope.scaling.factor', gguf.f32(4)))).config.ropeScaling;
    expect(linear).toEqual({ type: 'linear', factor: 4, originalContext: 32, attnFactor: 1 });
    const old = load(file(config(), (m) => m.set('llama.rope.scale_linear', gguf.f32(2)))).config.ropeScaling;
    expect(old.factor).toBe(2);
    const yarn: RopeScaling = { type: 'yarn', factor: 8, originalContext: 16, attnFactor: 1 };
    expect(load(file(config({ ropeScaling: yarn })))).toMatchObject({ config: { ropeScaling: yarn } });
    const none = load(
      file(config(), (m) =>
        m.set('llama.rope.scaling.type', gguf.string('none')).set('llama.rope.scaling.factor', gguf.f32(4)),
      ),
    ).config.ropeScaling;
    expect(none.type).toBe('none');
  });

  it('refuses what it does not implement, naming the key or tensor', () => {
    refused(
      file(config(), (m) => m.set('general.architecture', gguf.string('gemma'))),
      /general\.architecture.*"gemma", expected one of "llama", "qwen2", "qwen3"/,
    );
    refused(
      file(config(), (m) => m.set('llama.rope.scaling.type', gguf.string('longrope'))),
      /llama\.rope\.scaling\.type.*"longrope"/,
    );
    refused(
      file(config(), (m) => m.set('llama.rope.scaling.type', gguf.string('llama3'))),
      /llama\.rope\.scaling\.type.*"llama3"/,
    );
    refused(
      file(config(), (m) => m.set('llama.rope.scaling.yarn_log_multiplier', gguf.f32(0.1))),
      /llama\.rope\.scaling\.yarn_log_multiplier.*not implemented/,
    );
    refused(
      file(config(), (m) => m.set('llama.expert_count', gguf.u32(8))),
      /llama\.expert_count.*mixture of experts is not implemented/,
    );
    refused(
      file(config(), (m) => m.set('llama.rope.dimension_count', gguf.u32(8))),
      /llama\.rope\.dimension_count.*only full rotary/,
    );
    refused(
      file(config(), () => {}, ['blk.0.attn_output.bias']),
      /tensor "blk\.0\.attn_output\.bias".*it would be ignored/,
    );
    // rope_freqs belongs to llama; in a qwen2 file it would be ignored by llama.cpp's qwen2 too.
    refused(
      file(config({ arch: 'qwen2' }), () => {}, ['rope_freqs.weight']),
      /tensor "rope_freqs\.weight"/,
    );
    refused(
      file(config({ arch: 'qwen3' }), () => {}, [], ['blk.0.attn_k_norm.weight']),
      /tensor "blk\.0\.attn_k_norm\.weight".*missing/,
    );
    refused(
      file(config(), (m) =>
        m.set('llama.attention.value_length', gguf.u32(8)).set('llama.attention.key_length', gguf.u32(16)),
      ),
      /llama\.attention\.value_length.*only equal key and value head sizes/,
    );
    refused(
      file(config(), (m) => m.delete('llama.block_count')),
      /llama\.block_count.*missing/,
    );
    refused(
      file(config(), (m) => m.set('llama.rope.scaling.factor', gguf.f32(-2))),
      /llama\.rope\.scaling\.factor.*expected a finite value > 0/,
    );
  });
});

describe('RoPE frequency table', () => {
  const d = 8;
  const base = (i: number) => 10000 ** ((-2 * i) / d);
  const table = (c: ModelConfig, factors?: number[]) => ropeOptions(c, factors && Tensor.f32([d / 2], factors));
  const c8 = (extra: Partial<ModelConfig>) => config({ headDim: d, ...extra });

  it("none: no table (the op computes llama2.c's frequencies); the family sets the pairs", () => {
    expect(table(c8({}))).toEqual({ pairs: 'adjacent' });
    expect(table(c8({ arch: 'qwen2' }))).toEqual({ pairs: 'halves' });
  });

  it('linear divides every frequency by the factor; rope_freqs divides pair i by its factor', () => {
    const linear = table(c8({ ropeScaling: { type: 'linear', factor: 4, originalContext: 32, attnFactor: 1 } }));
    expect(Array.from(linear.freqs!.data)).toEqual([0, 1, 2, 3].map((i) => Math.fround(base(i) / 4)));
    expect(linear.scale).toBe(1);
    const freqs = table(c8({ ropeFreqs: true }), [1, 2, 4, 8]);
    expect(Array.from(freqs.freqs!.data)).toEqual([0, 1, 2, 3].map((i) => Math.fround(base(i) / 2 ** i)));
  });

  it('yarn by hand: head dim 8, base 10000, original context 64, factor 4', () => {
    // corr(r) = 8 ln(64 / (2 pi r)) / (2 ln 10000): corr(32) = -0.497 -> low max(0, -1) = 0; corr(1) = 1.008 -> high 2.
    // keep_i = 1 - clamp(i / 2, 0, 1) = 1, 1/2, 0, 0; freq_i = base_i ((1 - keep_i) / 4 + keep_i).
    const yarn = table(c8({ ropeScaling: { type: 'yarn', factor: 4, originalContext: 64, attnFactor: 1 } }));
    const keep = [1, 1 / 2, 0, 0];
    yarn.freqs!.data.forEach((f, i) => expect(f).toBeCloseTo(base(i) * ((1 - keep[i]) / 4 + keep[i]), 7));
    expect(yarn.scale).toBeCloseTo(1 + 0.1 * Math.log(4), 12);
  });
});
