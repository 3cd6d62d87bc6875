/**
 * The activation quantizer of the group-wise INT4 'int8' product (spec.md §5; int4-matvec.ts, one
 * group per weight group: the engine's own format; ggml block weights take ggml's activation
 * blocks instead, block-int8-matvec.ts). Each row t of x (n, cols) is cut into groups of `group`
 * consecutive elements, and each group g becomes int8 codes sharing one f32 step:
 *
 *   amax = max_c |x[t, c]|
 *   dx   = max(f32(amax / 127), 2^-126)      (f32 division; the floor keeps an all-zero group finite)
 *   q[c] = roundHalfAway(f32(x[t, c] / dx))  (C's roundf; always in [-127, 127])
 *
 * So x[t, c] = dx * q[c] within half a step (plus the one f32 rounding of x / dx).
 */
import type { Tensor } from '@sparq/core';
import { MIN_SCALE } from './int4-groupwise.ts';
import { roundHalfAway } from './round.ts';

const f32 = Math.fround;

/**
 * x (n, cols) f32 -> qx (n, cols) int8 codes, sx (n, cols / group) their steps dx:
 * qx[t * cols + c], sx[t * (cols / group) + g]. `group` divides cols.
 */
export function quantizeActivations(
  qx: Int8Array,
  sx: Float32Array,
  x: Tensor<'f32'>,
  n: number,
  cols: number,
  group: number,
): void {
  const groups = cols / group;
  for (let t = 0; t < n; t++) {
    for (let g = 0; g < groups; g++) {
      const first = t * cols + g * group; // index of the group's first element in x (from its offset) and qx
      let amax = 0;
      for (let i = 0; i < group; i++) amax = Math.max(amax, Math.abs(x.data[x.offset + first + i]));
      const dx = Math.max(f32(amax / 127), MIN_SCALE);
      sx[t * groups + g] = dx;
      for (let i = 0; i < group; i++) qx[first + i] = roundHalfAway(f32(x.data[x.offset + first + i] / dx));
    }
  }
}
