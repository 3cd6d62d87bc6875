/**
 * The `topk` op: the indices of the k largest values of each row, largest first.
 *
 *   x (n, len) f32 -> out (n, k) i32, 1 <= k <= len (core checked), k = out.shape[1]
 *   out[t] = the first k indices of row t ranked by value, largest first
 *
 * Ties go to the lowest index (spec.md §2: "ties ... are broken by the lowest index"): among equal values
 * the smaller index ranks first. 0 and -0 are equal. NaN ranks above every number (torch.topk's
 * convention), so a NaN score is selected and propagates rather than silently vanishing; NaNs among
 * themselves also rank by index.
 * The reference ranks by sorting all indices of a row with that total order: O(len log len) per row,
 * plain to read; a fast backend selects without sorting and must return the same indices.
 */
import type { Tensor } from '@sparq/core';

/** Negative when value a (at index ia) ranks before value b (at index ib), positive when after. */
function rankOrder(a: number, ia: number, b: number, ib: number): number {
  const aNaN = Number.isNaN(a);
  const bNaN = Number.isNaN(b);
  // NaN first; two NaNs fall through to the index order.
  if (aNaN !== bNaN) return aNaN ? -1 : 1;
  // Larger first (plain comparisons: they are exact, and Infinity - Infinity would be NaN).
  if (!aNaN && a > b) return -1;
  if (!aNaN && a < b) return 1;
  // Equal: the lower index first.
  return ia - ib;
}

/** out (n, k): per row of x (n, len), the indices of its k largest values, largest first. */
export function topk(out: Tensor<'i32'>, x: Tensor<'f32'>): void {
  const [n, len] = x.shape;
  const k = out.shape[1];
  const order = new Array<number>(len); // (len) indices of one row, to be ranked
  for (let t = 0; t < n; t++) {
    const at = x.offset + t * len; // row t of x
    for (let j = 0; j < len; j++) order[j] = j;
    order.sort((i, j) => rankOrder(x.data[at + i], i, x.data[at + j], j));
    // The first k ranked indices are the answer.
    for (let j = 0; j < k; j++) out.data[out.offset + t * k + j] = order[j];
  }
}
