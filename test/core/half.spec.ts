import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '@sparq/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe('f16 conversion', () => {
  it('encodes hand-checked values', () => {
    expect(f32ToF16(1)).toBe(0x3c00);
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(65504)).toBe(0x7bff); // largest half
    expect(f32ToF16(65520)).toBe(0x7c00); // rounds up past the largest half: infinity
    expect(f32ToF16(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16(2 ** -25)).toBe(0x0000); // exactly half of it: ties to even (zero)
    expect(f32ToF16(3 * 2 ** -25)).toBe(0x0002); // 1.5 subnormal steps: ties to even (2)
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // halfway between 1 and the next half: even
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02); // halfway, odd below: rounds up
    expect(f32ToF16(NaN) & 0x7c00).toBe(0x7c00);
    expect(f32ToF16(NaN) & 0x3ff).not.toBe(0);
  });

  it('round-trips every half exactly', () => {
    for (let h = 0; h < 0x10000; h++) {
      const value = f16ToF32(h);
      if (Number.isNaN(value)) continue;
      expect(f32ToF16(value)).toBe(h);
    }
  });

  it('rounds to the nearest half (property)', () => {
    fc.assert(
      fc.property(fc.float({ min: -60000, max: 60000, noNaN: true }), (x) => {
        const got = f16ToF32(f32ToF16(x));
        const h = f32ToF16(x);
        // Neighbouring halves on each side are no closer than the one chosen.
        for (const n of [h - 1, h + 1]) {
          if ((n & 0x7fff) >= 0x7c00 || n < 0 || (h & 0x7fff) === 0) continue;
          if ((n & 0x8000) !== (h & 0x8000)) continue;
          expect(Math.abs(f16ToF32(n) - x)).toBeGreaterThanOrEqual(Math.abs(got - x));
        }
      }),
    );
  });
});

describe('bf16 conversion', () => {
  it('keeps the top 16 bits with round-to-nearest-even', () => {
    expect(f32ToBf16(1)).toBe(0x3f80);
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80); // tie, even stays
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie, odd rounds up
    expect(Number.isNaN(bf16ToF32(f32ToBf16(NaN)))).toBe(true);
  });
});
