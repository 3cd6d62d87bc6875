/**
 * Real-model shapes for `sparq bench --shape` (model-shapes.ts): llama.cpp's
 * Q4_K_M type rule, the types of an N-layer slice, the bytes of a full-size
 * file computed from ggml's block sizes (nothing written), and a scaled-down
 * shape written, read back by sparq (config, types, size, a forward pass) and
 * loaded by llama.cpp (skipped with the reason when node-llama-cpp is absent;
 * CI has it). Seconds, not minutes: the full shapes are never written here.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BLOCK_LAYOUT, type BlockDType } from '@sparq/core';
import {
  MODEL_SHAPES,
  SHAPE_NAMES,
  Session,
  buildModel,
  defaultAttention,
  readModelFile,
  shapeFile,
  shapeTensorType,
  useMoreBits,
  writeShapeGGUF,
  type ModelShape,
} from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';
import { llamaCppGreedy, llamaCppMissing } from '../support/llama-cpp.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-shapes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const llamaMissing = await llamaCppMissing();

/** Bytes of a (rows, cols) matrix of a block type, from ggml's block sizes. */
const blockBytes = (type: BlockDType, rows: number, cols: number) =>
  (rows * cols * BLOCK_LAYOUT[type].bytes) / BLOCK_LAYOUT[type].elements;

/** A scaled-down shape: every width a multiple of 256 (the K-quant block), GQA group 2, a vocab past the 259 special and byte tokens. */
const tiny = (arch: ModelShape['arch']): ModelShape => ({
  arch,
  dim: 256,
  nLayers: 4,
  nHeads: 2,
  nKvHeads: 1,
  hiddenDim: 512,
  vocabSize: 300,
  ropeTheta: 500000,
  normEps: 1e-5,
  context: 512,
  source: 'test',
});

describe('model shapes', () => {
  it("gives Q6_K to attn_v and ffn_down in the 16 layers of 32 where llama.cpp's use_more_bits holds", () => {
    // llama.cpp: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2; for n = 32 the first 4, the last 4 and 6, 9, ..., 27.
    const more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31];
    expect(Array.from({ length: 32 }, (_, i) => i).filter((i) => useMoreBits(i, 32))).toEqual(more);
    // Qwen 2.5's 28 layers: n/8 = 3, 7n/8 = 24.
    expect(Array.from({ length: 28 }, (_, i) => i).filter((i) => useMoreBits(i, 28))).toEqual([
      0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27,
    ]);
  });

  it('types each tensor as Q4_K_M does, a slice taking the types of the layers it stands for', () => {
    const matrix = [4096, 4096];
    const type = (name: string, slice: number) => shapeTensorType(name, matrix, 'q4_k_m', slice, 32);
    expect(type('output.weight', 2)).toBe('q6_k');
    expect(type('token_embd.weight', 2)).toBe('q4_k');
    expect(type('blk.0.attn_q.weight', 2)).toBe('q4_k');
    // 2 of 32 layers stand for layers 0 and 16: Q6_K, then Q4_K (half of each, as in the whole model).
    expect(
      ['blk.0.attn_v.weight', 'blk.1.attn_v.weight', 'blk.0.ffn_down.weight', 'blk.1.ffn_down.weight'].map((n) =>
        type(n, 2),
      ),
    ).toEqual(['q6_k', 'q4_k', 'q6_k', 'q4_k']);
    expect(shapeTensorType('blk.0.attn_norm.weight', [4096], 'q4_k_m', 2, 32)).toBe('f32');
    expect(shapeTensorType('output.weight', matrix, 'q8_0', 2, 32)).toBe('q8_0');
  });

  it("sizes a 2-layer Llama 3 8B slice from ggml's block sizes, with the model's dimensions", () => {
    const s = MODEL_SHAPES['llama3-8b'];
    const file = shapeFile(s, { layers: 2, weights: 'q4_k_m' });
    const c = file.config;
    expect([c.dim, c.nHeads, c.nKvHeads, c.headDim, c.hiddenDim, c.vocabSize, c.ropeTheta, c.nLayers]).toEqual([
      4096, 32, 8, 128, 14336, 128256, 500000, 2,
    ]);
    const bytesOf = (name: string) => {
      const t = file.tensors.find((x) => x.name === name)!;
      return blockBytes(t.dtype as BlockDType, t.shape[0], t.shape[1]);
    };
    expect(bytesOf('output.weight')).toBe(blockBytes('q6_k', 128256, 4096));
    expect(bytesOf('blk.0.attn_v.weight')).toBe(blockBytes('q6_k', 1024, 4096));
    expect(bytesOf('blk.1.ffn_down.weight')).toBe(blockBytes('q4_k', 4096, 14336));
    // Beyond the matrices: the norms, and the header, mostly the vocab (per token a u64 length, at most 7 bytes of 't<id>', an f32
    // score and an i32 type: 23 bytes), tensor infos and padding (under 64 KiB).
    const matrices = file.tensors
      .filter((t) => t.shape.length === 2)
      .reduce((sum, t) => sum + blockBytes(t.dtype as BlockDType, t.shape[0], t.shape[1]), 0);
    expect(file.bytes - matrices).toBeGreaterThan(0);
    expect(file.bytes - matrices).toBeLessThan(5 * 4096 * 4 + 128256 * 23 + 2 ** 16);
    for (const name of SHAPE_NAMES)
      expect(shapeFile(MODEL_SHAPES[name], { layers: 1, weights: 'q8_0' }).config.headDim).toBe(128);
  });

  for (const arch of ['llama', 'qwen2'] as const) {
    it(`writes a scaled-down ${arch} shape that sparq reads back and runs`, () => {
      const shape = tiny(arch);
      const path = join(dir, `tiny-${arch}.gguf`);
      const size = writeShapeGGUF(referenceEngine, shape, { layers: 2, weights: 'q4_k_m' }, path);
      expect(size).toBe(shapeFile(shape, { layers: 2, weights: 'q4_k_m' }).bytes);
      expect(statSync(path).size).toBe(size);
      const { loaded } = readModelFile(path, referenceEngine);
      const c = loaded.config;
      expect([
        c.arch,
        c.dim,
        c.nLayers,
        c.nHeads,
        c.nKvHeads,
        c.hiddenDim,
        c.vocabSize,
        c.ropeTheta,
        c.attnBias,
      ]).toEqual([arch, 256, 2, 2, 1, 512, 300, 500000, arch === 'qwen2']);
      // 2 of 4 layers stand for layers 0 and 2; use_more_bits(i, 4) holds for i = 2 ((i - 0) % 3 == 2) and 3: Q4_K, then Q6_K.
      const types = Object.fromEntries([...loaded.tensors].map(([name, t]) => [name, t.dtype]));
      expect(types).toMatchObject({
        'output.weight': 'q6_k',
        'token_embd.weight': 'q4_k',
        'blk.0.attn_v.weight': 'q4_k',
        'blk.1.attn_v.weight': 'q6_k',
        'blk.1.ffn_down.weight': 'q6_k',
        'blk.0.attn_norm.weight': 'f32',
      });
      const model = buildModel(referenceEngine, loaded);
      const session = new Session(referenceEngine, model, {
        capacity: 8,
        maxPrefill: 4,
        attention: defaultAttention('dense', c.headDim, 8),
      });
      const logits = session.prefill([1, 40, 41, 42]);
      expect(logits.length).toBe(300);
      expect(logits.every(Number.isFinite)).toBe(true);
    });
  }

  (llamaMissing ? it.skip : it)(
    `is loaded and run by llama.cpp${llamaMissing ? ` (skipped: ${llamaMissing})` : ''}`,
    async () => {
      const path = join(dir, 'tiny-llama-q8_0.gguf');
      writeShapeGGUF(referenceEngine, tiny('llama'), { layers: 1, weights: 'q8_0' }, path);
      const run = await llamaCppGreedy(path, 1, 2, 300);
      expect(run.logits.map((l) => l.length)).toEqual([300, 300]);
      expect(run.logits.every((l) => l.every(Number.isFinite))).toBe(true);
    },
  );
});
