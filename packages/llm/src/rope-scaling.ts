/**
 * RoPE context extension: the GGUF `rope.scaling.*` keys and the `rope_freqs`
 * tensor turned into what the rope op takes, one frequency per pair of a head
 * and a scale for cos and sin. With base b, head size d and pair i:
 *
 *   none     freq_i = b^(-2i/d)                                   scale = attn_factor
 *   linear   freq_i = b^(-2i/d) / factor  (position interpolation)  scale = attn_factor
 *   yarn     freq_i = b^(-2i/d) * ((1 - m_i) / factor + m_i)     scale = attn_factor (1 + 0.1 ln factor)
 *   rope_freqs (Llama 3's scheme, computed by the converter): freq_i is further divided by f_i
 *
 * YaRN (Peng et al. 2023, as llama.cpp runs it): pairs that turn many times
 * over the original context keep their frequency (m_i = 1), slow pairs are
 * interpolated (m_i = 0), with a linear ramp between the correction dims
 *   corr(r) = d ln(n_orig / (2 pi r)) / (2 ln b),  low = max(0, floor(corr(32))),  high = min(d - 1, ceil(corr(1)))
 *   m_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1)
 * and the attention logits are sharpened by scaling q and k by 1 + 0.1 ln factor
 * (only when factor > 1). llama.cpp reads no other YaRN parameter from GGUF:
 * beta_fast 32, beta_slow 1 and extrapolation factor 1 are its constants, and
 * this engine refuses files that set them otherwise (see gguf-llama.ts).
 */
import { Tensor, type RopeOptions } from '@sparq/core';
import type { ModelConfig } from './config.ts';
import { FAMILIES } from './family.ts';

export type RopeScalingType = 'none' | 'linear' | 'yarn';
export const ROPE_SCALING_TYPES: readonly RopeScalingType[] = ['none', 'linear', 'yarn'];

export interface RopeScaling {
  type: RopeScalingType;
  /** Context extension factor (rope.scaling.factor); 1 means none. */
  factor: number;
  /** YaRN: the context before extension (rope.scaling.original_context_length). */
  originalContext: number;
  /** Multiplies cos and sin (rope.scaling.attn_factor), 1 by default. */
  attnFactor: number;
}

export const NO_ROPE_SCALING: RopeScaling = { type: 'none', factor: 1, originalContext: 0, attnFactor: 1 };

/** llama.cpp's YaRN constants: rotations per original context bounding the ramp. */
export const YARN_BETA_FAST = 32;
export const YARN_BETA_SLOW = 1;

export function describeRopeScaling(s: RopeScaling): string {
  if (s.type === 'none') return 'no scaling';
  const orig = s.type === 'yarn' ? `, original context ${s.originalContext}` : '';
  const attn = s.attnFactor !== 1 ? `, attn factor ${s.attnFactor}` : '';
  return `${s.type} x${s.factor}${orig}${attn}`;
}

const f32 = Math.fround;

/** YaRN's correction dim for `rotations` turns over the original context, in f32 as ggml computes it. */
function correctionDim(d: number, nOrig: number, rotations: number, base: number): number {
  return f32(
    f32(d * f32(Math.log(f32(nOrig / f32(rotations * f32(2 * f32(Math.PI))))))) / f32(2 * f32(Math.log(base))),
  );
}

/**
 * The rope op's options for model `c`: undefined frequencies when nothing
 * changes them (the op's own theta^(-2i/d), llama2.c's arithmetic), else the
 * table. `freqFactors` (d/2) are the rope_freqs tensor's divisors.
 */
export function ropeOptions(c: ModelConfig, freqFactors?: Tensor<'f32'>): RopeOptions {
  const s = c.ropeScaling;
  const pairs = FAMILIES[c.arch].ropePairs;
  const half = c.headDim / 2;
  const interpolate = s.type === 'none' ? 1 : 1 / s.factor;
  let scale = s.attnFactor;
  if (s.type === 'none' && !freqFactors && scale === 1) return { pairs };
  let low = 0;
  let high = 0;
  if (s.type === 'yarn') {
    low = Math.max(0, Math.floor(correctionDim(c.headDim, s.originalContext, YARN_BETA_FAST, c.ropeTheta)));
    high = Math.min(c.headDim - 1, Math.ceil(correctionDim(c.headDim, s.originalContext, YARN_BETA_SLOW, c.ropeTheta)));
    if (s.factor > 1) scale *= 1 + 0.1 * Math.log(s.factor);
  }
  const freqs = Tensor.zeros('f32', [half]); // (headDim / 2)
  for (let i = 0; i < half; i++) {
    const base = Math.pow(c.ropeTheta, (-2 * i) / c.headDim);
    // The share of the original frequency YaRN keeps for pair i (0 for linear: all interpolated).
    const keep = s.type === 'yarn' ? 1 - Math.min(1, Math.max(0, (i - low) / Math.max(0.001, high - low))) : 0;
    freqs.data[i] =
      (base * (interpolate * (1 - keep) + keep)) / (freqFactors ? freqFactors.data[freqFactors.offset + i] : 1);
  }
  return { freqs, scale, pairs };
}
