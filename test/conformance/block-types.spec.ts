/**
 * Conformance: every ggml block dtype (Q4_0 ... IQ4_XS) through quantize / dequantize, on every
 * backend that lists the dtype (others skip with the reason).
 * - Hand-worked blocks: bytes written here field by field, expected values worked out by hand from
 *   the layout (comments show the arithmetic).
 * - Random blocks: dequantize agrees exactly with the tests' own reading of the layout
 *   (test/support/ggml-layout.ts, written from ggml-common.h, sharing no code with any backend).
 * - Round trips: every element decodes to the nearest value its block can represent, and the
 *   error on uniform data stays within the format's quantization noise (bounds named below).
 * - Values at the largest accepted magnitude stay finite; all-zero blocks decode to zeros.
 * Byte-exactness against llama.cpp's own quantizers is ggml-oracle.spec.ts.
 */
import { BLOCK_DTYPES, BLOCK_LAYOUT, Tensor, type BlockDType, type Engine } from '@sparq/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { F16_FIELDS, elementGrid, nmseBound } from '../support/ggml-layout.ts';
import { fcRuns } from '../support/runs.ts';
import { nmse, seeded, uniform } from './numeric.ts';

function dequantized(engine: Engine, dtype: BlockDType, bytes: Uint8Array, n: number): number[] {
  const out = Tensor.zeros('f32', [n]);
  engine.dequantize(out, Tensor.wrap(dtype, bytes, [n]));
  return Array.from(out.data);
}

function quantized(engine: Engine, dtype: BlockDType, x: Float32Array): Tensor<BlockDType> {
  const q = Tensor.zeros(dtype, [x.length]);
  engine.quantize(q, Tensor.f32([x.length], x));
  return q;
}

/** A block of `bytes` zero bytes with `fields` (byte offset -> values) written in. */
function block(bytes: number, fields: Record<number, number[]>): Uint8Array {
  const b = new Uint8Array(bytes);
  for (const [at, values] of Object.entries(fields)) b.set(values, Number(at));
  return b;
}

/** `n` copies of v, with the listed elements replaced. */
function filled(n: number, v: number, at: Record<number, number>): number[] {
  const out = new Array<number>(n).fill(v);
  for (const [i, value] of Object.entries(at)) out[Number(i)] = value;
  return out;
}

interface HandBlock {
  bytes: Uint8Array;
  want: number[];
}

/** One hand-worked block per dtype (f16 bits: 0x3400 = 0.25, 0x3800 = 0.5, 0x3c00 = 1, 0x4000 = 2, 0xc000 = -2). */
const HAND: Partial<Record<BlockDType, () => HandBlock>> = {
  q5_0: () => ({
    // d = 0.5; qh (uint32 LE) = bits 0 and 31; qs[0] = 0x21, qs[15] = 0xf0; x = (code - 16) * d.
    // e0: low nibble 1 | fifth bit 1 -> 17 -> 0.5;  e16: high nibble 2, bit 16 clear -> 2 -> -7;
    // e15: 0 -> -8;  e31: high nibble 15 | bit 31 -> 31 -> 7.5;  everything else code 0 -> (0 - 16) * 0.5 = -8.
    bytes: block(22, { 0: [0x00, 0x38], 2: [0x01, 0x00, 0x00, 0x80], 6: [0x21], 21: [0xf0] }),
    want: filled(32, -8, { 0: 0.5, 16: -7, 31: 7.5 }),
  }),
  q5_1: () => ({
    // d = 0.25, m = -2; qh bits 1 and 17 (bytes 02 00 02 00); qs[1] = 0x3f; x = code * d + m.
    // e1: 15 | 16 = 31 -> 7.75 - 2 = 5.75;  e17: 3 | 16 = 19 -> 4.75 - 2 = 2.75;  others 0 -> -2.
    bytes: block(24, { 0: [0x00, 0x34, 0x00, 0xc0], 4: [0x02, 0x00, 0x02, 0x00], 9: [0x3f] }),
    want: filled(32, -2, { 1: 5.75, 17: 2.75 }),
  }),
  q2_k: () => ({
    // d = 0.5 (byte 80), dmin = 0.25 (82); x = d * sc * q - dmin * mn, sc/mn the low/high nibble of scales[e / 16].
    // scales[0] = 0x21: sc 1, mn 2 -> dl 0.5, ml 0.5;  scales[2] = 0x13: sc 3, mn 1 -> dl 1.5, ml 0.25;
    // scales[15] = 0x0f: sc 15, mn 0 -> dl 7.5, ml 0;  other sub-blocks dl = ml = 0 -> 0.
    // qs byte 16 + 0 = 0xe4 = 0b11100100: codes 0, 1, 2, 3 of elements 0, 32, 64, 96 (bit pairs 0..3);
    // qs byte 16 + 32 + 31 = 0xc0: element 128 + 96 + 31 = 255 gets code 3.
    // e0..15 (code 0): -0.5;  e32: 1.5 * 1 - 0.25 = 1.25;  e33..47: -0.25;  e64, e96: scale 0 -> 0;  e255: 7.5 * 3 = 22.5.
    bytes: block(84, { 0: [0x21, 0x00, 0x13], 15: [0x0f], 16: [0xe4], 79: [0xc0], 80: [0x00, 0x38, 0x00, 0x34] }),
    want: (() => {
      const want = new Array<number>(256).fill(0);
      for (let e = 0; e < 16; e++) want[e] = -0.5;
      for (let e = 32; e < 48; e++) want[e] = -0.25;
      want[32] = 1.25;
      want[255] = 22.5;
      return want;
    })(),
  }),
  q3_k: () => ({
    // d = 2 (byte 108); x = d * (sc - 32) * q, q = (2 low bits | hmask bit << 2) - 4.
    // Sub-block 0: sc 33 = 0b10_0001: low nibble 1 in byte 96, top bits 0b10 in byte 104 bits 0-1 -> dl = 2.
    // Sub-block 5: sc 30 = 0b01_1110: low nibble 14 in byte 101, top bits 0b01 in byte 105 bits 2-3 -> dl = -4.
    // Other sub-blocks: sc 0 -> dl = 2 * -32 = -64, and their codes are 0 -> q = -4 -> 256.
    // e0: hmask byte 0 bit 0, low bits 3 (byte 32 bits 0-1) -> 7 - 4 = 3 -> 6;  e1..15: q = -4 -> -8.
    // e80 = 32 * 2 + 16: low bits in byte 32 + 16 = 48 bits 4-5 = 1, hmask byte 16 bit 2 -> 5 - 4 = 1 -> -4;
    // e81..95 and e82..: q = -4 -> 16.
    bytes: block(110, {
      0: [0x01],
      16: [0x04],
      32: [0x03],
      48: [0x10],
      96: [0x01, 0, 0, 0, 0, 0x0e],
      104: [0x02, 0x04],
      108: [0x00, 0x40],
    }),
    want: (() => {
      const want = new Array<number>(256).fill(256);
      for (let e = 0; e < 16; e++) want[e] = -8;
      for (let e = 80; e < 96; e++) want[e] = 16;
      want[0] = 6;
      want[80] = -4;
      return want;
    })(),
  }),
  q4_k: () => ({
    // d = 1, dmin = 0.5; x = d * sc * q - dmin * mn for sub-block e / 32.
    // Sub-block 0: sc 2 (byte 4), mn 3 (byte 8).  Sub-block 5: sc 17 = 0b01_0001, mn 33 = 0b10_0001:
    // their low nibbles in byte 4 + 9 = 13 (0x11), sc's top bits in byte 4 + 1 bits 6-7 (0x40), mn's in byte 4 + 5 (0x80).
    // e0: byte 16 low nibble 5 -> 2 * 5 - 1.5 = 8.5;  e1..31: -1.5.
    // e170 (sub-block 5): chunk 2, second half -> byte 16 + 64 + 10 = 90, high nibble 9 -> 17 * 9 - 16.5 = 136.5; rest of sub-block 5: -16.5.
    bytes: block(144, {
      0: [0x00, 0x3c, 0x00, 0x38],
      4: [0x02, 0x40],
      8: [0x03, 0x80],
      13: [0x11],
      16: [0x05],
      90: [0x90],
    }),
    want: (() => {
      const want = new Array<number>(256).fill(0);
      for (let e = 0; e < 32; e++) want[e] = -1.5;
      for (let e = 160; e < 192; e++) want[e] = -16.5;
      want[0] = 8.5;
      want[170] = 136.5;
      return want;
    })(),
  }),
  q5_k: () => ({
    // The q4_k block's scales, with qh (bytes 16..47) and qs moved to byte 48.
    // e0: low nibble 5 (byte 48), high bit: qh byte 0 bit 0 -> 21 -> 2 * 21 - 1.5 = 40.5.
    // e170: byte 48 + 64 + 10 = 122 high nibble 9, high bit: qh byte 16 + 10 bit 5 (170 / 32 = 5) -> 25 -> 17 * 25 - 16.5 = 408.5.
    bytes: block(176, {
      0: [0x00, 0x3c, 0x00, 0x38],
      4: [0x02, 0x40],
      8: [0x03, 0x80],
      13: [0x11],
      16: [0x01],
      26: [0x20],
      48: [0x05],
      122: [0x90],
    }),
    want: (() => {
      const want = new Array<number>(256).fill(0);
      for (let e = 0; e < 32; e++) want[e] = -1.5;
      for (let e = 160; e < 192; e++) want[e] = -16.5;
      want[0] = 40.5;
      want[170] = 408.5;
      return want;
    })(),
  }),
  q6_k: () => ({
    // d = 0.5 (byte 208); x = d * sc * (code - 32), sc = int8 scales[e / 16] (byte 192 + e / 16).
    // Sub-block 0: sc 2 -> dl 1.  Sub-block 10 (e160..175): sc -3 (0xfd) -> dl -1.5.  Others sc 0 -> dl 0.
    // e0: ql byte 0 low nibble 3, qh byte 128 bits 0-1 = 2 -> 35 -> 3;  e1..15: code 0 -> -32.
    // e165 = 128 + 32 + 5: ql byte 64 + 32 + 5 low nibble 0, qh byte 128 + 32 + 5 bits 2-3 = 3 -> 48 -> -1.5 * 16 = -24;
    // rest of sub-block 10: -1.5 * -32 = 48.  Sub-blocks with sc 0: 0 * -32 = -0 (f32 keeps the sign).
    bytes: block(210, { 0: [0x03], 128: [0x02], 165: [0x0c], 192: [0x02], 202: [0xfd], 208: [0x00, 0x38] }),
    want: (() => {
      const want = new Array<number>(256).fill(-0);
      for (let e = 0; e < 16; e++) want[e] = -32;
      for (let e = 160; e < 176; e++) want[e] = 48;
      want[0] = 3;
      want[165] = -24;
      return want;
    })(),
  }),
  iq4_nl: () => ({
    // d = 0.5; x = d * LEVELS[code]. All codes 8 (level 1) but byte 2 = 0xf0: e0 code 0 (-127), e16 code 15 (113).
    bytes: block(18, { 0: [0x00, 0x38], 2: [0xf0, ...new Array<number>(15).fill(0x88)] }),
    want: filled(32, 0.5, { 0: -63.5, 16: 56.5 }),
  }),
  iq4_xs: () => ({
    // d = 0.25; x = d * (ls - 32) * LEVELS[code], ls = scales_l nibble | scales_h bit pair << 4 for sub-block e / 32.
    // Sub-block 0: ls 33 = 0b10_0001 (scales_l[0] low nibble 1, scales_h bits 0-1 = 2) -> dl 0.25.
    // Sub-block 7: ls 28 = 0b01_1100 (scales_l[3] high nibble 12, scales_h bits 14-15 = 1) -> dl -1.
    // Others: ls 0 -> dl -8. scales_h = 0x4002 (bytes 02 40). All codes 8 (level 1), except:
    // byte 8 = 0x0f: e0 code 15 (113) -> 28.25, e16 code 0 (-127) -> -31.75;
    // byte 8 + 16 * 7 + 3 = 0x9e: e227 code 14 (89) -> -89, e243 code 9 (13) -> -13.
    bytes: (() => {
      const b = block(136, { 0: [0x00, 0x34, 0x02, 0x40, 0x01, 0x00, 0x00, 0xc0] });
      b.fill(0x88, 8);
      b[8] = 0x0f;
      b[8 + 112 + 3] = 0x9e;
      return b;
    })(),
    want: (() => {
      const want = new Array<number>(256).fill(-8);
      for (let e = 0; e < 32; e++) want[e] = 0.25;
      for (let e = 224; e < 256; e++) want[e] = -1;
      want[0] = 28.25;
      want[16] = -31.75;
      want[227] = -89;
      want[243] = -13;
      return want;
    })(),
  }),
};

/** A random block: random bytes, its f16 fields random finite halves (normal and subnormal). */
const randomBlock = (dtype: BlockDType) =>
  fc
    .tuple(
      fc.uint8Array({ minLength: BLOCK_LAYOUT[dtype].bytes, maxLength: BLOCK_LAYOUT[dtype].bytes }),
      fc.array(fc.integer({ min: 0, max: 0xfbff }), { minLength: 2, maxLength: 2 }),
      fc.boolean(),
    )
    .map(([bytes, halves, negative]) => {
      F16_FIELDS[dtype].forEach((at, i) => {
        const bits = halves[i] | (negative && i === 0 ? 0x8000 : 0); // 0x7c00 and up would be inf / NaN
        bytes[at] = bits & 0xff;
        bytes[at + 1] = bits >> 8;
      });
      return bytes;
    });

/**
 * How far a value may sit from the nearest point of its block's grid. K-quants choose their final
 * codes against the stored (f16) scales, so only f32 rounding separates them from the nearest: we
 * allow 2^-20 of the magnitudes involved. The legacy and IQ4 quantizers choose codes against the f32
 * scale and then store it as f16 (relative error at most 2^-11, or 2^-25 absolute when subnormal):
 * the grid moves by up to that times the largest multiple of d a code stands for (F16_REACH), once
 * when choosing and once when decoding.
 */
const F16_REACH: Record<BlockDType, number> = {
  q4_0: 16,
  q5_0: 32,
  q8_0: 128,
  q4_1: 16,
  q5_1: 32,
  q2_k: 0,
  q3_k: 0,
  q4_k: 0,
  q5_k: 0,
  q6_k: 0,
  iq4_nl: 127,
  iq4_xs: 127 * 32,
};

/** Rows of 256 k values: uniform times 2^e, heavy-tailed, sparse, one sign, zero sub-blocks, constant, all zero. */
const rows = fc
  .record({
    k: fc.integer({ min: 1, max: 2 }),
    e: fc.integer({ min: -10, max: 10 }),
    kind: fc.constantFrom(
      'uniform',
      'uniform',
      'tails',
      'sparse',
      'positive',
      'negative',
      'zero-runs',
      'constant',
      'zero',
    ),
    seed: fc.integer(),
  })
  .map(({ k, e, kind, seed }) => {
    const random = seeded(seed);
    const u = uniform(random, 256 * k);
    const x = new Float32Array(u.length);
    for (let i = 0; i < x.length; i++) {
      let v = u[i];
      if (kind === 'tails') v = Math.tan(1.4 * v);
      if (kind === 'sparse' && i % 7 !== 0) v = 0;
      if (kind === 'positive') v = Math.abs(v) + 0.25;
      if (kind === 'negative') v = -Math.abs(v);
      if (kind === 'zero-runs' && Math.floor(i / 16) % 3 === 1) v = 0;
      if (kind === 'constant') v = u[0];
      if (kind === 'zero') v = 0;
      x[i] = v * 2 ** e;
    }
    return x;
  });

/** Largest (error - allowed) over the elements: <= 0 when every element decodes to its grid's nearest value. */
function worstGridExcess(dtype: BlockDType, x: Float32Array, q: Tensor<BlockDType>, back: ArrayLike<number>): number {
  const { elements, bytes } = BLOCK_LAYOUT[dtype];
  let worst = -Infinity;
  for (let i = 0; i < x.length; i++) {
    const grid = elementGrid(dtype, q.data, Math.floor(i / elements) * bytes, i % elements);
    let nearest = Infinity;
    let reach = 0;
    for (let c = 0; c < grid.codes; c++) {
      nearest = Math.min(nearest, Math.abs(grid.value(c) - x[i]));
      reach = Math.max(reach, Math.abs(grid.value(c)));
    }
    const f16Slack = grid.halves.reduce(
      (sum, half, j) =>
        sum + (j === 0 ? F16_REACH[dtype] : F16_REACH[dtype] > 0 ? 1 : 0) * (Math.abs(half) * 2 ** -11 + 2 ** -25),
      0,
    );
    const allowed = nearest + 2 * f16Slack + 2 ** -20 * (Math.abs(x[i]) + reach);
    worst = Math.max(worst, Math.abs(back[i] - x[i]) - allowed);
  }
  return worst;
}

/** The largest |x| validation accepts for each dtype (core's QUANTIZE_LIMIT). */
const LIMIT: Record<BlockDType, number> = {
  q4_0: 8 * 65504,
  q5_0: 16 * 65504,
  q8_0: 127 * 65504,
  q4_1: 65504,
  q5_1: 65504,
  q2_k: 65504,
  q3_k: 65504,
  q4_k: 65504,
  q5_k: 65504,
  q6_k: 65504,
  iq4_nl: 65504,
  iq4_xs: 65504,
};

forEachBackend('ggml block dtypes', (engine) => {
  for (const dtype of BLOCK_DTYPES) {
    const { elements } = BLOCK_LAYOUT[dtype];
    const hand = HAND[dtype];
    if (hand) {
      opIt(
        engine,
        'dequantize',
        `${dtype}: hand-worked block`,
        () => {
          const { bytes, want } = hand();
          expect(dequantized(engine, dtype, bytes, elements)).toEqual(want);
        },
        dtype,
      );
    }

    opIt(
      engine,
      'dequantize',
      `${dtype}: random blocks decode as the layout says (property)`,
      () => {
        fc.assert(
          fc.property(randomBlock(dtype), (bytes) => {
            const got = dequantized(engine, dtype, bytes, elements);
            const want = Array.from({ length: elements }, (_, e) => {
              const grid = elementGrid(dtype, bytes, 0, e);
              return grid.value(grid.code);
            });
            expect(got).toEqual(want);
          }),
          { numRuns: fcRuns(50) },
        );
      },
      dtype,
    );

    opIt(
      engine,
      'quantize',
      `${dtype} round trip: each element decodes to its block's nearest representable value (property)`,
      () => {
        fc.assert(
          fc.property(rows, (x) => {
            const q = quantized(engine, dtype, x);
            const back = dequantized(engine, dtype, q.data, x.length);
            expect(worstGridExcess(dtype, x, q, back)).toBeLessThanOrEqual(0);
          }),
          { numRuns: fcRuns(25) },
        );
      },
      dtype,
    );

    opIt(
      engine,
      'quantize',
      `${dtype} round trip on uniform data: NMSE <= ${nmseBound(dtype).toPrecision(3)} (2x the quantization noise of its levels)`,
      () => {
        const x = uniform(seeded(5), 16 * 256);
        const back = dequantized(engine, dtype, quantized(engine, dtype, x).data, x.length);
        expect(nmse(x, back)).toBeLessThanOrEqual(nmseBound(dtype));
      },
      dtype,
    );

    opIt(
      engine,
      'quantize',
      `${dtype}: values at the largest accepted magnitude (${LIMIT[dtype]}) decode finite; zeros decode to zeros`,
      () => {
        const x = uniform(seeded(9), 2 * 256).map((v, i) =>
          i < 256 ? (i % 5 === 0 ? LIMIT[dtype] * Math.sign(v || 1) : v * LIMIT[dtype]) : 0,
        );
        const back = dequantized(engine, dtype, quantized(engine, dtype, x).data, x.length);
        expect(back.every(Number.isFinite)).toBe(true);
        expect(back.slice(256).every((v) => v === 0)).toBe(true);
        // The extremes come back within half their magnitude: the coarsest grid (2 bits, 4 levels over
        // [-max, max]) is a third of it from the nearest level; one clamped step of Q4_0 is an eighth.
        for (let i = 0; i < 256; i += 5) expect(Math.abs(back[i] - x[i])).toBeLessThanOrEqual(0.5 * Math.abs(x[i]));
      },
      dtype,
    );
  }
});
