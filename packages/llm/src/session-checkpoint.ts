/**
 * What a forward call changes, saved before it runs so a call that throws
 * leaves the session as it was: the position, each layer's cache length and
 * running V sums (the rows past the old length are then simply unused), H2O's
 * accumulated scores and evictions, and the attention counters.
 *
 * Saving costs (n_layers x n_kv_heads x head_dim) f64 sums per call, plus
 * (n_layers x n_kv_heads x capacity) scores and flags with H2O: small next to
 * the forward pass itself.
 */
import type { AttentionStats, H2OState, KVCache } from '@sparq/core';

export interface SessionCheckpoint {
  pos: number;
  nPast: Int32Array[];
  vSum: Float64Array[];
  h2o: ({ acc: Float32Array; evicted: Uint8Array } | null)[];
  counters: { decodeSteps: number; methodCost: number; denseCost: number; denseBytes: number };
  stats: Pick<
    AttentionStats,
    'kElements' | 'vElements' | 'auxElements' | 'ioElements' | 'kBytes' | 'vBytes' | 'auxBytes' | 'ioBytes' | 'calls'
  >;
}

/** The parts of a Session a checkpoint covers. */
export interface CheckpointTarget {
  pos: number;
  decodeSteps: number;
  methodCost: number;
  denseCost: number;
  denseBytes: number;
  readonly caches: readonly KVCache[];
  readonly h2o: readonly (H2OState | null)[];
  readonly stats: AttentionStats;
}

export function saveCheckpoint(s: CheckpointTarget): SessionCheckpoint {
  const { kElements, vElements, auxElements, ioElements, kBytes, vBytes, auxBytes, ioBytes, calls } = s.stats;
  return {
    pos: s.pos,
    nPast: s.caches.map((c) => c.nPast.slice()),
    vSum: s.caches.map((c) => c.vSum.slice()),
    h2o: s.h2o.map((h) => (h ? { acc: h.acc.slice(), evicted: h.evicted.slice() } : null)),
    counters: {
      decodeSteps: s.decodeSteps,
      methodCost: s.methodCost,
      denseCost: s.denseCost,
      denseBytes: s.denseBytes,
    },
    stats: { kElements, vElements, auxElements, ioElements, kBytes, vBytes, auxBytes, ioBytes, calls },
  };
}

export function restoreCheckpoint(s: CheckpointTarget, cp: SessionCheckpoint): void {
  s.pos = cp.pos;
  s.caches.forEach((c, l) => {
    c.nPast.set(cp.nPast[l]);
    c.vSum.set(cp.vSum[l]);
  });
  s.h2o.forEach((h, l) => {
    const saved = cp.h2o[l];
    if (h && saved) {
      h.acc.set(saved.acc);
      h.evicted.set(saved.evicted);
    }
  });
  s.decodeSteps = cp.counters.decodeSteps;
  s.methodCost = cp.counters.methodCost;
  s.denseCost = cp.counters.denseCost;
  s.denseBytes = cp.counters.denseBytes;
  Object.assign(s.stats, cp.stats);
}
