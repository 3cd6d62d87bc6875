/**
 * A KV cache of S random positions for timing attention kernels, filled
 * through the engine's own kvAppend (so every layout gets its copies, K
 * transposed included, exactly as a model would write them). Values are
 * uniform in [-1, 1): the kernels' speed does not depend on them.
 */
import { KVCache, Tensor, type Engine, type KTDType, type KVLayout, type KVTypeChoice } from '@sparq/core';
import { mulberry32 } from '@sparq/llm';

/** Positions appended per kvAppend call: bounds the temporary rows to a few MB. */
const CHUNK = 256;

export interface CacheShape {
  S: number;
  heads: number;
  headDim: number;
  dtype: KVTypeChoice;
  layout: KVLayout;
  /** K transposed's type ('k-twice'); core's default for the dtype when absent. */
  kTDType?: KTDType;
}

export function randomCache(
  engine: Engine,
  { S, heads, headDim, dtype, layout, kTDType }: CacheShape,
  seed = 1,
): KVCache {
  const cache = new KVCache({
    nKvHeads: heads,
    headDim,
    capacity: S,
    dtype,
    layout,
    kTDType: layout === 'k-twice' ? kTDType : null,
  });
  const random = mulberry32(seed);
  const k = Tensor.zeros('f32', [CHUNK, heads, headDim]); // (chunk, heads, d)
  const v = Tensor.zeros('f32', [CHUNK, heads, headDim]);
  for (let pos = 0; pos < S; pos += CHUNK) {
    const n = Math.min(CHUNK, S - pos);
    for (let i = 0; i < n * heads * headDim; i++) {
      k.data[i] = 2 * random() - 1;
      v.data[i] = 2 * random() - 1;
    }
    engine.kvAppend(cache, 0, n === CHUNK ? k : k.slice(0, 0, n), n === CHUNK ? v : v.slice(0, 0, n));
  }
  return cache;
}

/** A random query (1, heads, d) and an output of the same shape. */
export function randomQuery(heads: number, headDim: number, seed = 2): { q: Tensor<'f32'>; out: Tensor<'f32'> } {
  const random = mulberry32(seed);
  const q = Tensor.zeros('f32', [1, heads, headDim]);
  for (let i = 0; i < q.size; i++) q.data[i] = 2 * random() - 1;
  return { q, out: Tensor.zeros('f32', [1, heads, headDim]) };
}
