/**
 * The addon reports the block shape its kernels assume for every element type, and the loader
 * refuses an addon whose shapes or binding codes disagree with core's (it would read every
 * weight of that type wrongly). Needs the built addon; skips with the reason when there is none.
 */
import { BLOCK_LAYOUT, BLOCK_DTYPES } from '@sparq/core';
import { describe, expect, it } from 'vitest';
import { blockLayoutMismatch, type BlockShape } from '../../packages/native/lib/addon.ts';
import { addon, missing } from '../support/addon.ts';
import { DTYPE_CODE } from '../../packages/native/lib/basic-ops.ts';

describe.skipIf(!addon)(`native block layouts against core${addon ? '' : ` (skipped: ${missing})`}`, () => {
  const reported = () => addon!.blockLayouts();

  it("the built addon's layouts are core's: every block type, and f32 / f16 / bf16 as one element", () => {
    const layouts = reported();
    expect(Object.keys(layouts).sort()).toEqual(Object.keys(DTYPE_CODE).sort());
    for (const dtype of BLOCK_DTYPES)
      expect(layouts[dtype]).toEqual({ code: DTYPE_CODE[dtype], ...BLOCK_LAYOUT[dtype] });
    expect(layouts.f32).toEqual({ code: 0, elements: 1, bytes: 4 });
    expect(layouts.f16).toEqual({ code: 1, elements: 1, bytes: 2 });
    expect(layouts.bf16).toEqual({ code: 2, elements: 1, bytes: 2 });
    expect(blockLayoutMismatch(layouts)).toBeNull();
  });

  it('names the type and both layouts when a block size, a code or a type differs', () => {
    const altered = (change: (l: Record<string, BlockShape>) => void) => {
      const layouts = structuredClone(reported());
      change(layouts);
      return blockLayoutMismatch(layouts);
    };
    expect(altered((l) => (l.q4_k.bytes = 146))).toBe(
      "the addon's block layouts disagree with @sparq/core's: q4_k is code 10, 256 elements in 146 bytes (core: code 10, 256 in 144)",
    );
    expect(altered((l) => (l.q8_0.code = 3))).toMatch(
      /q8_0 is code 3, 32 elements in 34 bytes \(core: code 5, 32 in 34\)/,
    );
    expect(altered((l) => delete l.iq4_xs)).toMatch(/iq4_xs is missing \(core: code 14, 256 elements in 136 bytes\)/);
    expect(altered((l) => (l.q1_0 = { code: 15, elements: 32, bytes: 6 }))).toMatch(/q1_0 is unknown to core/);
  });
});
