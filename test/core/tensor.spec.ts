import {
  BLOCK_LAYOUT,
  DTypeError,
  ShapeError,
  SparqRangeError,
  Tensor,
  isBlockDType,
  type BlockDType,
} from '@sparq/core';
import { describe, expect, it } from 'vitest';

const iota = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('Tensor', () => {
  it('lays out contiguous row-major strides', () => {
    const t = Tensor.zeros('f32', [2, 3, 4]);
    expect(t.strides).toEqual([12, 4, 1]);
    expect(t.size).toBe(24);
    expect(t.isContiguous()).toBe(true);
    expect(t.index(1, 2, 3)).toBe(23);
  });

  it('slices without copying', () => {
    const t = Tensor.f32([3, 4], iota(12));
    const s = t.slice(0, 1, 3).slice(1, 1, 3);
    expect(s.shape).toEqual([2, 2]);
    expect(s.data).toBe(t.data);
    expect(s.toArray()).toEqual([5, 6, 9, 10]);
    expect(s.isContiguous()).toBe(false);
    t.data[5] = 100;
    expect(s.toArray()[0]).toBe(100);
  });

  it('transposes and permutes as views', () => {
    const t = Tensor.f32([2, 3], iota(6));
    const tt = t.transpose();
    expect(tt.shape).toEqual([3, 2]);
    expect(tt.strides).toEqual([1, 3]);
    expect(tt.toArray()).toEqual([0, 3, 1, 4, 2, 5]);
    const p = Tensor.f32([2, 3, 4], iota(24)).permute(2, 0, 1);
    expect(p.shape).toEqual([4, 2, 3]);
    expect(p.toArray().slice(0, 6)).toEqual([0, 4, 8, 12, 16, 20]);
  });

  it('reshapes contiguous data and refuses strided views', () => {
    const t = Tensor.f32([2, 6], iota(12));
    expect(t.reshape(3, -1).shape).toEqual([3, 4]);
    expect(t.reshape(3, 4).data).toBe(t.data);
    expect(() => t.reshape(5, 2)).toThrow(ShapeError);
    expect(() => t.transpose().reshape(12)).toThrow(/not contiguous; call contiguous\(\) first/);
  });

  it('copies views into contiguous storage with contiguous()', () => {
    const t = Tensor.f32([2, 3], iota(6)).transpose();
    const c = t.contiguous();
    expect(c.isContiguous()).toBe(true);
    expect(c.data).not.toBe(t.data);
    expect(c.toArray()).toEqual([0, 3, 1, 4, 2, 5]);
    expect(c.reshape(6).toArray()).toEqual([0, 3, 1, 4, 2, 5]);
  });

  it('supports every dtype and SharedArrayBuffer storage', () => {
    expect(Tensor.zeros('f16', [4]).data).toBeInstanceOf(Uint16Array);
    expect(Tensor.zeros('bf16', [4]).data).toBeInstanceOf(Uint16Array);
    expect(Tensor.zeros('i8', [4]).data).toBeInstanceOf(Int8Array);
    expect(Tensor.zeros('u8', [4]).data).toBeInstanceOf(Uint8Array);
    expect(Tensor.zeros('i32', [4]).data).toBeInstanceOf(Int32Array);
    expect(Tensor.zeros('q4_0', [2, 64]).data.byteLength).toBe(2 * 2 * 18);
    expect(Tensor.zeros('q4_1', [1, 32]).data.byteLength).toBe(20);
    expect(Tensor.zeros('q8_0', [1, 96]).data.byteLength).toBe(3 * 34);
    expect(Tensor.zeros('f32', [4], { shared: true }).data.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  it('keeps block tensors in whole blocks', () => {
    expect(() => Tensor.zeros('q4_0', [2, 33])).toThrow(/whole 32-element blocks/);
    const q = Tensor.zeros('q4_0', [4, 64]);
    expect(q.slice(0, 1, 3).offset).toBe(64);
    expect(q.slice(0, 1, 3).contiguous().data.byteLength).toBe(2 * 2 * 18);
    expect(() => q.slice(1, 0, 32)).toThrow(/cannot be sliced inside a row/);
    expect(() => q.transpose()).toThrow(ShapeError);
  });

  it('sizes every ggml block dtype as ggml-common.h lays its block out', () => {
    // Bytes per block summed field by field from ggml's block structs (f16 scalars are 2 bytes).
    const f16 = 2;
    const fields: Record<BlockDType, [elements: number, bytes: number]> = {
      q4_0: [32, f16 + 32 / 2], // d, 4-bit codes
      q4_1: [32, 2 * f16 + 32 / 2], // d, m, 4-bit codes
      q5_0: [32, f16 + 32 / 8 + 32 / 2], // d, 5th bits, low nibbles
      q5_1: [32, 2 * f16 + 32 / 8 + 32 / 2],
      q8_0: [32, f16 + 32], // d, int8 codes
      q2_k: [256, 16 + 256 / 4 + 2 * f16], // 16 packed scale/min bytes, 2-bit codes, d, dmin
      q3_k: [256, 256 / 8 + 256 / 4 + 12 + f16], // high bits, low 2 bits, 16 6-bit scales, d
      q4_k: [256, 2 * f16 + 12 + 256 / 2], // d, dmin, 8 6-bit scales + 8 6-bit mins, nibbles
      q5_k: [256, 2 * f16 + 12 + 256 / 8 + 256 / 2],
      q6_k: [256, 256 / 2 + 256 / 4 + 16 + f16], // low nibbles, high 2 bits, 16 int8 scales, d
      iq4_nl: [32, f16 + 32 / 2], // d, 4-bit table indices
      iq4_xs: [256, f16 + 2 + 8 / 2 + 256 / 2], // d, 8 high scale 2-bit pairs, 8 low scale nibbles, indices
    };
    expect(Object.keys(BLOCK_LAYOUT).sort()).toEqual(Object.keys(fields).sort());
    for (const [dtype, [elements, bytes]] of Object.entries(fields) as [BlockDType, [number, number]][]) {
      expect(BLOCK_LAYOUT[dtype]).toEqual({ elements, bytes });
      expect(isBlockDType(dtype)).toBe(true);
      expect(Tensor.zeros(dtype, [3, 2 * elements]).data.byteLength).toBe(3 * 2 * bytes);
    }
    expect(() => Tensor.zeros('q4_k', [1, 128])).toThrow(/whole 256-element blocks/);
    expect(isBlockDType('f16')).toBe(false);
    expect(isBlockDType('bf16')).toBe(false);
  });

  it('rejects bad shapes, indices and storage with the valid range', () => {
    expect(() => Tensor.zeros('f32', [2, -1])).toThrow(SparqRangeError);
    expect(() => Tensor.zeros('f32', [2.5])).toThrow(/not a non-negative integer/);
    expect(() => Tensor.f32([2, 2], [1, 2, 3])).toThrow(/3 values for shape \[2, 2\]/);
    expect(() => Tensor.zeros('f32', [2, 3]).slice(1, 2, 4)).toThrow(/expected 0 <= start <= end <= 3/);
    expect(() => Tensor.zeros('f32', [2, 3]).index(2, 0)).toThrow(/\[0, 1\]/);
    expect(() => Tensor.zeros('f32', [2, 3]).permute(0, 0)).toThrow(/not a permutation/);
    expect(() => new Tensor('f32', new Float32Array(5), [2, 3])).toThrow(/reaches outside its 5 elements/);
    expect(() => new Tensor('f32', new Uint16Array(4) as unknown as Float32Array, [4])).toThrow(DTypeError);
  });
});
