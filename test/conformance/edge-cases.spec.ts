/**
 * The edge-case contract (docs/edge-cases.md), on every backend, with the
 * expected values worked out by hand from the contract: k = 1 for H2O and
 * top-k, ties (an all-zero query makes every score equal), inputs that could
 * overflow q·k, and non-finite values. Several are regressions from the op
 * fuzzer (test/fuzz/ops.ts): the seeds are named where they came from.
 */
import { H2OState, KVCache, NonFiniteError, SparqRangeError, Tensor, type Engine } from '@sparq/core';
import { expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';

const D = 4;

/** A cache of (nKv = 1, headDim 4) holding `rows` (k = v = the row) after `nPad` masked rows of 9s. */
function cache(engine: Engine, rows: number[][], nPad = 0): KVCache {
  const c = new KVCache({ nKvHeads: 1, headDim: D, capacity: 8 });
  c.reset(0, nPad);
  const all = [...Array.from({ length: nPad }, () => [9, 9, 9, 9]), ...rows];
  const t = Tensor.f32([all.length, 1, D], all.flat());
  engine.kvAppend(c, 0, t, t);
  return c;
}

const ROWS = [
  [1, 0, 0, 0],
  [0, 2, 0, 0],
  [0, 0, 3, 0],
];

forEachBackend('edge-case contract', (engine) => {
  it('H2O with k = 1: each step evicts down to its new token (the window of 1) and attends it alone', () => {
    const c = cache(engine, ROWS);
    const state = new H2OState(c);
    const q = Tensor.f32([1, 1, D], [0.5, 0.25, 0, 1]);
    const out = Tensor.zeros('f32', [1, 1, D]);
    engine.h2oDecode(out, q, c, state, { k: 1 });
    // keep k = 1 and a window of max(1, floor(1/4)) = 1: the two older positions go, the newest stays.
    expect([...state.evicted.subarray(0, 3)]).toEqual([1, 1, 0]);
    // Softmax over one position is exactly 1: y = that position's value (regression: one backend gave NaN).
    expect([...out.data]).toEqual(ROWS[2]);
    const next = Tensor.f32([1, 1, D], [0.5, -1, 2, 0.25]);
    engine.kvAppend(c, 0, next, next);
    engine.h2oDecode(out, q, c, state, { k: 1 });
    expect([...state.evicted.subarray(0, 4)]).toEqual([1, 1, 1, 0]);
    expect([...out.data]).toEqual([0.5, -1, 2, 0.25]);
  });

  it('ties at k = 1 go to the lowest valid index, for one head and for a GQA group (summed probabilities)', () => {
    for (const nPad of [0, 2]) {
      const c = cache(engine, ROWS, nPad);
      for (const g of [1, 2, 4]) {
        // An all-zero query scores every position 0: a tie among all of them.
        const q = Tensor.zeros('f32', [1, g, D]);
        const out = Tensor.zeros('f32', [1, g, D]);
        engine.topkDecode(out, q, c, { k: 1 });
        expect([...out.data], `oracle, g ${g}, nPad ${nPad}`).toEqual(Array.from({ length: g }, () => ROWS[0]).flat());
        engine.sparqDecode(out, q, c, { r: 2, k: 1, l: 0, reallocate: false });
        expect([...out.data], `sparq, g ${g}, nPad ${nPad}`).toEqual(Array.from({ length: g }, () => ROWS[0]).flat());
      }
    }
  });

  it('SparQ keeps exact ties exact: equal dot products stay equal after the temperature (fuzzer seed 4742)', () => {
    // Positions 0 and 1 both score 1.125 against q; positions 2, 3, 4 score higher. k = 4 must keep 0, not 1.
    const rows = [
      [-1.75, 2],
      [-0.5, -0.5],
      [-1, -1.75],
      [-1.25, 0.75],
      [-1.75, -1],
      [0.25, 2],
    ];
    const c = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 6 });
    const t = Tensor.f32([6, 1, 2], rows.flat());
    engine.kvAppend(c, 0, t, t);
    const out = Tensor.zeros('f32', [1, 1, 2]);
    engine.sparqDecode(out, Tensor.f32([1, 1, 2], [-1.5, -0.75]), c, { r: 2, k: 4, l: 0, reallocate: false });
    const expected = Tensor.zeros('f32', [1, 1, 2]);
    const kept = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 4 });
    const keptRows = Tensor.f32([4, 1, 2], [rows[0], rows[2], rows[3], rows[4]].flat());
    engine.kvAppend(kept, 0, keptRows, keptRows);
    engine.attentionDecode(expected, Tensor.f32([1, 1, 2], [-1.5, -0.75]), kept);
    expect([...out.data]).toEqual([...expected.data]);
  });

  it('refuses attention inputs past 2^56 (no q·k can overflow f32) and non-finite ones, before anything is written', () => {
    const c = cache(engine, ROWS);
    const out = Tensor.zeros('f32', [1, 1, D]);
    expect(() => engine.attentionDecode(out, Tensor.f32([1, 1, D], [2 ** 57, 0, 0, 0]), c)).toThrow(SparqRangeError);
    expect(() => engine.sparqDecode(out, Tensor.f32([1, 1, D], [0, 1e30, 0, 0]), c, { r: 1, k: 1 })).toThrow(
      /sparqDecode: q element 1 is 1\.0+\d*e\+30, expected \|x\| <= 72057594037927940/,
    );
    expect(() => engine.attentionDecode(out, Tensor.f32([1, 1, D], [0, NaN, 0, 0]), c)).toThrow(NonFiniteError);
    const bad = Tensor.f32([1, 1, D], [0, 0, Infinity, 0]);
    expect(() => engine.kvAppend(c, 0, bad, Tensor.zeros('f32', [1, 1, D]))).toThrow(
      new NonFiniteError('kvAppend: k element 2 is Infinity, expected a finite number'),
    );
    expect(c.nPast[0]).toBe(3);
    expect([...out.data]).toEqual([0, 0, 0, 0]);
  });

  it('refuses NaN and infinite activations in products, norms, rope and softmax (where -Infinity masks), naming the element', () => {
    const x = Tensor.f32([4], [1, 2, NaN, 4]);
    expect(() => engine.matvec(Tensor.zeros('f32', [1]), Tensor.f32([1, 4], [1, 1, 1, 1]), x)).toThrow(
      new NonFiniteError('matvec: x element 2 is NaN, expected a finite number'),
    );
    expect(() => engine.rmsnorm(Tensor.zeros('f32', [4]), x, Tensor.f32([4], [1, 1, 1, 1]))).toThrow(NonFiniteError);
    expect(() => engine.softmax(Tensor.f32([1, 3], [0, Infinity, 1]))).toThrow(
      /softmax: x element 1 is Infinity, expected a finite number or -Infinity \(masked\)/,
    );
    expect(() => engine.softmax(Tensor.f32([2, 2], [0, 1, -Infinity, -Infinity]))).toThrow(
      new SparqRangeError('softmax: row 1 of x is all -Infinity (masked), expected at least one finite entry'),
    );
    expect(() => engine.rope(Tensor.f32([1, 1, 2], [Infinity, 0]), Tensor.zeros('i32', [1]))).toThrow(NonFiniteError);
  });

  it('quantizes a block of subnormal values (1 / d overflows f32) to codes 0 and back to zeros, without undefined behaviour', () => {
    // Regression (UBSan, quant_ref.cc): the code of x * (1/d) with 1/d = infinity was a float-to-int cast of infinity.
    for (const type of ['q4_0', 'q4_1', 'q8_0'] as const) {
      const x = Tensor.f32(
        [1, 32],
        Array.from({ length: 32 }, (_, i) => (i % 2 ? 1 : -1) * 1e-39 * (1 + i / 32)),
      );
      const q = Tensor.zeros(type, [1, 32]);
      engine.quantize(q, x);
      const back = Tensor.zeros('f32', [1, 32]);
      engine.dequantize(back, q);
      expect([...back.data], type).toEqual(new Array<number>(32).fill(0));
    }
  });

  it('topk ranks NaN above every number (so it propagates), ties to the lowest index', () => {
    const out = Tensor.zeros('i32', [1, 3]);
    engine.topk(out, Tensor.f32([1, 5], [1, NaN, 3, 3, NaN]));
    expect([...out.data].sort()).toEqual([1, 2, 4]);
  });
});
