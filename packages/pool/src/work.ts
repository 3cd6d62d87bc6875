/**
 * What one worker does with one task: rebuild the shared cache and tensors
 * from the posted SharedArrayBuffer-backed arrays, then run the attention op
 * on each of its work units, a (sequence, KV-head range) view of the cache.
 * The views share memory with the main thread's cache, so nothing is copied:
 * each unit writes its own slice of `out`.
 */
import {
  AttentionStats,
  KVCache,
  SparqError,
  Tensor,
  selectBackend,
  type BudgetParams,
  type Engine,
  type KVCacheBuffers,
  type KVCacheOptions,
  type SparqParams,
} from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';

/** The attention methods an AttentionPool runs. */
export type PooledMethod = 'dense' | 'sparq' | 'oracle' | 'lminf';

/** One unit: sequence `seq`, KV heads [kvStart, kvEnd). */
export interface WorkUnit {
  seq: number;
  kvStart: number;
  kvEnd: number;
}

export interface WorkTask {
  backend: string;
  method: PooledMethod;
  params: SparqParams | BudgetParams | null;
  cache: { options: Required<Omit<KVCacheOptions, 'shared'>>; buffers: KVCacheBuffers };
  /** q and out (batch, nHeads, headDim) f32 over SharedArrayBuffers. */
  q: Float32Array;
  out: Float32Array;
  nHeads: number;
  units: WorkUnit[];
}

/** Element counts of AttentionStats, summed over the task's units. */
export type StatsCounts = Pick<AttentionStats, 'kElements' | 'vElements' | 'auxElements' | 'ioElements'>;

/**
 * A project error thrown in the worker, by class name: an Error crossing the thread boundary
 * loses its class, so the pool rebuilds it on the main thread (attention-pool.ts).
 */
export interface WorkFailure {
  failed: { kind: string; message: string };
}

/** Runs the task; a SparqError comes back as a WorkFailure, anything else is thrown as it is. */
export async function runTask(task: WorkTask): Promise<StatsCounts | WorkFailure> {
  try {
    return await runUnits(task);
  } catch (error) {
    if (error instanceof SparqError) return { failed: { kind: error.constructor.name, message: error.message } };
    throw error;
  }
}

const engines = new Map<string, Promise<Engine>>();

async function runUnits(task: WorkTask): Promise<StatsCounts> {
  if (!engines.has(task.backend)) engines.set(task.backend, selectBackend({ backend: task.backend }));
  const engine = await engines.get(task.backend)!;
  const cache = new KVCache(task.cache.options, task.cache.buffers);
  const { headDim, nKvHeads } = cache;
  const group = task.nHeads / nKvHeads;
  const stats = new AttentionStats();
  for (const { seq, kvStart, kvEnd } of task.units) {
    const view = cache.view(seq, kvStart, kvEnd);
    // The unit's query heads [kvStart * group, kvEnd * group) of sequence seq are contiguous in q and out.
    const heads = (kvEnd - kvStart) * group;
    const offset = (seq * task.nHeads + kvStart * group) * headDim;
    const q = new Tensor('f32', task.q, [1, heads, headDim], undefined, offset);
    const out = new Tensor('f32', task.out, [1, heads, headDim], undefined, offset);
    if (task.method === 'dense') engine.attentionDecode(out, q, view, { stats });
    else if (task.method === 'sparq') engine.sparqDecode(out, q, view, task.params as SparqParams, { stats });
    else if (task.method === 'oracle') engine.topkDecode(out, q, view, task.params as BudgetParams, { stats });
    else engine.lmInfiniteDecode(out, q, view, task.params as BudgetParams, { stats });
  }
  const { kElements, vElements, auxElements, ioElements } = stats;
  return { kElements, vElements, auxElements, ioElements };
}
