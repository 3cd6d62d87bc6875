/**
 * The AMX tile kernel of matmulInt4 'int8' (src/kernels/x86/int4_amx.cc), opt-in: turned on for this file
 * through the test-only `setAmx` binding and restored afterwards (vitest runs each file in its
 * own process). Skipped, with the reason, where the CPU lacks AMX-INT8 or Linux refused the tiles.
 *
 * Tolerances (as basic.spec.ts):
 * - int32 group sums: identical with the scalar twin (EXACT).
 * - products vs the reference engine: the AMX blocks follow the reference's f32 steps, so they are
 *   bit-identical; the tails run the VNNI kernel, held to basic.spec.ts's TOL_NMSE and TOL_DOT
 *   (sum |w x| taken twice for the int8 path). The check is that bound on every element.
 * - vs the VNNI path (AMX off): the same bound.
 */
import { Int4Matrix, Tensor, type Engine, type Int4GroupSize } from '@sparq/core';
import { basicAddon, int4Args } from '../../packages/native/lib/basic-ops.ts';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOL_NATIVE_NMSE, nativeVsReferenceBound, nmse } from '../conformance/numeric.ts';
import { engines, referenceEngine } from '../support/backends.ts';
import { fcRuns } from '../support/runs.ts';

const TOL_NMSE = TOL_NATIVE_NMSE;
const TOL_DOT = nativeVsReferenceBound;
const RUNS = fcRuns(20);

const native = engines.find((e) => e.name === 'native');
const raw = native ? loadAddon() : null;
const addon = raw ? basicAddon(raw) : null;
const features = raw ? raw.info().features : {};
const amx = !!(addon && features.amx_int8 && features.amx_tile && raw!.kernelPaths().current === 'avx512');

const GROUPS: readonly Int4GroupSize[] = [32, 64, 'row'];

/** out[t, r] bound terms: 2 sum_c |w[r, c] x[t, c]| (the int8 path's allowance, as in basic.spec.ts). */
function absSums(w: Float32Array, x: Float32Array, rows: number, cols: number, n: number): Float64Array {
  const s = new Float64Array(n * rows);
  for (let t = 0; t < n; t++)
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) s[t * rows + r] += 2 * Math.abs(w[r * cols + c] * x[t * cols + c]);
  return s;
}

function expectClose(ref: Float32Array, got: Float32Array, abs: Float64Array, cols: number, what: string): void {
  expect(nmse(ref, got), what).toBeLessThanOrEqual(TOL_NMSE);
  for (let i = 0; i < ref.length; i++)
    expect(Math.abs(ref[i] - got[i]), `${what}: element ${i}`).toBeLessThanOrEqual(TOL_DOT(cols, abs[i]));
}

/** n 16..48, rows 16..40 (multiples of 16 and not), cols a multiple of the group (32 * 1..6; 'row' needs cols % 32 == 0). */
const caseArb = fc.record({
  n: fc.oneof(fc.constantFrom(16, 32, 48), fc.integer({ min: 16, max: 48 })),
  rows: fc.oneof(fc.constantFrom(16, 32), fc.integer({ min: 16, max: 40 })),
  units: fc.integer({ min: 1, max: 6 }),
  groupSize: fc.constantFrom(...GROUPS),
  symmetric: fc.boolean(),
  seed: fc.integer(),
});

if (!amx) {
  const why =
    !native || !addon
      ? 'native backend unavailable'
      : 'no AMX-INT8 on this CPU, tile permission refused, or the kernel path is narrower than avx512 (SPARQ_NATIVE_KERNEL)';
  describe.skip(`native AMX matmulInt4 skipped: ${why}`, () => {
    it('needs AMX', () => {});
  });
} else {
  describe('native AMX matmulInt4 int8', () => {
    const nat = native as Engine;
    beforeAll(() => {
      expect(addon!.setAmx(true)).toBe(true);
    });
    afterAll(() => {
      addon!.setAmx(null);
    });

    /** One random case: the weights, activations and the bound terms. */
    function build(c: {
      n: number;
      rows: number;
      units: number;
      groupSize: Int4GroupSize;
      symmetric: boolean;
      seed: number;
    }) {
      // 'row' groups and 64 need cols a multiple of 64 for units * 32 to divide: take units * 64 there.
      const cols = c.groupSize === 32 ? 32 * c.units : 64 * c.units;
      const rnd = (i: number) => Math.sin(c.seed * 0.61 + i * 1.37) * 3;
      const wf = Tensor.f32(
        [c.rows, cols],
        Array.from({ length: c.rows * cols }, (_, i) => (i % 13 === 0 ? 0 : rnd(i))),
      );
      const w = new Int4Matrix(c.rows, cols, { groupSize: c.groupSize, symmetric: c.symmetric });
      referenceEngine.quantizeInt4(w, wf);
      const wd = Tensor.zeros('f32', [c.rows, cols]);
      referenceEngine.dequantizeInt4(wd, w);
      const x = Tensor.f32(
        [c.n, cols],
        Array.from({ length: c.n * cols }, (_, i) => (i % 11 === 0 ? 0 : Math.cos(c.seed + i * 0.9) * 3)),
      );
      return { w, x, cols, abs: absSums(wd.data, x.data, c.rows, cols, c.n) };
    }

    function product(engine: Engine, w: Int4Matrix, x: Tensor<'f32'>): Float32Array {
      const out = Tensor.zeros('f32', [x.shape[0], w.rows]);
      engine.matmulInt4(out, w, x, 'int8');
      return out.data;
    }

    it('is enabled through setAmx and reported by amxEnabled', () => {
      expect(addon!.amxEnabled()).toBe(true);
      expect(addon!.setAmx(false)).toBe(false);
      expect(addon!.setAmx(true)).toBe(true);
    });

    it("matmulInt4 'int8' vs the reference engine: whole blocks bit-identical, everything within TOL_NMSE / TOL_DOT", () => {
      fc.assert(
        fc.property(caseArb, (c) => {
          const { w, x, cols, abs } = build(c);
          const ref = product(referenceEngine, w, x);
          const got = product(nat, w, x);
          expectClose(ref, got, abs, cols, 'amx vs reference');
          // The AMX-covered blocks repeat the reference's f32 steps exactly.
          const n16 = Math.floor(c.n / 16) * 16;
          const rows16 = Math.floor(c.rows / 16) * 16;
          for (let t = 0; t < n16; t++) {
            for (let r = 0; r < rows16; r++)
              expect(Object.is(got[t * c.rows + r], ref[t * c.rows + r]), `block element (${t}, ${r})`).toBe(true);
          }
        }),
        { numRuns: RUNS },
      );
    });

    it("matmulInt4 'int8' AMX vs VNNI (AMX off): within TOL_NMSE / TOL_DOT", () => {
      fc.assert(
        fc.property(caseArb, (c) => {
          const { w, x, cols, abs } = build(c);
          const got = product(nat, w, x);
          addon!.setAmx(false);
          const vnni = product(nat, w, x);
          addon!.setAmx(true);
          expectClose(vnni, got, abs, cols, 'amx vs vnni');
        }),
        { numRuns: RUNS },
      );
    });

    it('int32 group sums (int4GroupSums with AMX) identical with the scalar twin', () => {
      fc.assert(
        fc.property(caseArb, (c) => {
          const { w, x } = build(c);
          const sums = () => {
            const out = new Int32Array(c.n * c.rows * w.groupsPerRow);
            addon!.int4GroupSums(out, ...int4Args(w), x.data, x.offset, c.n);
            return out;
          };
          const got = sums();
          raw!.forceKernelPath('scalar'); // AMX and VNNI off: the scalar sums
          const expected = sums();
          raw!.forceKernelPath(null);
          expect(Array.from(got)).toEqual(Array.from(expected));
        }),
        { numRuns: RUNS },
      );
    });

    it('setAmx(true) never enables AMX on a narrower kernel path', () => {
      raw!.forceKernelPath('scalar');
      expect(addon!.amxEnabled()).toBe(false);
      raw!.forceKernelPath(null);
      expect(addon!.amxEnabled()).toBe(true);
    });
  });
}
