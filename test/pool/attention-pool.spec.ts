/**
 * The worker pool must give exactly what a single-threaded call on the same
 * backend gives: each worker runs the same kernel on a (sequence, KV-head
 * range) view, and heads are computed independently, so results are identical,
 * not merely close.
 */
import { AttentionStats, KVCache, SparqError, Tensor, type Engine } from '@sparq/core';
import { AttentionPool, planUnits, type PooledMethod } from '@sparq/pool';
import { afterAll, describe, expect, it } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';

/** Deterministic pseudo-random values in [-1, 1). */
function fill(data: Float32Array, seed: number): void {
  let s = seed >>> 0 || 1;
  for (let i = 0; i < data.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    data[i] = ((s >>> 0) / 2 ** 32) * 2 - 1;
  }
}

describe('planUnits', () => {
  it('covers every (sequence, KV head) exactly once and keeps ranges contiguous', () => {
    for (const [batch, nKv, tasks] of [
      [1, 8, 2],
      [3, 4, 2],
      [1, 3, 4],
      [2, 1, 2],
      [5, 2, 1],
    ]) {
      const plan = planUnits(batch, nKv, tasks);
      expect(plan.length).toBeLessThanOrEqual(tasks);
      const seen = new Set<string>();
      for (const unit of plan.flat()) {
        expect(unit.kvStart).toBeLessThan(unit.kvEnd);
        for (let h = unit.kvStart; h < unit.kvEnd; h++) seen.add(`${unit.seq}:${h}`);
      }
      expect(seen.size).toBe(batch * nKv);
    }
  });
});

const METHODS: [PooledMethod, 'attentionDecode' | 'sparqDecode' | 'topkDecode' | 'lmInfiniteDecode', object | null][] =
  [
    ['dense', 'attentionDecode', null],
    ['sparq', 'sparqDecode', { r: 3, k: 5, l: 2 }],
    ['oracle', 'topkDecode', { k: 6 }],
    ['lminf', 'lmInfiniteDecode', { k: 20 }],
  ];

forEachBackend('AttentionPool', (engine: Engine) => {
  const pool = new AttentionPool({ backend: engine.name, threads: 2 });
  afterAll(() => pool.close());

  // batch 2 with different lengths, GQA group 2, odd head dim, one padded sequence.
  const cache = new KVCache({ batch: 2, nKvHeads: 4, headDim: 7, capacity: 40, shared: true });
  const q = Tensor.zeros('f32', [2, 8, 7], { shared: true });
  fill(q.data, 7);

  for (const [method, op, params] of METHODS) {
    opIt(engine, op, `${method} equals the single-threaded ${op}`, async () => {
      if (cache.nPast[0] === 0) {
        cache.reset(1, 3);
        for (const [seq, n] of [
          [0, 37],
          [1, 29],
        ]) {
          const k = Tensor.zeros('f32', [n, 4, 7]);
          const v = Tensor.zeros('f32', [n, 4, 7]);
          fill(k.data, 11 + seq);
          fill(v.data, 13 + seq);
          engine.kvAppend(cache, seq, k, v);
        }
      }
      const expected = Tensor.zeros('f32', [2, 8, 7]);
      const expectedStats = new AttentionStats();
      const call = engine[op].bind(engine) as (...args: unknown[]) => void;
      if (params) call(expected, q, cache, params, { stats: expectedStats });
      else call(expected, q, cache, { stats: expectedStats });

      const out = Tensor.zeros('f32', [2, 8, 7], { shared: true });
      const stats = new AttentionStats();
      await pool.decode(method, out, q, cache, params as never, stats);
      expect([...out.data]).toEqual([...expected.data]);
      expect(stats.total).toBe(expectedStats.total);
    });
  }

  it('refuses caches and tensors that are not shared, and bad parameters, before any worker runs', async () => {
    const local = new KVCache({ nKvHeads: 1, headDim: 4, capacity: 4 });
    local.nPast[0] = 1;
    const t = Tensor.zeros('f32', [1, 1, 4]);
    await expect(pool.decode('dense', t, t, local)).rejects.toThrow(SparqError);
    await expect(pool.decode('dense', t, t, local)).rejects.toThrow(/SharedArrayBuffer/);
    await expect(pool.decode('sparq', t, t, local, { r: 9, k: 1 })).rejects.toThrow(
      'r 9, expected an integer in [1, 4]',
    );
  });
});
