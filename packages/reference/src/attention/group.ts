/**
 * The unit every attention op works on: one KV head of one sequence and its
 * group of g = nHeads / nKvHeads query heads (spec.md notation; head h reads KV
 * head floor(h / g), so the group of KV head kvh is heads kvh*g .. kvh*g + g - 1).
 * Positions chosen for a group are shared by its heads, so each K or V row is
 * read once per group, not once per head: that is the GQA saving, and what the
 * counters in AttentionStats record.
 *
 *   q, out (rows, nHeads, headDim)  rows = batch for decode, N tokens for prefill
 */
import type { AttentionStats, KVCache, Tensor } from '@sparq/core';

export interface HeadGroup {
  /** Sequence of the cache and KV head this group reads. */
  seq: number;
  kvh: number;
  /** Query heads in the group, and the head dimension. */
  g: number;
  d: number;
  /** The group's queries: q.data[qAt + t * d + i] for head t of the group, component i. */
  q: Float32Array;
  qAt: number;
  /** Where the group's outputs go, laid out like q. */
  out: Float32Array;
  outAt: number;
}

/** The group of KV head `kvh` for row `row` of q/out (a sequence in decode, a token in prefill). */
export function headGroup(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  row: number,
  seq: number,
  kvh: number,
): HeadGroup {
  const [, nHeads, d] = q.shape;
  const g = nHeads / cache.nKvHeads;
  // First query head of the group is kvh * g; heads are contiguous rows of d.
  const at = (row * nHeads + kvh * g) * d;
  return { seq, kvh, g, d, q: q.data, qAt: q.offset + at, out: out.data, outAt: out.offset + at };
}

/**
 * Calls `visit` for every (sequence, KV head) group of a decode call, after
 * counting the call and its query reads and output writes (2d per query head).
 */
export function forEachDecodeGroup(
  out: Tensor<'f32'>,
  q: Tensor<'f32'>,
  cache: KVCache,
  stats: AttentionStats | undefined,
  visit: (group: HeadGroup) => void,
): void {
  if (stats) stats.calls++;
  // One group per sequence b and KV head kvh.
  for (let b = 0; b < cache.batch; b++) {
    for (let kvh = 0; kvh < cache.nKvHeads; kvh++) {
      const group = headGroup(out, q, cache, b, b, kvh);
      countIo(stats, group);
      visit(group);
    }
  }
}

/** q read plus out written by the group's heads: 2 * g * d elements. */
export function countIo(stats: AttentionStats | undefined, group: HeadGroup): void {
  if (stats) stats.ioElements += 2 * group.g * group.d;
}
