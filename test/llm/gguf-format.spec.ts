/**
 * GGUF v3 writer and reader: every metadata value type round-trips, and a
 * written file is checked against the published layout by a minimal parser
 * written here, independent of the package's reader.
 */
import { describe, expect, it } from 'vitest';
import { Tensor } from '@sparq/core';
import { GGUF_VALUE_TYPES, ggufTensor, readGGUF, writeGGUF, type GGUFValue } from '@sparq/llm';

/** One value of every type, including nested arrays and extremes. */
const ALL_TYPES: [string, GGUFValue][] = [
  ['t.u8', { type: 'u8', value: 255 }],
  ['t.i8', { type: 'i8', value: -128 }],
  ['t.u16', { type: 'u16', value: 65535 }],
  ['t.i16', { type: 'i16', value: -32768 }],
  ['t.u32', { type: 'u32', value: 4294967295 }],
  ['t.i32', { type: 'i32', value: -2147483648 }],
  ['t.f32', { type: 'f32', value: Math.fround(3.14159) }],
  ['t.bool', { type: 'bool', value: true }],
  ['t.string', { type: 'string', value: 'héllo ▁wörld 日本' }],
  ['t.u64', { type: 'u64', value: 18446744073709551615n }],
  ['t.i64', { type: 'i64', value: -9223372036854775808n }],
  ['t.f64', { type: 'f64', value: -1e300 }],
  ['a.u8', { type: 'array', value: { itemType: 'u8', values: Uint8Array.of(0, 1, 255) } }],
  ['a.i8', { type: 'array', value: { itemType: 'i8', values: Int8Array.of(-1, 2) } }],
  ['a.u16', { type: 'array', value: { itemType: 'u16', values: Uint16Array.of(7, 65535) } }],
  ['a.i16', { type: 'array', value: { itemType: 'i16', values: Int16Array.of(-7) } }],
  ['a.u32', { type: 'array', value: { itemType: 'u32', values: Uint32Array.of(1, 2, 3) } }],
  ['a.i32', { type: 'array', value: { itemType: 'i32', values: Int32Array.of(-3, 4) } }],
  ['a.f32', { type: 'array', value: { itemType: 'f32', values: Float32Array.of(0.5, -2.25) } }],
  ['a.bool', { type: 'array', value: { itemType: 'bool', values: [true, false, true] } }],
  ['a.string', { type: 'array', value: { itemType: 'string', values: ['', 'a', '▁b'] } }],
  ['a.u64', { type: 'array', value: { itemType: 'u64', values: BigUint64Array.of(1n, 2n ** 63n) } }],
  ['a.i64', { type: 'array', value: { itemType: 'i64', values: BigInt64Array.of(-5n) } }],
  ['a.f64', { type: 'array', value: { itemType: 'f64', values: Float64Array.of(Math.PI) } }],
  ['a.empty', { type: 'array', value: { itemType: 'f32', values: new Float32Array(0) } }],
  [
    'a.nested',
    {
      type: 'array',
      value: {
        itemType: 'array',
        values: [
          { itemType: 'string', values: ['x'] },
          { itemType: 'i16', values: Int16Array.of(1, -1) },
        ],
      },
    },
  ],
];

/** A minimal GGUF v3 layout check, written from the published spec only. */
function parseLayout(bytes: Uint8Array) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let p = 0;
  const u32 = () => ((p += 4), dv.getUint32(p - 4, true));
  const u64 = () => ((p += 8), Number(dv.getBigUint64(p - 8, true)));
  const str = () => {
    const n = u64();
    p += n;
    return Buffer.from(bytes.subarray(p - n, p)).toString('utf8');
  };
  const fixed: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skip = (type: number): void => {
    if (type === 8) str();
    else if (type === 9) {
      const item = u32();
      const n = u64();
      for (let i = 0; i < n; i++) skip(item);
    } else p += fixed[type];
  };
  const magic = Buffer.from(bytes.subarray(0, 4)).toString('latin1');
  p = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const type = u32();
    if (key === 'general.alignment') alignment = dv.getUint32(p, true);
    skip(type);
  }
  const tensors: { name: string; ne: number[]; type: number; offset: number }[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nd = u32();
    const ne = Array.from({ length: nd }, u64);
    tensors.push({ name, ne, type: u32(), offset: u64() });
  }
  const dataStart = Math.ceil(p / alignment) * alignment;
  return { magic, version, nTensors, nKv, alignment, tensors, dataStart, headerEnd: p, dv };
}

describe('GGUF writer and reader', () => {
  it('round-trips every metadata value type, nested arrays included', () => {
    const file = readGGUF(writeGGUF(ALL_TYPES, []), 'mem.gguf');
    expect([...file.metadata.keys()]).toEqual(ALL_TYPES.map(([k]) => k));
    for (const [key, value] of ALL_TYPES) expect(file.metadata.get(key), key).toEqual(value);
    // Every one of the 13 value types appears as a scalar or an array item.
    const seen = new Set(ALL_TYPES.flatMap(([, v]) => (v.type === 'array' ? [v.type, v.value.itemType] : [v.type])));
    expect([...seen].sort()).toEqual([...GGUF_VALUE_TYPES].sort());
  });

  it('writes a file that follows the published v3 layout (independent parser)', () => {
    const a = Tensor.f32(
      [3, 32],
      Array.from({ length: 96 }, (_, i) => i * 0.5),
    );
    const b = Tensor.f32([5], [1, 2, 3, 4, 5]);
    const c = new Tensor(
      'f16',
      Uint16Array.from({ length: 64 }, (_, i) => 0x3c00 + i),
      [2, 32],
    );
    const meta: [string, GGUFValue][] = [
      ['general.architecture', { type: 'string', value: 'llama' }],
      ['general.alignment', { type: 'u32', value: 64 }],
    ];
    const bytes = writeGGUF(meta, [
      { name: 'a', tensor: a },
      { name: 'b', tensor: b },
      { name: 'c', tensor: c },
    ]);
    const L = parseLayout(bytes);
    expect(L.magic).toBe('GGUF');
    expect(L.version).toBe(3);
    expect([L.nTensors, L.nKv, L.alignment]).toEqual([3, 2, 64]);
    // ne[0] is the innermost dimension: row-major (3, 32) is ne [32, 3].
    expect(L.tensors.map((t) => [t.name, t.ne, t.type])).toEqual([
      ['a', [32, 3], 0],
      ['b', [5], 0],
      ['c', [32, 2], 1],
    ]);
    // Offsets: aligned, packed in order, each tensor's bytes where its offset says.
    expect(L.tensors.map((t) => t.offset)).toEqual([0, 384, 448]);
    for (const t of L.tensors) expect(t.offset % 64).toBe(0);
    expect(L.dataStart % 64).toBe(0);
    for (let i = L.headerEnd; i < L.dataStart; i++) expect(bytes[i]).toBe(0);
    expect(L.dv.getFloat32(L.dataStart + 4 * 33, true)).toBe(16.5);
    expect(L.dv.getFloat32(L.dataStart + 384 + 16, true)).toBe(5);
    expect(L.dv.getUint16(L.dataStart + 448 + 2 * 63, true)).toBe(0x3c00 + 63);
    expect(bytes.length).toBe(L.dataStart + 448 + 128);
    // And the package's reader agrees.
    const file = readGGUF(bytes, 'mem.gguf');
    expect(file.alignment).toBe(64);
    expect(file.dataOffset).toBe(L.dataStart);
    expect(Array.from(ggufTensor(file.tensors[0]).data as Float32Array)).toEqual(Array.from(a.data));
    expect(ggufTensor(file.tensors[2]).shape).toEqual([2, 32]);
  });

  it('uses the default alignment of 32 when general.alignment is absent', () => {
    const bytes = writeGGUF(
      [],
      [
        { name: 'x', tensor: Tensor.f32([3], [1, 2, 3]) },
        { name: 'y', tensor: Tensor.f32([1], [4]) },
      ],
    );
    const L = parseLayout(bytes);
    expect(L.alignment).toBe(32);
    expect(L.dataStart % 32).toBe(0);
    expect(L.tensors.map((t) => t.offset)).toEqual([0, 32]);
  });
});

describe('GGUF alignment below 4', () => {
  it('reads f32 tensors whose offsets are not 4-aligned (general.alignment 1)', () => {
    const meta: [string, GGUFValue][] = [
      ['general.alignment', { type: 'u32', value: 1 }],
      ['pad', { type: 'u8', value: 7 }],
    ];
    const bytes = writeGGUF(meta, [
      { name: 'b', tensor: new Tensor('f16', Uint16Array.of(1, 2, 3), [3]) },
      { name: 'a', tensor: Tensor.f32([2], [1.5, -2]) },
    ]);
    const file = readGGUF(bytes, 'mem.gguf');
    expect(file.tensors[1].fileOffset % 4).not.toBe(0);
    expect(Array.from(ggufTensor(file.tensors[1]).data as Float32Array)).toEqual([1.5, -2]);
  });
});
