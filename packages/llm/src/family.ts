/**
 * The model families the forward pass runs, and the few things that differ
 * between them. Everything else (RMSNorm, SwiGLU FFN, GQA attention, tied or
 * separate classifier, optional q/k/v biases) is one code path.
 *
 *   family  RoPE pairs                 per-head q/k RMSNorm   rope_freqs tensor
 *   llama   adjacent (ggml NORM)       no                     read (Llama 3.1+)
 *   qwen2   halves   (ggml NEOX)       no                     not read
 *   qwen3   halves   (ggml NEOX)       yes (before RoPE)      not read
 *
 * The pair layout is the one llama.cpp uses for the architecture: its
 * converter permutes Llama's Q/K rows into adjacent pairs and keeps Qwen's
 * Hugging Face (rotate-half) order, so the layout follows the architecture.
 */
import type { RopePairs } from '@sparq/core';

/** The model families the runtime runs. */
export type Architecture = 'llama' | 'qwen2' | 'qwen3';
/** Every Architecture. */
export const ARCHITECTURES: readonly Architecture[] = ['llama', 'qwen2', 'qwen3'];

export interface Family {
  /** Which elements of a head RoPE turns together. */
  ropePairs: RopePairs;
  /** q and k of each head go through their own RMSNorm (attn_q_norm, attn_k_norm) before RoPE. */
  qkNorm: boolean;
  /** A rope_freqs tensor (per-pair frequency divisors) is part of the model when present. */
  ropeFreqs: boolean;
}

export const FAMILIES: Readonly<Record<Architecture, Family>> = {
  llama: { ropePairs: 'adjacent', qkNorm: false, ropeFreqs: true },
  qwen2: { ropePairs: 'halves', qkNorm: false, ropeFreqs: false },
  qwen3: { ropePairs: 'halves', qkNorm: true, ropeFreqs: false },
};

export function isArchitecture(name: string | undefined): name is Architecture {
  return (ARCHITECTURES as readonly (string | undefined)[]).includes(name);
}
