/**
 * A worker that throws leaves the pool usable: the failing call rejects with
 * the worker's error (the project's class), and the next call on the same
 * pool gives the single-threaded result. The failure is injected by writing
 * a NaN into the shared query after the main thread validated it and before
 * the workers read it, so the workers' own validation refuses it.
 */
import { KVCache, NonFiniteError, Tensor, type Engine } from '@sparq/core';
import { AttentionPool } from '@sparq/pool';
import { afterAll, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';

forEachBackend('AttentionPool after a worker throws', (engine: Engine) => {
  const pool = new AttentionPool({ backend: engine.name, threads: 2 });
  afterAll(() => pool.close());

  it('rejects that call, then runs the next one as before', async () => {
    const cache = new KVCache({ nKvHeads: 2, headDim: 4, capacity: 8, shared: true });
    const rows = Tensor.f32([3, 2, 4], Array.from({ length: 24 }, (_, i) => ((i % 7) - 3) / 4));
    engine.kvAppend(cache, 0, rows, rows);
    const q = Tensor.f32([1, 2, 4], [1, 0, -1, 0.5, 0.25, 1, 0, -0.5], { shared: true });
    const expected = Tensor.zeros('f32', [1, 2, 4]);
    engine.attentionDecode(expected, q, cache);

    const out = Tensor.zeros('f32', [1, 2, 4], { shared: true });
    const failing = pool.decode('dense', out, q, cache);
    const saved = q.data[5];
    q.data[5] = NaN; // after decode() validated q, before a worker reads it
    await expect(failing).rejects.toThrow(NonFiniteError);
    await expect(failing).rejects.toThrow(/attentionDecode: q element \d is NaN/);
    q.data[5] = saved;
    for (let i = 0; i < 3; i++) {
      out.data.fill(0);
      await pool.decode('dense', out, q, cache);
      expect([...out.data]).toEqual([...expected.data]);
    }
  });
});
