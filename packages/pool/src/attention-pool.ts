/**
 * AttentionPool: decode attention split across worker threads (piscina) by
 * sequence and KV head, on any backend. Decoding is memory-bound; a second
 * core adds read bandwidth, so heads are spread over workers that all read the
 * one shared cache in place (SharedArrayBuffer), with no copies.
 *
 * Work units are (sequence, KV-head range) views of the cache (KVCache.view),
 * so every unit keeps its GQA group together and SparQ's per-KV-head selection
 * is the same as in a single-threaded call. Inputs are validated here, on the
 * main thread, with core's validators, before any worker runs.
 */
import {
  AttentionStats,
  CapacityError,
  DTypeError,
  NonFiniteError,
  ShapeError,
  SparqError,
  SparqRangeError,
  validateBudget,
  validateDecode,
  validateSparq,
  type BudgetParams,
  type KVCache,
  type SparqParams,
  type Tensor,
} from '@sparq/core';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import type { PooledMethod, StatsCounts, WorkFailure, WorkTask, WorkUnit } from './work.ts';

export type { PooledMethod } from './work.ts';

/** Worker count and backend of an AttentionPool. */
export interface AttentionPoolOptions {
  /** Backend name every worker selects ('reference' or 'native'). */
  backend: string;
  /** Worker threads; default: the machine's available parallelism. */
  threads?: number;
}

function isShared(array: ArrayBufferView | null): boolean {
  return array === null || array.buffer instanceof SharedArrayBuffer;
}

/** Splits every sequence's KV heads into ranges so there are about `tasks` units per sequence batch. */
export function planUnits(batch: number, nKvHeads: number, tasks: number): WorkUnit[][] {
  const rangesPerSeq = Math.min(nKvHeads, Math.max(1, Math.ceil(tasks / batch)));
  const units: WorkUnit[] = [];
  for (let seq = 0; seq < batch; seq++) {
    for (let r = 0; r < rangesPerSeq; r++) {
      // Even split of nKvHeads into rangesPerSeq contiguous ranges.
      const kvStart = Math.floor((r * nKvHeads) / rangesPerSeq);
      const kvEnd = Math.floor(((r + 1) * nKvHeads) / rangesPerSeq);
      units.push({ seq, kvStart, kvEnd });
    }
  }
  // Deal the units to tasks round-robin.
  const plan: WorkUnit[][] = Array.from({ length: Math.min(tasks, units.length) }, () => []);
  units.forEach((unit, i) => plan[i % plan.length].push(unit));
  return plan;
}

/** Workers do not inherit a TypeScript loader: from sources they start through tsx (worker.mjs), built they run worker.js. */
const WORKER = import.meta.url.endsWith('.ts') ? './worker.mjs' : './worker.js';

/** The project errors a worker may throw, by class name, rebuilt with their class on this thread. */
const ERROR_CLASSES: Record<string, new (message: string) => SparqError> = {
  ShapeError,
  DTypeError,
  SparqRangeError,
  NonFiniteError,
  CapacityError,
  SparqError,
};

function workerError({ failed }: WorkFailure): SparqError {
  return new (ERROR_CLASSES[failed.kind] ?? SparqError)(failed.message);
}

/** Decode attention split by sequence and KV head over worker threads that read one shared cache. */
export class AttentionPool {
  readonly threads: number;
  readonly backend: string;
  private readonly piscina: Piscina;

  constructor(options: AttentionPoolOptions) {
    this.backend = options.backend;
    this.threads = options.threads ?? availableParallelism();
    if (!Number.isInteger(this.threads) || this.threads < 1)
      throw new SparqError(`AttentionPool: threads ${this.threads}, expected an integer >= 1`);
    this.piscina = new Piscina({
      filename: new URL(WORKER, import.meta.url).href,
      minThreads: this.threads,
      maxThreads: this.threads,
      idleTimeout: Infinity,
    });
  }

  /**
   * Runs one decode step of `method` for every sequence of the cache, like the
   * Engine's attentionDecode / sparqDecode / topkDecode / lmInfiniteDecode.
   * The cache, q and out must live in SharedArrayBuffers (`{ shared: true }`).
   */
  async decode(
    method: PooledMethod,
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: SparqParams | BudgetParams | null = null,
    stats?: AttentionStats,
  ): Promise<void> {
    const op = `AttentionPool.decode(${method})`;
    validateDecode(op, out, q, cache);
    if (method === 'sparq') validateSparq(op, cache, params as SparqParams, undefined, q.shape[1]);
    else if (method !== 'dense') validateBudget(op, params as BudgetParams);
    if (!Object.values(cache.buffers).every((b) => isShared(b)) || !isShared(q.data) || !isShared(out.data)) {
      throw new SparqError(
        `${op}: the cache, q and out must be backed by SharedArrayBuffer (create them with { shared: true })`,
      );
    }
    const plan = planUnits(cache.batch, cache.nKvHeads, this.threads);
    const base = {
      backend: this.backend,
      method,
      params,
      cache: { options: cache.options, buffers: cache.buffers },
      q: q.data,
      out: out.data,
      nHeads: q.shape[1],
    };
    const settled: (StatsCounts | WorkFailure)[] = await Promise.all(
      plan.map((units) => this.piscina.run({ ...base, units } satisfies WorkTask)),
    );
    const failure = settled.find((r): r is WorkFailure => 'failed' in r);
    // The worker stays in the pool: the next call runs as if this one never failed.
    if (failure) throw workerError(failure);
    const results = settled as StatsCounts[];
    if (stats) {
      for (const r of results) {
        stats.kElements += r.kElements;
        stats.vElements += r.vElements;
        stats.auxElements += r.auxElements;
        stats.ioElements += r.ioElements;
      }
      stats.calls++;
    }
  }

  async close(): Promise<void> {
    await this.piscina.destroy();
  }
}
