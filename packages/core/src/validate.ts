/**
 * Input validation for every op, run by the Engine before any backend sees the
 * call. Backends (and native code) trust what passes here, so every shape,
 * dtype, range and capacity an op relies on is checked in this file.
 * Messages follow `op: what, got X, expected Y`.
 */
import type { BudgetParams, H2OState, SparqParams, SparqTrace } from './attention.ts';
import type { ProductPath, RopeOptions } from './backend.ts';
import { BLOCK_DTYPES, isBlockDType, type BlockDType, type DType } from './dtype.ts';
import { DTypeError, NonFiniteError, ShapeError, SparqRangeError, formatShape } from './errors.ts';
import type { Int4Matrix } from './int4-matrix.ts';
import type { KVCache } from './kv-cache.ts';
import type { Tensor } from './tensor.ts';

/** Throws unless `value` is an integer in [min, max]. */
export function checkInt(op: string, name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in [${min}, ${max}]`;
    throw new SparqRangeError(`${op}: ${name} ${String(value)}, expected ${range}`);
  }
}

/** Throws unless `value` is a finite number greater than 0. */
export function checkPositive(op: string, name: string, value: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new SparqRangeError(`${op}: ${name} ${String(value)}, expected a finite number > 0`);
  }
}

/** Throws unless the tensor has one of `dtypes`, is contiguous, and its storage still holds it. */
export function checkTensor(op: string, name: string, t: Tensor, dtypes: readonly DType[]): void {
  if (!dtypes.includes(t.dtype))
    throw new DTypeError(`${op}: ${name} has dtype ${t.dtype}, expected ${dtypes.join(' | ')}`);
  if (!t.isContiguous())
    throw new ShapeError(`${op}: ${name} ${formatShape(t.shape)} is a strided view; pass ${name}.contiguous()`);
  // The Tensor checked its extent when made; an ArrayBuffer detached (transferred) or shrunk since holds less.
  if (t.offset + t.size > t.elementCapacity) {
    throw new SparqRangeError(
      `${op}: ${name} ${formatShape(t.shape)} needs elements [${t.offset}, ${t.offset + t.size}) of its storage, which holds ${t.elementCapacity} (a detached or shrunk ArrayBuffer)`,
    );
  }
}

/** Throws unless typed array `array` still has `length` elements (it may have been detached since it was made). */
export function checkArray(op: string, name: string, array: { length: number } | null, length: number): void {
  if (!array || array.length !== length) {
    throw new SparqRangeError(
      `${op}: ${name} holds ${array?.length ?? 0} elements, expected ${length} (a detached or shrunk ArrayBuffer)`,
    );
  }
}

/** Every buffer of the cache still at its size. */
export function checkCacheStorage(op: string, cache: KVCache): void {
  const heads = cache.batch * cache.nKvHeads;
  checkArray(op, 'cache.k', cache.k, heads * cache.capacity * cache.kRowStride);
  checkArray(op, 'cache.v', cache.v, heads * cache.capacity * cache.vRowStride);
  if (cache.kT) checkArray(op, 'cache.kT', cache.kT, heads * cache.headDim * cache.columnStride);
  if (cache.kTScale) checkArray(op, 'cache.kTScale', cache.kTScale, heads * cache.headDim * cache.kTBlocks);
  checkArray(op, 'cache.vSum', cache.vSum, cache.batch * cache.nKvHeads * cache.headDim);
  checkArray(op, 'cache.nPast', cache.nPast, cache.batch);
  checkArray(op, 'cache.nPad', cache.nPad, cache.batch);
}

/** The packed values, scales and zero points of `w` still at their sizes. */
function checkInt4Storage(op: string, name: string, w: Int4Matrix): void {
  const groups = w.rows * (w.cols / w.groupSize);
  checkArray(op, `${name}.packed`, w.packed, (w.rows * w.cols) / 2);
  checkArray(op, `${name}.scales`, w.scales, groups);
  checkArray(op, `${name}.zeros`, w.zeros, groups);
}

/** Throws unless `t.shape` equals `shape` exactly. */
export function checkShape(op: string, name: string, t: Tensor, shape: readonly number[]): void {
  if (t.shape.length !== shape.length || t.shape.some((n, i) => n !== shape[i])) {
    throw new ShapeError(`${op}: ${name} has shape ${formatShape(t.shape)}, expected ${formatShape(shape)}`);
  }
}

function checkRank(op: string, name: string, t: Tensor, rank: number, meaning: string): void {
  if (t.rank !== rank)
    throw new ShapeError(`${op}: ${name} has shape ${formatShape(t.shape)}, expected rank ${rank} ${meaning}`);
}

/**
 * Throws NonFiniteError naming the first NaN or infinite element (one NaN ruins a whole group's
 * scale, a row's sum, a softmax), and SparqRangeError for the first element above `maxAbs`.
 */
export function checkFinite(
  op: string,
  name: string,
  x: Tensor<'f32'>,
  maxAbs = Number.MAX_VALUE,
  scan: FiniteScan = firstAbove,
): void {
  const at = scan(x.data, x.offset, x.size, maxAbs);
  if (at >= 0) checkElement(op, name, x.data[x.offset + at], at, maxAbs);
}

/** firstAbove's signature: a backend may give a faster scan with the same answers (Backend.firstAbove). */
export type FiniteScan = (data: Float32Array, offset: number, size: number, maxAbs: number) => number;

/**
 * The index (from `offset`) of the first of `size` elements that is NaN, infinite or above maxAbs in
 * magnitude, or -1. Eight elements per comparison on the common path: their |x| summed in f64 (no
 * overflow: f32 terms). A NaN or infinity makes the sum fail the test, and so does an element above
 * maxAbs (the rounded sum of non-negative terms is at least its largest term); the group is then
 * read one by one. Twice as fast as one test per element (1M logits: 0.38 against 0.75 ms, Node 20).
 */
export function firstAbove(data: Float32Array, offset: number, size: number, maxAbs = Number.MAX_VALUE): number {
  const end = offset + size;
  let i = offset;
  for (; i + 8 <= end; i += 8) {
    const sum =
      Math.abs(data[i]) +
      Math.abs(data[i + 1]) +
      Math.abs(data[i + 2]) +
      Math.abs(data[i + 3]) +
      Math.abs(data[i + 4]) +
      Math.abs(data[i + 5]) +
      Math.abs(data[i + 6]) +
      Math.abs(data[i + 7]);
    if (sum <= maxAbs) continue;
    for (let j = i; j < i + 8; j++) if (!(Math.abs(data[j]) <= maxAbs)) return j - offset;
  }
  for (; i < end; i++) if (!(Math.abs(data[i]) <= maxAbs)) return i - offset;
  return -1;
}

/** checkFinite's test of element `index`, v. */
function checkElement(op: string, name: string, v: number, index: number, maxAbs: number): void {
  if (Math.abs(v) <= maxAbs) return;
  if (!Number.isFinite(v))
    throw new NonFiniteError(`${op}: ${name} element ${index} is ${v}, expected a finite number`);
  throw new SparqRangeError(
    `${op}: ${name} element ${index} is ${v}, expected |x| <= ${maxAbs} (2^56: then no q·k overflows f32)`,
  );
}

/**
 * Largest |q|, |k|, |v| the attention ops take: |q·k| <= headDim * 2^112 stays below the f32
 * limit 2^128 for any head size under 2^16, so no backend's scores overflow (docs/edge-cases.md).
 */
export const ATTENTION_MAX_ABS = 2 ** 56;

const MATRIX_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES];

/** The largest finite f16: a block's f16 scale (or minimum) must not round past it to infinity. */
const F16_MAX = 65504;

/**
 * The largest |x| each block dtype can quantize with every stored f16 finite, and why. The direct
 * formats store a fixed fraction of the block's largest value: Q4_0 d = max / -8, Q5_0 max / -16,
 * Q8_0 amax / 127. Q4_1 / Q5_1 store the minimum itself. The searched formats (K-quants, IQ4)
 * store super-scales at most about max |x| (their sub-block scales are fits of at most max |x| per
 * step, then divided by 15..128 for the super-scale), and dmin / the IQ4_XS super-scale likewise,
 * so values an f16 can hold are safe; we accept exactly those, which every real model weight is.
 */
const QUANTIZE_LIMIT: Readonly<Record<BlockDType, { max: number; why: string }>> = {
  q4_0: { max: 8 * F16_MAX, why: 'its f16 scale is max|x| / 8' },
  q5_0: { max: 16 * F16_MAX, why: 'its f16 scale is max|x| / 16' },
  q8_0: { max: 127 * F16_MAX, why: 'its f16 scale is max|x| / 127' },
  q4_1: { max: F16_MAX, why: 'it stores the block minimum as f16' },
  q5_1: { max: F16_MAX, why: 'it stores the block minimum as f16' },
  q2_k: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  q3_k: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  q4_k: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  q5_k: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  q6_k: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  iq4_nl: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
  iq4_xs: { max: F16_MAX, why: 'its f16 scales are fitted to values up to the largest f16' },
};

export function validateQuantize(op: string, out: Tensor, x: Tensor, scan: FiniteScan = firstAbove): void {
  checkTensor(op, 'x', x, ['f32']);
  if (!isBlockDType(out.dtype))
    throw new DTypeError(`${op}: out has dtype ${out.dtype}, expected ${BLOCK_DTYPES.join(' | ')}`);
  checkTensor(op, 'out', out, [out.dtype]);
  checkShape(op, 'out', out, x.shape);
  checkFinite(op, 'x', x as Tensor<'f32'>, Number.MAX_VALUE, scan);
  // Without this, a scale rounding to f16 infinity turns the whole block into NaN.
  const { max, why } = QUANTIZE_LIMIT[out.dtype];
  const data = (x as Tensor<'f32'>).data;
  for (let i = 0; i < x.size; i++) {
    const v = data[x.offset + i];
    if (Math.abs(v) > max) {
      throw new SparqRangeError(
        `${op}: x element ${i} is ${v}, expected |x| <= ${max} for ${out.dtype} (${why}, at most ${F16_MAX})`,
      );
    }
  }
}

export function validateDequantize(op: string, out: Tensor, x: Tensor): void {
  if (!isBlockDType(x.dtype))
    throw new DTypeError(`${op}: x has dtype ${x.dtype}, expected ${BLOCK_DTYPES.join(' | ')}`);
  checkTensor(op, 'x', x, [x.dtype]);
  checkTensor(op, 'out', out, ['f32']);
  checkShape(op, 'out', out, x.shape);
}

export function validateQuantizeInt4(op: string, out: Int4Matrix, x: Tensor, scan: FiniteScan = firstAbove): void {
  checkTensor(op, 'x', x, ['f32']);
  checkInt4Storage(op, 'out', out);
  checkShape(op, 'x', x, out.shape);
  checkFinite(op, 'x', x as Tensor<'f32'>, Number.MAX_VALUE, scan);
}

export function validateDequantizeInt4(op: string, out: Tensor, w: Int4Matrix): void {
  checkTensor(op, 'out', out, ['f32']);
  checkInt4Storage(op, 'w', w);
  checkShape(op, 'out', out, w.shape);
}

/** matvec: w (rows, cols), x (cols), out (rows); matmul: x (n, cols), out (n, rows). */
export function validateMatrixProduct(
  op: string,
  out: Tensor,
  w: Tensor | Int4Matrix,
  x: Tensor,
  batched: boolean,
  scan: FiniteScan = firstAbove,
): void {
  const [rows, cols] = w.shape;
  if ('dtype' in w) {
    checkTensor(op, 'w', w, MATRIX_DTYPES);
    checkRank(op, 'w', w, 2, '(rows, cols)');
  } else {
    checkInt4Storage(op, 'w', w);
  }
  checkTensor(op, 'x', x, ['f32']);
  checkTensor(op, 'out', out, ['f32']);
  checkFinite(op, 'x', x as Tensor<'f32'>, Number.MAX_VALUE, scan);
  if (batched) {
    checkRank(op, 'x', x, 2, '(n, cols)');
    if (x.shape[1] !== cols)
      throw new ShapeError(
        `${op}: x ${formatShape(x.shape)} does not fit w ${formatShape(w.shape)}: x needs ${cols} columns`,
      );
    checkShape(op, 'out', out, [x.shape[0], rows]);
  } else {
    checkShape(op, 'x', x, [cols]);
    checkShape(op, 'out', out, [rows]);
  }
}

export function validateProductPath(op: string, path: ProductPath): void {
  if (path !== 'dequant' && path !== 'int8')
    throw new SparqRangeError(`${op}: path ${String(path)}, expected 'dequant' | 'int8'`);
}

export function validateRmsnorm(
  op: string,
  out: Tensor,
  x: Tensor,
  weight: Tensor,
  eps: number,
  scan: FiniteScan = firstAbove,
): void {
  checkTensor(op, 'x', x, ['f32']);
  checkTensor(op, 'out', out, ['f32']);
  checkTensor(op, 'weight', weight, ['f32']);
  if (x.rank < 1) throw new ShapeError(`${op}: x has shape ${formatShape(x.shape)}, expected (n, dim)`);
  checkShape(op, 'out', out, x.shape);
  checkShape(op, 'weight', weight, [x.shape[x.rank - 1]]);
  checkPositive(op, 'eps', eps);
  checkFinite(op, 'x', x as Tensor<'f32'>, Number.MAX_VALUE, scan);
  checkFinite(op, 'weight', weight as Tensor<'f32'>, Number.MAX_VALUE, scan);
}

export function validateRope(
  op: string,
  x: Tensor,
  positions: Tensor,
  theta: number,
  options?: RopeOptions,
  scan: FiniteScan = firstAbove,
): void {
  checkTensor(op, 'x', x, ['f32']);
  checkTensor(op, 'positions', positions, ['i32']);
  checkRank(op, 'x', x, 3, '(n, nHeads, headDim)');
  if (x.shape[2] % 2 !== 0)
    throw new ShapeError(`${op}: headDim ${x.shape[2]} of x ${formatShape(x.shape)} must be even (rotated in pairs)`);
  checkShape(op, 'positions', positions, [x.shape[0]]);
  checkFinite(op, 'x', x as Tensor<'f32'>, Number.MAX_VALUE, scan);
  for (let i = 0; i < positions.size; i++) checkInt(op, `positions[${i}]`, positions.data[positions.offset + i], 0);
  checkPositive(op, 'theta', theta);
  if (options?.freqs !== undefined) {
    checkTensor(op, 'freqs', options.freqs, ['f32']);
    checkShape(op, 'freqs', options.freqs, [x.shape[2] / 2]);
    const f = options.freqs;
    for (let i = 0; i < f.size; i++) {
      const value = f.data[f.offset + i];
      if (!Number.isFinite(value) || value < 0)
        throw new SparqRangeError(`${op}: freqs[${i}] ${value}, expected a finite number >= 0`);
    }
  }
  if (options?.scale !== undefined) checkPositive(op, 'scale', options.scale);
  if (options?.pairs !== undefined && options.pairs !== 'adjacent' && options.pairs !== 'halves') {
    throw new SparqRangeError(`${op}: pairs ${String(options.pairs)}, expected 'adjacent' or 'halves'`);
  }
}

/**
 * Throws when `out` shares storage with `x` in part: elementwise ops write out[i] from x[i]
 * alone, so the same elements (out is x) are fine, a shifted view of them is not.
 */
function checkNoPartialOverlap(op: string, name: string, out: Tensor<'f32'>, x: Tensor<'f32'>): void {
  if (out.data.buffer !== x.data.buffer) return;
  const at = (t: Tensor<'f32'>) => t.data.byteOffset + t.offset * 4;
  if (at(out) === at(x)) return;
  if (at(out) < at(x) + x.size * 4 && at(x) < at(out) + out.size * 4) {
    throw new ShapeError(
      `${op}: out overlaps ${name} without being ${name} (bytes ${at(out)} and ${at(x)} of one buffer): pass ${name} itself or separate storage`,
    );
  }
}

/**
 * An elementwise op of two inputs (named aName and bName in messages): a, b and out f32 of one
 * shape, out either input itself or storage of its own.
 */
function checkElementwise(op: string, out: Tensor, aName: string, a: Tensor, bName: string, b: Tensor): void {
  checkTensor(op, aName, a, ['f32']);
  checkTensor(op, bName, b, ['f32']);
  checkTensor(op, 'out', out, ['f32']);
  checkShape(op, bName, b, a.shape);
  checkShape(op, 'out', out, a.shape);
  checkNoPartialOverlap(op, aName, out as Tensor<'f32'>, a as Tensor<'f32'>);
  checkNoPartialOverlap(op, bName, out as Tensor<'f32'>, b as Tensor<'f32'>);
}

/** out, gate, up: f32 of one shape; gate and up finite (silu(-inf) is -inf * 0: NaN by one formula, -inf by another). */
export function validateSwiglu(op: string, out: Tensor, gate: Tensor, up: Tensor, scan: FiniteScan = firstAbove): void {
  checkElementwise(op, out, 'gate', gate, 'up', up);
  checkFinite(op, 'gate', gate as Tensor<'f32'>, Number.MAX_VALUE, scan);
  checkFinite(op, 'up', up as Tensor<'f32'>, Number.MAX_VALUE, scan);
}

/**
 * out, a, b: f32 of one shape; out may be a or b. Not checked for finite values: a NaN or infinity
 * in a or b reaches out unchanged, where the next op that reads it names it (and two finite
 * values may overflow to infinity however the inputs are checked).
 */
export function validateAdd(op: string, out: Tensor, a: Tensor, b: Tensor): void {
  checkElementwise(op, out, 'a', a, 'b', b);
}

export function validateSoftmax(op: string, x: Tensor): void {
  checkTensor(op, 'x', x, ['f32']);
  if (x.rank < 1 || x.shape[x.rank - 1] < 1)
    throw new ShapeError(`${op}: x has shape ${formatShape(x.shape)}, expected rows of length >= 1`);
  // -Infinity masks an entry (probability 0); NaN, +Infinity and a row with nothing unmasked have no softmax.
  const { data, offset } = x as Tensor<'f32'>;
  const len = x.shape[x.rank - 1];
  for (let row = 0; row < x.size / len; row++) {
    let unmasked = false;
    for (let j = 0; j < len; j++) {
      const v = data[offset + row * len + j];
      if (Number.isNaN(v) || v === Infinity)
        throw new NonFiniteError(
          `${op}: x element ${row * len + j} is ${v}, expected a finite number or -Infinity (masked)`,
        );
      unmasked ||= v !== -Infinity;
    }
    if (!unmasked)
      throw new SparqRangeError(`${op}: row ${row} of x is all -Infinity (masked), expected at least one finite entry`);
  }
}

export function validateTopk(op: string, out: Tensor, x: Tensor): void {
  checkTensor(op, 'x', x, ['f32']);
  checkTensor(op, 'out', out, ['i32']);
  checkRank(op, 'x', x, 2, '(n, len)');
  checkRank(op, 'out', out, 2, '(n, k)');
  if (out.shape[0] !== x.shape[0])
    throw new ShapeError(`${op}: out ${formatShape(out.shape)} and x ${formatShape(x.shape)} differ in rows`);
  checkInt(op, 'k (out.shape[1])', out.shape[1], 1, x.shape[1]);
}

export function validateSequence(op: string, cache: KVCache, seq: number): void {
  checkInt(op, 'sequence', seq, 0, cache.batch - 1);
  checkCacheStorage(op, cache);
}

export function validateKvAppend(
  op: string,
  cache: KVCache,
  seq: number,
  k: Tensor,
  v: Tensor,
  scan: FiniteScan = firstAbove,
): void {
  validateSequence(op, cache, seq);
  checkTensor(op, 'k', k, ['f32']);
  checkTensor(op, 'v', v, ['f32']);
  checkRank(op, 'k', k, 3, '(N, nKvHeads, headDim)');
  if (k.shape[0] < 1) throw new ShapeError(`${op}: k has shape ${formatShape(k.shape)}, expected at least one token`);
  checkShape(op, 'k', k, [k.shape[0], cache.nKvHeads, cache.headDim]);
  checkShape(op, 'v', v, k.shape);
  cache.checkRoom(op, seq, k.shape[0]);
  checkFinite(op, 'k', k as Tensor<'f32'>, ATTENTION_MAX_ABS, scan);
  checkFinite(op, 'v', v as Tensor<'f32'>, ATTENTION_MAX_ABS, scan);
}

/** q and out (batch, nHeads, headDim) against the cache; every sequence needs a valid position. */
export function validateDecode(
  op: string,
  out: Tensor,
  q: Tensor,
  cache: KVCache,
  scan: FiniteScan = firstAbove,
): void {
  checkTensor(op, 'q', q, ['f32']);
  checkTensor(op, 'out', out, ['f32']);
  checkRank(op, 'q', q, 3, '(batch, nHeads, headDim)');
  const [batch, nHeads, headDim] = q.shape;
  if (batch !== cache.batch || headDim !== cache.headDim) {
    throw new ShapeError(
      `${op}: q ${formatShape(q.shape)} does not fit the cache (batch ${cache.batch}, headDim ${cache.headDim})`,
    );
  }
  if (nHeads < 1 || nHeads % cache.nKvHeads !== 0) {
    throw new ShapeError(
      `${op}: q has ${nHeads} heads, expected a positive multiple of the cache's ${cache.nKvHeads} KV heads`,
    );
  }
  checkShape(op, 'out', out, q.shape);
  checkCacheStorage(op, cache);
  checkFinite(op, 'q', q as Tensor<'f32'>, ATTENTION_MAX_ABS, scan);
  for (let b = 0; b < cache.batch; b++) {
    if (cache.nValid(b) < 1)
      throw new SparqRangeError(
        `${op}: sequence ${b} has no valid positions (nPast ${cache.nPast[b]}, nPad ${cache.nPad[b]}); append its token first`,
      );
  }
}

export function validatePrefill(
  op: string,
  out: Tensor,
  q: Tensor,
  cache: KVCache,
  seq: number,
  scan: FiniteScan = firstAbove,
): void {
  validateSequence(op, cache, seq);
  checkTensor(op, 'q', q, ['f32']);
  checkTensor(op, 'out', out, ['f32']);
  checkRank(op, 'q', q, 3, '(N, nHeads, headDim)');
  const [n, nHeads, headDim] = q.shape;
  if (headDim !== cache.headDim || nHeads < 1 || nHeads % cache.nKvHeads !== 0) {
    throw new ShapeError(
      `${op}: q ${formatShape(q.shape)} does not fit the cache (headDim ${cache.headDim}, heads a multiple of ${cache.nKvHeads})`,
    );
  }
  checkShape(op, 'out', out, q.shape);
  checkInt(op, 'N (new tokens)', n, 1, cache.nValid(seq));
  checkFinite(op, 'q', q as Tensor<'f32'>, ATTENTION_MAX_ABS, scan);
}

export function validateBudget(op: string, params: BudgetParams): void {
  if (params === null || typeof params !== 'object')
    throw new SparqRangeError(`${op}: params ${String(params)}, expected { k }`);
  checkInt(op, 'k', params.k, 1);
}

export function validateSparq(
  op: string,
  cache: KVCache,
  params: SparqParams,
  trace: SparqTrace | undefined,
  nHeads: number,
): void {
  validateBudget(op, params);
  checkInt(op, 'r', params.r, 1, cache.headDim);
  if (params.l !== undefined) checkInt(op, 'l', params.l, 0);
  if (params.reallocate !== undefined && typeof params.reallocate !== 'boolean') {
    throw new SparqRangeError(`${op}: reallocate ${String(params.reallocate)}, expected true or false`);
  }
  if (trace) {
    const want = [cache.batch, nHeads, cache.nKvHeads, params.r, params.k];
    const got = [trace.batch, trace.nHeads, trace.nKvHeads, trace.r, trace.k];
    if (want.some((n, i) => n !== got[i])) {
      throw new ShapeError(
        `${op}: trace is sized for (batch, nHeads, nKvHeads, r, k) ${formatShape(got)}, expected ${formatShape(want)}`,
      );
    }
    // Its arrays too: a trace-like object (or one whose buffers were detached) may not match its fields.
    const bh = cache.batch * cache.nKvHeads;
    checkArray(op, 'trace.i1', trace.i1, bh * params.r);
    checkArray(op, 'trace.i2', trace.i2, bh * params.k);
    checkArray(op, 'trace.i2Count', trace.i2Count, bh);
    checkArray(op, 'trace.alpha', trace.alpha, cache.batch * nHeads);
    checkArray(op, 'trace.tau', trace.tau, cache.batch * nHeads);
  }
}

export function validateH2OState(op: string, cache: KVCache, state: H2OState): void {
  if (state.batch !== cache.batch || state.nKvHeads !== cache.nKvHeads || state.capacity !== cache.capacity) {
    throw new ShapeError(
      `${op}: H2O state is sized for (batch, nKvHeads, capacity) ${formatShape([state.batch, state.nKvHeads, state.capacity])}, the cache is ${formatShape([cache.batch, cache.nKvHeads, cache.capacity])}`,
    );
  }
  checkArray(op, 'state.acc', state.acc, cache.batch * cache.nKvHeads * cache.capacity);
  checkArray(op, 'state.evicted', state.evicted, cache.batch * cache.nKvHeads * cache.capacity);
}
