/**
 * Validation runs in core before any backend: these tests use a backend that
 * implements every op as a spy, and check that bad input is rejected with a
 * message naming the op, what was given and what is valid, and that the
 * backend was never called.
 */
import {
  CapacityError,
  DTypeError,
  Engine,
  H2OState,
  Int4Matrix,
  KVCache,
  NonFiniteError,
  OP_NAMES,
  ShapeError,
  SparqRangeError,
  SparqTrace,
  Tensor,
  type Backend,
} from '@sparq/core';
import { beforeEach, describe, expect, it } from 'vitest';

const calls: string[] = [];
const spy = Object.fromEntries(OP_NAMES.map((op) => [op, () => calls.push(op)]));
const engine = new Engine({
  name: 'spy',
  info: () => ({ name: 'spy', kernel: 'none', threads: 1 }),
  ...spy,
} as Backend);

function cacheWith(tokens: number, options: Partial<ConstructorParameters<typeof KVCache>[0]> = {}): KVCache {
  const cache = new KVCache({ nKvHeads: 2, headDim: 8, capacity: 16, ...options });
  for (let b = 0; b < cache.batch; b++) cache.nPast[b] = tokens;
  return cache;
}
const q = (batch: number, heads: number, d = 8) => Tensor.zeros('f32', [batch, heads, d]);

beforeEach(() => {
  calls.length = 0;
});

describe('validation before dispatch', () => {
  it('passes good input through to the backend', () => {
    const cache = cacheWith(4);
    engine.sparqDecode(q(1, 4), q(1, 4), cache, { r: 2, k: 3, l: 1 });
    engine.matvec(Tensor.zeros('f32', [3]), Tensor.zeros('f32', [3, 5]), Tensor.zeros('f32', [5]));
    expect(calls).toEqual(['sparqDecode', 'matvec']);
  });

  it('names both shapes on a mismatch', () => {
    expect(() =>
      engine.matvec(Tensor.zeros('f32', [3]), Tensor.zeros('f32', [3, 5]), Tensor.zeros('f32', [4])),
    ).toThrow(new ShapeError('matvec: x has shape [4], expected [5]'));
    expect(() =>
      engine.matmul(Tensor.zeros('f32', [2, 3]), Tensor.zeros('f32', [3, 5]), Tensor.zeros('f32', [2, 4])),
    ).toThrow('matmul: x [2, 4] does not fit w [3, 5]: x needs 5 columns');
    expect(() => engine.attentionDecode(q(1, 4, 6), q(1, 4, 6), cacheWith(3))).toThrow(
      'attentionDecode: q [1, 4, 6] does not fit the cache (batch 1, headDim 8)',
    );
    expect(calls).toEqual([]);
  });

  it('gives the valid range for r, k, l and GQA groups', () => {
    const cache = cacheWith(4);
    const bad: [object, RegExp][] = [
      [{ r: 0, k: 2 }, /sparqDecode: r 0, expected an integer in \[1, 8\]/],
      [{ r: 9, k: 2 }, /r 9, expected an integer in \[1, 8\]/],
      [{ r: 2, k: 0 }, /k 0, expected an integer >= 1/],
      [{ r: 2.5, k: 2 }, /r 2.5, expected an integer/],
      [{ r: 2, k: 2, l: -1 }, /l -1, expected an integer >= 0/],
      [{ r: 2, k: 2, reallocate: 'yes' }, /reallocate yes, expected true or false/],
    ];
    for (const [params, message] of bad) {
      expect(() => engine.sparqDecode(q(1, 4), q(1, 4), cache, params as never)).toThrow(SparqRangeError);
      expect(() => engine.sparqDecode(q(1, 4), q(1, 4), cache, params as never)).toThrow(message);
    }
    expect(() => engine.attentionDecode(q(1, 3), q(1, 3), cache)).toThrow(
      "q has 3 heads, expected a positive multiple of the cache's 2 KV heads",
    );
    expect(() => engine.topkDecode(q(1, 2), q(1, 2), cache, { k: 0 })).toThrow(
      'topkDecode: k 0, expected an integer >= 1',
    );
    expect(() =>
      engine.sparqDecode(q(1, 2), q(1, 2), cache, { r: 2, k: 3 }, { trace: new SparqTrace(1, 2, 2, 2, 4) }),
    ).toThrow(/trace is sized for/);
    expect(calls).toEqual([]);
  });

  it('refuses decode on a sequence with no valid positions, and prefill longer than the cache', () => {
    const cache = cacheWith(2, { batch: 2 });
    cache.nPad[1] = 2;
    expect(() => engine.attentionDecode(q(2, 2), q(2, 2), cache)).toThrow(
      /sequence 1 has no valid positions \(nPast 2, nPad 2\)/,
    );
    expect(() => engine.attentionPrefill(q(3, 2), q(3, 2), cache, 0)).toThrow(
      'attentionPrefill: N (new tokens) 3, expected an integer in [1, 2]',
    );
    expect(() => engine.attentionPrefill(q(1, 2), q(1, 2), cache, 2)).toThrow(
      'attentionPrefill: sequence 2, expected an integer in [0, 1]',
    );
  });

  it('refuses an append past capacity before the backend runs, naming both numbers', () => {
    const cache = cacheWith(14);
    const kv = Tensor.zeros('f32', [3, 2, 8]);
    expect(() => engine.kvAppend(cache, 0, kv, kv)).toThrow(CapacityError);
    expect(() => engine.kvAppend(cache, 0, kv, kv)).toThrow(
      'kvAppend: appending 3 tokens at position 14 of sequence 0 needs 17 positions, capacity is 16',
    );
    expect(() => engine.kvAppend(cache, 0, kv, Tensor.zeros('f32', [3, 2, 4]))).toThrow(
      'kvAppend: v has shape [3, 2, 4], expected [3, 2, 8]',
    );
    expect(cache.nPast[0]).toBe(14);
    expect(calls).toEqual([]);
  });

  it('rejects NaN in quantization input, naming the first bad element', () => {
    const x = Tensor.f32(
      [1, 32],
      Array.from({ length: 32 }, (_, i) => (i === 7 ? NaN : i)),
    );
    expect(() => engine.quantize(Tensor.zeros('q4_0', [1, 32]), x)).toThrow(
      new NonFiniteError('quantize: x element 7 is NaN, expected a finite number'),
    );
    // Scales that would round to f16 infinity (the NaN-block bug): refused, naming the limit and why.
    const big = Tensor.f32(
      [1, 32],
      Array.from({ length: 32 }, (_, i) => (i === 3 ? 70000 : 1)),
    );
    expect(() => engine.quantize(Tensor.zeros('q4_1', [1, 32]), big)).toThrow(
      new SparqRangeError(
        'quantize: x element 3 is 70000, expected |x| <= 65504 for q4_1 (it stores the block minimum as f16, at most 65504)',
      ),
    );
    expect(() =>
      engine.quantize(Tensor.zeros('q4_0', [1, 32]), Tensor.f32([1, 32], new Array<number>(32).fill(-524033))),
    ).toThrow(
      'quantize: x element 0 is -524033, expected |x| <= 524032 for q4_0 (its f16 scale is max|x| / 8, at most 65504)',
    );
    expect(() =>
      engine.quantize(Tensor.zeros('q4_k', [1, 256]), Tensor.f32([1, 256], new Array<number>(256).fill(1e5))),
    ).toThrow(/expected \|x\| <= 65504 for q4_k/);
    expect(() =>
      engine.quantize(Tensor.zeros('iq4_xs', [1, 256]), Tensor.f32([1, 256], new Array<number>(256).fill(-Infinity))),
    ).toThrow(NonFiniteError);
    x.data[7] = Infinity;
    expect(() => engine.quantizeInt4(new Int4Matrix(1, 32), x)).toThrow('quantizeInt4: x element 7 is Infinity');
    expect(calls).toEqual([]);
  });

  it("scans with the backend's firstAbove when it has one: every finite check, with its limit", () => {
    const scans: [number, number, number][] = [];
    const scanning = new Engine({
      name: 'spy-scan',
      info: () => ({ name: 'spy-scan', kernel: 'none', threads: 1 }),
      ...spy,
      firstAbove: (_data: Float32Array, offset: number, size: number, maxAbs: number) => {
        scans.push([offset, size, maxAbs]);
        return size > 4 ? 3 : -1; // the backend's answer, whatever the data
      },
    } as Backend);
    const storage = new Float32Array(20);
    scanning.swiglu(Tensor.zeros('f32', [4]), Tensor.zeros('f32', [4]), new Tensor('f32', storage, [4], undefined, 9));
    expect(scans).toEqual([
      [0, 4, Number.MAX_VALUE],
      [9, 4, Number.MAX_VALUE],
    ]);
    // NaN at 1 and 3: the error names the scan's answer, 3 (validate.ts's own scan would name 1).
    const x = Tensor.f32([6], [0, NaN, 0, NaN, 0, 0]);
    expect(() => scanning.matvec(Tensor.zeros('f32', [2]), Tensor.zeros('f32', [2, 6]), x)).toThrow(
      'matvec: x element 3 is NaN, expected a finite number',
    );
    scans.length = 0;
    scanning.kvAppend(cacheWith(0), 0, Tensor.zeros('f32', [1, 2, 8]), Tensor.zeros('f32', [1, 2, 8]));
    expect(scans.map((s) => s[2])).toEqual([2 ** 56, 2 ** 56]);
    expect(scanning.firstAbove(Tensor.zeros('f32', [8]))).toBe(3);
    expect(calls).toEqual(['swiglu', 'kvAppend']);
  });

  it('names the first non-finite or out-of-range element wherever it falls (checkFinite tests eight at a time)', () => {
    // 19 elements: two groups of eight and a tail of three; a second bad element later must not be the one named.
    const cols = 19;
    const w = Tensor.zeros('f32', [2, cols]);
    for (let at = 0; at < cols; at++) {
      for (const bad of [NaN, Infinity, -Infinity]) {
        const x = Tensor.f32(
          [1, cols],
          Array.from({ length: cols }, (_, i) => (i === at ? bad : i === cols - 1 ? NaN : i - 9)),
        );
        if (at === cols - 1) x.data[at] = bad;
        expect(() => engine.matmul(Tensor.zeros('f32', [1, 2]), w, x)).toThrow(
          new NonFiniteError(`matmul: x element ${at} is ${bad}, expected a finite number`),
        );
      }
    }
    // Attention inputs: |x| <= 2^56 each. Eight elements of 2^55 sum past the limit and still pass; one of 2^57 is named.
    const kv = () => Tensor.f32([3, 2, 8], new Array<number>(48).fill(2 ** 55));
    const cache = cacheWith(0);
    expect(() => engine.kvAppend(cache, 0, kv(), kv())).not.toThrow();
    for (const at of [0, 7, 8, 20, 47]) {
      const k = kv();
      k.data[at] = -(2 ** 57);
      k.data[47] = at === 47 ? k.data[47] : NaN;
      expect(() => engine.kvAppend(cacheWith(0), 0, k, kv())).toThrow(
        new SparqRangeError(
          `kvAppend: k element ${at} is ${-(2 ** 57)}, expected |x| <= ${2 ** 56} (2^56: then no q·k overflows f32)`,
        ),
      );
    }
  });

  it('checks dtypes, contiguity, rope positions and topk k', () => {
    expect(() => engine.quantize(Tensor.zeros('f16', [1, 32]) as never, Tensor.zeros('f32', [1, 32]))).toThrow(
      DTypeError,
    );
    expect(() => engine.softmax(Tensor.zeros('f32', [3, 4]).transpose())).toThrow(
      'softmax: x [4, 3] is a strided view; pass x.contiguous()',
    );
    const positions = Tensor.zeros('i32', [2]);
    positions.data[1] = -1;
    expect(() => engine.rope(Tensor.zeros('f32', [2, 1, 4]), positions)).toThrow(
      'rope: positions[1] -1, expected an integer >= 0',
    );
    expect(() => engine.rope(Tensor.zeros('f32', [2, 1, 3]), Tensor.zeros('i32', [2]))).toThrow(/must be even/);
    expect(() =>
      engine.rope(Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('i32', [1]), 10000, { freqs: Tensor.zeros('f32', [3]) }),
    ).toThrow(/freqs/);
    expect(() =>
      engine.rope(Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('i32', [1]), 10000, {
        freqs: Tensor.f32([2], [1, NaN]),
      }),
    ).toThrow('rope: freqs[1] NaN, expected a finite number >= 0');
    expect(() => engine.rope(Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('i32', [1]), 10000, { scale: 0 })).toThrow(
      /scale 0/,
    );
    expect(() =>
      engine.rope(Tensor.zeros('f32', [1, 1, 4]), Tensor.zeros('i32', [1]), 10000, { pairs: 'odd' as never }),
    ).toThrow(/pairs odd/);
    expect(() => engine.topk(Tensor.zeros('i32', [1, 5]), Tensor.zeros('f32', [1, 4]))).toThrow(
      'topk: k (out.shape[1]) 5, expected an integer in [1, 4]',
    );
    expect(() =>
      engine.rmsnorm(Tensor.zeros('f32', [2, 4]), Tensor.zeros('f32', [2, 4]), Tensor.zeros('f32', [4]), 0),
    ).toThrow('rmsnorm: eps 0, expected a finite number > 0');
    expect(() =>
      engine.matvecInt4(Tensor.zeros('f32', [1]), new Int4Matrix(1, 32), Tensor.zeros('f32', [32]), 'fp8' as never),
    ).toThrow("matvecInt4: path fp8, expected 'dequant' | 'int8'");
    expect(calls).toEqual([]);
  });

  it('checks that H2O state matches the cache', () => {
    const cache = cacheWith(4);
    const other = new H2OState(new KVCache({ nKvHeads: 2, headDim: 8, capacity: 8 }));
    expect(() => engine.h2oDecode(q(1, 2), q(1, 2), cache, other, { k: 2 })).toThrow(
      'h2oDecode: H2O state is sized for (batch, nKvHeads, capacity) [1, 2, 8], the cache is [1, 2, 16]',
    );
    expect(() => engine.h2oSeed(other, q(1, 2), cache, 0)).toThrow(
      'h2oSeed: H2O state is sized for (batch, nKvHeads, capacity) [1, 2, 8], the cache is [1, 2, 16]',
    );
    expect(() => engine.h2oSeed(new H2OState(cache), q(5, 2), cache, 0)).toThrow('h2oSeed: N (new tokens)');
    expect(() => engine.attentionPrefill(q(1, 2), q(1, 2), cache, 0, { h2o: other })).toThrow(
      'attentionPrefill: H2O state is sized for (batch, nKvHeads, capacity) [1, 2, 8], the cache is [1, 2, 16]',
    );
    expect(calls).toEqual([]);
  });
});

describe('KVCache layout', () => {
  it('allocates once, with K transposed only in the k-twice layout', () => {
    const twice = new KVCache({ nKvHeads: 2, headDim: 4, capacity: 10, batch: 3, dtype: 'f16' });
    expect(twice.k).toBeInstanceOf(Uint16Array);
    expect(twice.k.length).toBe(3 * 2 * 10 * 4);
    expect(twice.kT!.length).toBe(twice.k.length);
    expect(twice.kRowOffset(1, 1, 2)).toBe(((1 * 2 + 1) * 10 + 2) * 4);
    expect(twice.columnOffset(1, 1, 3)).toBe(((1 * 2 + 1) * 4 + 3) * 10);
    const single = new KVCache({ nKvHeads: 1, headDim: 4, capacity: 10, layout: 'single-k', shared: true });
    expect(single.kT).toBeNull();
    expect(single.k.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(() => new KVCache({ nKvHeads: 1, headDim: 4, capacity: 0 })).toThrow(
      'KVCache: capacity 0, expected an integer >= 1',
    );
  });

  it('resets one sequence with its padding and keeps the mean of valid rows', () => {
    const cache = new KVCache({ nKvHeads: 1, headDim: 2, capacity: 4, batch: 2 });
    cache.nPast[0] = 3;
    cache.vSum.set([3, 6, 10, 20]);
    const mean = new Float32Array(2);
    cache.vMean(0, 0, mean);
    expect([...mean]).toEqual([1, 2]);
    cache.reset(0, 1);
    expect(cache.nPast[0]).toBe(0);
    expect(cache.nPad[0]).toBe(1);
    expect([...cache.vSum]).toEqual([0, 0, 10, 20]);
    expect(() => cache.reset(0, 5)).toThrow('KVCache.reset: nPad 5, expected an integer in [0, 4]');
  });
});
