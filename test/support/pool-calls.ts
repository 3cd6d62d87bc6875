/**
 * The calls of test/native/pool.spec.ts, run in a child process: a lost wake-up in the native pool
 * blocks the calling thread inside the addon, where no test timeout can reach it, so the spec runs
 * this with a time limit. Every call is a Q8_0 weight product split over the pool (above
 * basic_dispatch.cc's 512 KB), whose rows come out bit for bit the same on any number of threads
 * (each row is one thread's, in one order), compared exactly with its one-thread result.
 * Prints one line per check and exits 1 at the first mismatch.
 */
import { Tensor, loadBackends, type Engine } from '@sparq/core';
import '@sparq/native';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import { attentionAddon } from '../../packages/native/lib/attention-ops.ts';
import { seeded, uniform } from '../conformance/numeric.ts';

const native = (await loadBackends()).available.find((e) => e.name === 'native');
if (!native) throw new Error('pool-calls: the native backend is unavailable');
const pool = attentionAddon(loadAddon());

/** Blocks the thread for `ms` (Atomics.wait on a private buffer: nothing wakes it early). */
const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** A Q8_0 product of `rows` x 1024 (1.06 KB a row), and its result on one thread. */
function product(engine: Engine, rows: number, seed: number) {
  const random = seeded(seed);
  const w = Tensor.zeros('q8_0', [rows, 1024]);
  engine.quantize(w, Tensor.f32([rows, 1024], uniform(random, rows * 1024)));
  const x = Tensor.f32([1024], uniform(random, 1024));
  const run = () => {
    const out = Tensor.zeros('f32', [rows]);
    engine.matvec(out, w, x, 'int8');
    return out.data;
  };
  pool.attnSetThreads(1);
  return { rows, run, expected: run() };
}

function check(what: string, p: ReturnType<typeof product>): void {
  const got = p.run();
  const at = got.findIndex((v, i) => !Object.is(v, p.expected[i]));
  if (at >= 0) {
    console.log(
      `MISMATCH ${what}: ${p.rows} rows, row ${at}: ${got[at]} on ${pool.attnThreads()} threads, ${p.expected[at]} on 1`,
    );
    process.exit(1);
  }
}

const products = [600, 1024, 2000].map((rows, i) => product(native, rows, 10 + i)); // 8-16 tasks a call on 2-4 threads (basic_dispatch.cc: 4 per thread)
// A call right after each resize: the new workers must take it, whenever they start running.
for (let i = 0; i < 100; i++) {
  pool.attnSetThreads(1);
  pool.attnSetThreads(2 + (i % 3)); // 2-4 threads, more than the cores of a small machine
  check('right after a resize', products[i % products.length]);
}
console.log('ok: calls right after a resize');
// Back to back, and after gaps longer than the workers' spin (they have gone to sleep).
for (const threads of [2, 3]) {
  pool.attnSetThreads(threads);
  for (const gapMs of [0, 0.1, 2, 20]) {
    for (let i = 0; i < 30; i++) {
      check(`${gapMs} ms apart`, products[i % products.length]);
      if (gapMs > 0) pause(gapMs);
    }
  }
}
console.log('ok: calls back to back and after gaps');
