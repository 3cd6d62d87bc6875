/**
 * A worker that throws leaves the pool usable: the failing call rejects with
 * the worker's error (the project's class), and the next call on the same
 * pool gives the single-threaded result. The failure is injected by writing
 * a NaN into the shared query after the main thread validated it and before
 * the workers read it, so the workers' own validation refuses it (retried
 * where a worker read q first).
 */
import { KVCache, NonFiniteError, Tensor, type Engine } from '@sparq/core';
import { AttentionPool } from '@sparq/pool';
import { afterAll, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';

/** Calls tried before the injected NaN must have reached a worker. */
const MAX_ATTEMPTS = 50;

forEachBackend('AttentionPool after a worker throws', (engine: Engine) => {
  const pool = new AttentionPool({ backend: engine.name, threads: 2 });
  afterAll(() => pool.close());

  it('rejects that call, then runs the next one as before', async () => {
    const cache = new KVCache({ nKvHeads: 2, headDim: 4, capacity: 8, shared: true });
    const rows = Tensor.f32(
      [3, 2, 4],
      Array.from({ length: 24 }, (_, i) => ((i % 7) - 3) / 4),
    );
    engine.kvAppend(cache, 0, rows, rows);
    const q = Tensor.f32([1, 2, 4], [1, 0, -1, 0.5, 0.25, 1, 0, -0.5], { shared: true });
    const expected = Tensor.zeros('f32', [1, 2, 4]);
    engine.attentionDecode(expected, q, cache);

    const out = Tensor.zeros('f32', [1, 2, 4], { shared: true });
    // The NaN has to land after decode() validated q and before a worker reads it. The task reaches
    // the worker asynchronously, so the main thread usually wins that race, but an idle worker can
    // be faster: a call that resolved is retried (with q restored), and one rejection must come.
    const saved = q.data[5];
    let failure: unknown = null;
    for (let attempt = 0; attempt < MAX_ATTEMPTS && failure === null; attempt++) {
      const call = pool.decode('dense', out, q, cache);
      q.data[5] = NaN;
      failure = await call.then(
        () => null,
        (error: unknown) => error,
      );
      q.data[5] = saved;
    }
    expect(failure).toBeInstanceOf(NonFiniteError);
    expect((failure as Error).message).toMatch(/attentionDecode: q element \d is NaN/);
    for (let i = 0; i < 3; i++) {
      out.data.fill(0);
      await pool.decode('dense', out, q, cache);
      expect([...out.data]).toEqual([...expected.data]);
    }
  });
});
