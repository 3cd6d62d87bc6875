/**
 * The engine's own group-wise INT4 weight matrix (Neural Speed's `weight_dtype
 * int4`, spec.md §5): a (rows, cols) matrix cut into groups of `groupSize`
 * consecutive elements along each row, each group with an f32 scale and, when
 * asymmetric, an integer zero point.
 *
 *   value q in [-8, 7] (a signed nibble), w = (q - zero) * scale
 *
 * Packing: element 2j of a row sits in the low nibble of byte j, element 2j+1 in
 * the high nibble, each as 4-bit two's complement.
 */
import { allocBuffer } from './memory.ts';
import { SparqRangeError } from './errors.ts';

/** 32, 64, 128, or 'row' for one group spanning the whole row. */
export type Int4GroupSize = 32 | 64 | 128 | 'row';
export const INT4_GROUP_SIZES: readonly Int4GroupSize[] = [32, 64, 128, 'row'];

/** How an Int4Matrix is quantized (group size, symmetric or with a zero point) and whether its buffers are shared. */
export interface Int4MatrixOptions {
  groupSize?: Int4GroupSize;
  /** Symmetric: zero points are all 0. Asymmetric: one int8 zero point per group. */
  symmetric?: boolean;
  shared?: boolean;
}

/** Group-wise INT4 weights: packed nibbles, an f32 scale (and a zero point when asymmetric) per group of a row. */
export class Int4Matrix {
  readonly rows: number;
  readonly cols: number;
  /** Elements per group (cols when created with 'row'). */
  readonly groupSize: number;
  readonly symmetric: boolean;
  /** (rows, cols / 2) packed nibbles. */
  readonly packed: Uint8Array;
  /** (rows, cols / groupSize) f32 scales. */
  readonly scales: Float32Array;
  /** (rows, cols / groupSize) zero points in [-8, 7]; all zero when symmetric. */
  readonly zeros: Int8Array;

  constructor(rows: number, cols: number, options: Int4MatrixOptions = {}) {
    const group = options.groupSize ?? 32;
    if (!INT4_GROUP_SIZES.includes(group)) {
      throw new SparqRangeError(`Int4Matrix: group size ${String(group)}, expected one of 32, 64, 128, 'row'`);
    }
    if (!Number.isInteger(rows) || rows < 1 || !Number.isInteger(cols) || cols < 2 || cols % 2 !== 0) {
      throw new SparqRangeError(`Int4Matrix: shape [${rows}, ${cols}], expected rows >= 1 and an even cols >= 2`);
    }
    this.groupSize = group === 'row' ? cols : group;
    if (cols % this.groupSize !== 0) {
      throw new SparqRangeError(`Int4Matrix: cols ${cols} is not a multiple of group size ${this.groupSize}`);
    }
    this.rows = rows;
    this.cols = cols;
    this.symmetric = options.symmetric ?? true;
    const groups = rows * (cols / this.groupSize);
    const buffer = (bytes: number) => allocBuffer(bytes, options.shared, 'Int4Matrix');
    this.packed = new Uint8Array(buffer((rows * cols) / 2));
    this.scales = new Float32Array(buffer(groups * 4));
    this.zeros = new Int8Array(buffer(groups));
  }

  /** Groups per row. */
  get groupsPerRow(): number {
    return this.cols / this.groupSize;
  }

  get shape(): readonly [number, number] {
    return [this.rows, this.cols];
  }
}
