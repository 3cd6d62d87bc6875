/**
 * A tensor: a typed array plus shape, strides and offset, all counted in
 * elements (ggml counts bytes; we convert in the native loader, in one place).
 *
 *   element (i0, i1, ..., in) lives at data[offset + i0*strides[0] + ... + in*strides[n]]
 *
 * Views (slice, transpose, permute, reshape of contiguous data) share `data`
 * and cost nothing; `contiguous()` is the one explicit copy. Block-quantized
 * tensors (q4_0, q4_1, q8_0) keep their logical shape in elements; their last
 * dimension must stay whole blocks, so only outer dimensions can be viewed.
 */
import {
  BLOCK_LAYOUT,
  allocStorage,
  isBlockDType,
  storageMatches,
  type DType,
  type Storage,
  type StorageOf,
} from './dtype.ts';
import { DTypeError, ShapeError, SparqRangeError, formatShape } from './errors.ts';

/** Row-major strides for `shape`: the last dimension varies fastest. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

/** Number of elements of `shape` (1 for a scalar shape []). */
export function shapeSize(shape: readonly number[]): number {
  let size = 1;
  for (const n of shape) size *= n;
  return size;
}

function checkShape(op: string, shape: readonly number[]): void {
  for (const n of shape) {
    if (!Number.isInteger(n) || n < 0)
      throw new SparqRangeError(
        `${op}: shape ${formatShape(shape)} has a dimension that is not a non-negative integer`,
      );
  }
}

/** How a new Tensor allocates its data: `shared` puts it in a SharedArrayBuffer (for worker threads). */
export interface TensorOptions {
  /** Back the tensor with a SharedArrayBuffer so worker threads can read and write it. */
  shared?: boolean;
}

/** A typed array with a shape, strides and offset counted in elements (this file's header has the layout). */
export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly data: StorageOf[D];
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  /** Number of elements (the product of the shape): computed once, since loops test it per element. */
  readonly size: number;

  constructor(dtype: D, data: StorageOf[D], shape: readonly number[], strides?: readonly number[], offset = 0) {
    checkShape('Tensor', shape);
    if (!storageMatches(dtype, data as Storage)) {
      throw new DTypeError(`Tensor: dtype ${dtype} cannot be stored in a ${data.constructor.name}`);
    }
    this.dtype = dtype;
    this.data = data;
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze(strides ? [...strides] : contiguousStrides(shape));
    this.offset = offset;
    this.size = shapeSize(this.shape);
    if (this.strides.length !== this.shape.length) {
      throw new ShapeError(`Tensor: strides ${formatShape(this.strides)} do not match shape ${formatShape(shape)}`);
    }
    if (isBlockDType(dtype)) {
      const block = BLOCK_LAYOUT[dtype].elements;
      const last = shape.length - 1;
      if (last < 0 || shape[last] % block !== 0 || this.strides[last] !== 1 || offset % block !== 0) {
        throw new ShapeError(
          `Tensor: ${dtype} needs a contiguous last dimension of whole ${block}-element blocks, got shape ${formatShape(shape)}`,
        );
      }
    }
    // The furthest element must lie inside the storage (views never read out of bounds).
    if (this.size > 0) {
      let last = offset;
      let first = offset;
      for (let i = 0; i < this.shape.length; i++) {
        const span = (this.shape[i] - 1) * this.strides[i];
        if (span > 0) last += span;
        else first += span;
      }
      if (first < 0 || last >= this.elementCapacity) {
        throw new SparqRangeError(
          `Tensor: shape ${formatShape(shape)} with strides ${formatShape(this.strides)} at offset ${offset} reaches outside its ${this.elementCapacity} elements`,
        );
      }
    }
  }

  /** Zero-filled contiguous tensor. */
  static zeros<D extends DType>(dtype: D, shape: readonly number[], options: TensorOptions = {}): Tensor<D> {
    checkShape('Tensor.zeros', shape);
    return new Tensor(dtype, allocStorage(dtype, shapeSize(shape), options.shared) as StorageOf[D], shape);
  }

  /** Contiguous f32 tensor holding `values` (copied). */
  static f32(shape: readonly number[], values: ArrayLike<number>, options: TensorOptions = {}): Tensor<'f32'> {
    const t = Tensor.zeros('f32', shape, options);
    if (values.length !== t.size)
      throw new ShapeError(`Tensor.f32: ${values.length} values for shape ${formatShape(shape)} (${t.size} elements)`);
    t.data.set(values);
    return t;
  }

  /** Wraps existing storage as a contiguous tensor of `shape` (no copy). */
  static wrap<D extends DType>(dtype: D, data: StorageOf[D], shape: readonly number[]): Tensor<D> {
    return new Tensor(dtype, data, shape);
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Elements the storage can hold (for block types: bytes / block bytes * block elements). */
  get elementCapacity(): number {
    if (isBlockDType(this.dtype)) {
      const { elements, bytes } = BLOCK_LAYOUT[this.dtype];
      return (this.data.length / bytes) * elements;
    }
    return this.data.length;
  }

  /** True when elements are laid out row-major with no gaps. */
  isContiguous(): boolean {
    const expected = contiguousStrides(this.shape);
    for (let i = 0; i < this.shape.length; i++) {
      if (this.shape[i] !== 1 && this.strides[i] !== expected[i]) return false;
    }
    return true;
  }

  /** Storage index of an element (plain dtypes). */
  index(...indices: number[]): number {
    if (indices.length !== this.rank)
      throw new ShapeError(`Tensor.index: ${indices.length} indices for shape ${formatShape(this.shape)}`);
    let at = this.offset;
    for (let i = 0; i < indices.length; i++) {
      const n = indices[i];
      if (!Number.isInteger(n) || n < 0 || n >= this.shape[i]) {
        throw new SparqRangeError(
          `Tensor.index: index ${n} on dimension ${i}, expected an integer in [0, ${this.shape[i] - 1}]`,
        );
      }
      at += n * this.strides[i];
    }
    return at;
  }

  /** Elements [start, end) of dimension `dim`, as a view. */
  slice(dim: number, start: number, end: number = this.shape[dim]): Tensor<D> {
    this.checkDim('slice', dim);
    const n = this.shape[dim];
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > n || start > end) {
      throw new SparqRangeError(
        `Tensor.slice: range [${start}, ${end}) on dimension ${dim} of shape ${formatShape(this.shape)}, expected 0 <= start <= end <= ${n}`,
      );
    }
    if (isBlockDType(this.dtype) && dim === this.rank - 1) {
      throw new ShapeError(`Tensor.slice: ${this.dtype} tensors cannot be sliced inside a row`);
    }
    const shape = [...this.shape];
    shape[dim] = end - start;
    return new Tensor(this.dtype, this.data, shape, this.strides, this.offset + start * this.strides[dim]);
  }

  /** Dimensions reordered: new dimension i is old dimension `order[i]`, as a view. */
  permute(...order: number[]): Tensor<D> {
    const sorted = [...order].sort((a, b) => a - b);
    if (order.length !== this.rank || sorted.some((v, i) => v !== i)) {
      throw new SparqRangeError(
        `Tensor.permute: order ${formatShape(order)} is not a permutation of [0, ${this.rank - 1}]`,
      );
    }
    if (isBlockDType(this.dtype) && order[this.rank - 1] !== this.rank - 1) {
      throw new ShapeError(`Tensor.permute: ${this.dtype} tensors must keep their last dimension last`);
    }
    return new Tensor(
      this.dtype,
      this.data,
      order.map((i) => this.shape[i]),
      order.map((i) => this.strides[i]),
      this.offset,
    );
  }

  /** Dimensions a and b swapped (defaults: the last two), as a view. */
  transpose(a = this.rank - 2, b = this.rank - 1): Tensor<D> {
    this.checkDim('transpose', a);
    this.checkDim('transpose', b);
    const order = this.shape.map((_, i) => i);
    [order[a], order[b]] = [order[b], order[a]];
    return this.permute(...order);
  }

  /** The same elements under a new shape (one dimension may be -1); needs contiguous data. */
  reshape(...shape: number[]): Tensor<D> {
    const inferred = shape.indexOf(-1);
    const known = shape.reduce((p, n, i) => (i === inferred ? p : p * n), 1);
    const resolved = inferred >= 0 && known > 0 ? shape.map((n, i) => (i === inferred ? this.size / known : n)) : shape;
    checkShape('Tensor.reshape', resolved);
    if (shapeSize(resolved) !== this.size) {
      throw new ShapeError(
        `Tensor.reshape: cannot view shape ${formatShape(this.shape)} (${this.size} elements) as ${formatShape(shape)}`,
      );
    }
    if (!this.isContiguous()) {
      throw new ShapeError(
        `Tensor.reshape: shape ${formatShape(this.shape)} with strides ${formatShape(this.strides)} is not contiguous; call contiguous() first`,
      );
    }
    return new Tensor(this.dtype, this.data, resolved, undefined, this.offset);
  }

  /** A contiguous copy (always a new buffer, even if this view is already contiguous). */
  contiguous(options: TensorOptions = {}): Tensor<D> {
    const out = Tensor.zeros(this.dtype, this.shape, options);
    if (isBlockDType(this.dtype)) {
      // Rows of whole blocks: copy row by row in bytes.
      const { elements, bytes } = BLOCK_LAYOUT[this.dtype];
      const rowElements = this.shape[this.rank - 1];
      const rowBytes = (rowElements / elements) * bytes;
      let row = 0;
      this.forEachRowStart((start) => {
        const from = (start / elements) * bytes;
        out.data.set(this.data.subarray(from, from + rowBytes), row * rowBytes);
        row++;
      });
      return out;
    }
    let i = 0;
    this.forEachIndex((at) => {
      out.data[i++] = this.data[at];
    });
    return out;
  }

  /** Plain numbers in row-major order (f16/bf16 as raw bits; block types are not supported). */
  toArray(): number[] {
    if (isBlockDType(this.dtype))
      throw new DTypeError(`Tensor.toArray: ${this.dtype} holds blocks, dequantize it first`);
    const values: number[] = [];
    this.forEachIndex((at) => values.push(this.data[at]));
    return values;
  }

  /** Calls `visit` with the storage index of every element, row-major. */
  forEachIndex(visit: (at: number) => void): void {
    if (this.size === 0) return;
    const last = this.rank - 1;
    if (last < 0) {
      visit(this.offset);
      return;
    }
    const n = this.shape[last];
    const step = this.strides[last];
    this.forEachRowStart((start) => {
      for (let j = 0; j < n; j++) visit(start + j * step);
    });
  }

  /** Calls `visit` with the storage index of the first element of each innermost row. */
  forEachRowStart(visit: (start: number) => void): void {
    if (this.size === 0) return;
    const outer = this.shape.slice(0, -1);
    const counter = new Array<number>(outer.length).fill(0);
    const rows = shapeSize(outer);
    for (let r = 0; r < rows; r++) {
      let at = this.offset;
      for (let i = 0; i < outer.length; i++) at += counter[i] * this.strides[i];
      visit(at);
      // Advance the multi-index like an odometer.
      for (let i = outer.length - 1; i >= 0; i--) {
        if (++counter[i] < outer[i]) break;
        counter[i] = 0;
      }
    }
  }

  toString(): string {
    return `Tensor<${this.dtype}>${formatShape(this.shape)}`;
  }

  private checkDim(op: string, dim: number): void {
    if (!Number.isInteger(dim) || dim < 0 || dim >= this.rank) {
      throw new SparqRangeError(`Tensor.${op}: dimension ${dim}, expected an integer in [0, ${this.rank - 1}]`);
    }
  }
}
