/**
 * The memory a model and a context take, known before anything is loaded, and
 * the check that refuses a context that does not fit:
 *
 *   weights   the matrices and vectors as the engine keeps them (the file's
 *             bytes, or the converted type's with ModelOptions.weights)
 *   KV        every layer's cache for the context (core's kvCacheBytes: K rows,
 *             K transposed for SparQ, V rows, running V sums)
 *   scratch   what a forward pass uses besides: the run state for a prefill
 *             chunk of rows (run-state.ts), the logits, and the attention
 *             kernels' per-thread buffers, which grow with the context S but
 *             never as S x S: native prefill scores a block of
 *             PREFILL_BLOCK_ROWS query rows (or one group, if larger) against
 *             S positions at a time; decode keeps a few rows of S per group.
 *
 * The check compares weights + KV + scratch with the memory the process may
 * use (the cgroup limit where one is set, else the machine's RAM).
 */
import { SparqRangeError, kvCacheBytes, type KTDType, type KVLayout, type KVTypeChoice } from '@sparq/core';
import type { ModelConfig } from './config.ts';
import { sessionKT } from './forward.ts';

/** Query rows native prefill scores at once per task (attention_ops.cc's kPrefillRows). */
export const PREFILL_BLOCK_ROWS = 16;

/**
 * f32-sized rows of S a decode task keeps per query head (logits, probabilities, a selection) and per
 * group (scores, two index lists): attention_ops.cc's thread-local Scratch, which keeps its largest size.
 */
const DECODE_ROWS_PER_HEAD = 3;
const DECODE_ROWS_PER_GROUP = 3;

export interface MemoryPlan {
  weights: number;
  kv: number;
  scratch: number;
  total: number;
}

/** Bytes of the run state for `rows` rows at a time (run-state.ts's buffers) and a session's logits. */
export function runStateBytes(c: ModelConfig, rows: number): number {
  return 4 * (rows * (3 * c.dim + 2 * c.qDim + 2 * c.kvDim + 2 * c.hiddenDim + 1) + c.vocabSize);
}

/**
 * Bytes of scratch for a session of `contextSize` positions forwarding `prefillChunk` rows at a time
 * on `threads` threads: the run state, and each thread's attention buffers over S positions (kept
 * between calls, so prefill's and decode's add up).
 */
export function scratchBytes(c: ModelConfig, contextSize: number, prefillChunk: number, threads: number): number {
  const g = c.nHeads / c.nKvHeads;
  const prefillRows = Math.max(PREFILL_BLOCK_ROWS, g);
  const decodeRows = DECODE_ROWS_PER_HEAD * g + DECODE_ROWS_PER_GROUP;
  return runStateBytes(c, Math.min(prefillChunk, contextSize)) + threads * 4 * contextSize * (prefillRows + decodeRows);
}

/**
 * Bytes of a session's KV caches: one per layer of `contextSize` positions (core's kvCacheBytes: K
 * and V rows each at its own type of `dtype`), with a session's default K transposed for the K type
 * unless `kTDType` says.
 */
export function sessionKvBytes(
  c: ModelConfig,
  contextSize: number,
  dtype: KVTypeChoice,
  layout: KVLayout,
  kTDType: KTDType = sessionKT(dtype),
): number {
  return (
    c.nLayers *
    kvCacheBytes({ nKvHeads: c.nKvHeads, headDim: c.headDim, capacity: contextSize, dtype, layout, kTDType })
  );
}

/** The plan's parts and total. */
export function memoryPlan(weights: number, kv: number, scratch: number): MemoryPlan {
  return { weights, kv, scratch, total: weights + kv + scratch };
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GiB`;

/**
 * Throws a SparqRangeError when `plan` needs more than `available` bytes, naming what it needs (each
 * part) and what there is, before anything is allocated. `what` names the run ('a context of 131072
 * positions, KV f16 k-twice').
 */
export function checkMemory(plan: MemoryPlan, available: { bytes: number; source: string }, what: string): void {
  if (plan.total <= available.bytes) return;
  throw new SparqRangeError(
    `${what} needs ${plan.total} bytes (${gib(plan.total)}: weights ${gib(plan.weights)}, KV cache ${gib(plan.kv)}, scratch ${gib(plan.scratch)}), ` +
      `more than the ${available.bytes} bytes (${gib(available.bytes)}) this process has (${available.source}); use a smaller context, a quantized KV cache or smaller weights`,
  );
}
