/**
 * Long contexts: a context whose weights, KV cache and scratch do not fit is
 * refused before anything loads, with the bytes it needs and has (library and
 * CLI); prefill reports its progress with the rate so far (Session, TextSession,
 * generate()). Files are random-weight shapes written to a temporary folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Engine, SparqRangeError, Tensor } from '@sparq/core';
import {
  MAX_DIM,
  Session,
  checkModelMemory,
  defaultAttention,
  generate,
  memoryAvailable,
  openModel,
  readModelFile,
  readModelPlan,
  repackModel,
  tensorByteSize,
  writeShapeGGUF,
  type ModelShape,
  type PrefillProgress,
} from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';
import { runSparq } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-memory-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** 1 layer, 32 KV heads of 128 (MHA), Q8_0: 16 KiB of f16 K and V per position, a 71 MB file. */
const WIDE: ModelShape = {
  arch: 'llama',
  dim: 4096,
  nLayers: 1,
  nHeads: 32,
  nKvHeads: 32,
  hiddenDim: 256,
  vocabSize: 300,
  ropeTheta: 10000,
  normEps: 1e-5,
  context: 512,
  source: 'test',
};
const KV_BYTES_PER_POSITION = 2 * 4096 * 2; // K and V rows, f16, single-k (dense)
/** Positions whose KV cache alone is twice the memory this process has (the file allows them). */
const tooMany = 2 ** Math.ceil(Math.log2((2 * memoryAvailable().bytes) / KV_BYTES_PER_POSITION));
const wide = join(dir, 'wide.gguf');
if (tooMany <= MAX_DIM) writeShapeGGUF(referenceEngine, WIDE, { weights: 'q8_0', positions: tooMany }, wide);
const tiny = join(dir, 'tiny.gguf');
writeShapeGGUF(referenceEngine, { ...WIDE, dim: 256, nHeads: 2, nKvHeads: 2, nLayers: 2 }, { weights: 'q8_0' }, tiny);

describe('memory before loading', () => {
  it('plans the weights from the header: the bytes of every tensor, as stored or converted', () => {
    const { loaded } = readModelFile(tiny, referenceEngine);
    const stored = [...loaded.tensors.values()].reduce((sum, t) => sum + tensorByteSize(t.dtype, t.size), 0);
    expect(readModelPlan(tiny).weightBytes).toBe(stored);
    const vectors = [...loaded.tensors.values()].filter((t) => t.rank === 1).reduce((sum, t) => sum + 4 * t.size, 0);
    const matrixElements = [...loaded.tensors.values()].filter((t) => t.rank === 2).reduce((sum, t) => sum + t.size, 0);
    expect(readModelPlan(tiny, 'f32').weightBytes).toBe(vectors + 4 * matrixElements);
  });

  it('counts the copies a backend lays out for its blocked products: every matrix a product reads, not an embedding with its own output matrix', () => {
    const { loaded } = readModelFile(tiny, referenceEngine);
    const stored = readModelPlan(tiny).weightBytes;
    // A backend whose copy is one byte per element of the dtypes it repacks (q8_0 here).
    const calls: string[] = [];
    const repacking = new Engine({
      ...referenceEngine.backend,
      repackedBytes: (dtype, rows, cols) => (
        calls.push(`${dtype} ${rows}x${cols}`),
        dtype === 'q8_0' ? rows * cols : 0
      ),
    });
    const products = [...loaded.tensors.entries()].filter(([name, t]) => t.rank === 2 && name !== 'token_embd.weight');
    expect(loaded.tensors.has('output.weight')).toBe(true);
    const copies = products.filter(([, t]) => t.dtype === 'q8_0').reduce((sum, [, t]) => sum + t.size, 0);
    expect(copies).toBeGreaterThan(0);
    expect(readModelPlan(tiny, undefined, repacking)).toMatchObject({ weightBytes: stored, repackedBytes: copies });
    expect(calls).toHaveLength(products.length);
    const limit = (bytes: number) => ({ bytes, source: 'a test limit' });
    const plain = checkModelMemory(referenceEngine, tiny, { contextSize: 64 }, limit(Number.MAX_SAFE_INTEGER));
    expect(plain.repacked).toBe(false);
    const plan = checkModelMemory(repacking, tiny, { contextSize: 64 }, limit(Number.MAX_SAFE_INTEGER));
    expect([plan.weights, plan.repacked]).toEqual([plain.weights + copies, true]);
    // The copies only speed up prefill: a context that fits only without them runs without them.
    const tight = checkModelMemory(repacking, tiny, { contextSize: 64 }, limit(plan.total - 1));
    expect([tight.weights, tight.total, tight.repacked]).toEqual([plain.weights, plain.total, false]);
    expect(() => checkModelMemory(repacking, tiny, { contextSize: 64 }, limit(plain.total - 1))).toThrow(
      `needs ${plain.total} bytes`,
    );
  });

  it('repackModel makes at once the copies the plan counts: one call per matrix a product reads, their bytes', () => {
    const made: Tensor[] = [];
    const repacking = new Engine({
      ...referenceEngine.backend,
      repackedBytes: (dtype, rows, cols) => (dtype === 'q8_0' ? rows * cols : 0),
      repackNow: (w) => (made.push(w), w.dtype === 'q8_0'),
    });
    const lm = openModel(repacking, tiny);
    const { layers, classifier } = lm.model.weights;
    expect(repackModel(repacking, lm.model)).toBe(readModelPlan(tiny, undefined, repacking).repackedBytes);
    expect(made).toEqual([...layers.flatMap((l) => [l.wq, l.wk, l.wv, l.wo, l.w1, l.w2, l.w3]), classifier]);
    // A backend without copies: nothing to make.
    expect(repackModel(referenceEngine, openModel(referenceEngine, tiny).model)).toBe(0);
  });

  it('refuses a context one byte over what there is, naming both numbers, and accepts it at exactly that', () => {
    const options = { contextSize: 4096 };
    const plan = checkModelMemory(referenceEngine, tiny, options, { bytes: Number.MAX_SAFE_INTEGER, source: 'test' });
    expect(plan.total).toBe(plan.weights + plan.kv + plan.scratch);
    expect(plan.kv).toBeGreaterThanOrEqual(2 * 4096 * 2 * 256 * 2); // 2 layers, K and V rows of 256 f16 per position
    expect(checkModelMemory(referenceEngine, tiny, options, { bytes: plan.total, source: 'test' })).toEqual(plan);
    const refuse = () =>
      checkModelMemory(referenceEngine, tiny, options, { bytes: plan.total - 1, source: 'a test limit' });
    expect(refuse).toThrow(SparqRangeError);
    expect(refuse).toThrow(`a context of 4096 positions (KV f16 single-k) needs ${plan.total} bytes`);
    expect(refuse).toThrow(`more than the ${plan.total - 1} bytes`);
    expect(refuse).toThrow('(a test limit)');
    // K rows f32 and V rows f16: 2 bytes more per K element than all-f16, V's unchanged.
    const split = { contextSize: 4096, kv: { k: 'f32', v: 'f16' } } as const;
    const wider = checkModelMemory(referenceEngine, tiny, split, { bytes: Number.MAX_SAFE_INTEGER, source: 'test' });
    expect(wider.kv - plan.kv).toBe(2 * 4096 * 256 * 2);
    expect(() => checkModelMemory(referenceEngine, tiny, split, { bytes: wider.total - 1, source: 'test' })).toThrow(
      'a context of 4096 positions (KV f32/f16 single-k)',
    );
  });

  (tooMany <= MAX_DIM ? it : it.skip)(
    "openModel and sparq generate refuse a context past this machine's memory before reading the weights",
    () => {
      expect(() => openModel(referenceEngine, wide, { contextSize: tooMany })).toThrow(
        /needs \d+ bytes .* more than the \d+ bytes .* this process has \((cgroup limit|os\.totalmem)/,
      );
      const r = runSparq('generate', '--model', wide, '-n', String(tooMany), '--prompt', 'a');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`a context of ${tooMany} positions \\(KV f16 single-k\\) needs \\d+ bytes`));
    },
  );
});

describe('prefill progress', () => {
  it('Session.prefill reports each chunk with the rate so far', () => {
    const lm = openModel(referenceEngine, tiny);
    const session = new Session(lm.engine, lm.model, {
      capacity: 16,
      maxPrefill: 4,
      attention: defaultAttention('dense', 128, 16),
    });
    const seen: PrefillProgress[] = [];
    session.prefill([1, 40, 41, 42, 43, 44, 45, 46, 47, 48], { onProgress: (p) => seen.push(p) });
    expect(seen.map((p) => [p.done, p.total])).toEqual([
      [4, 10],
      [8, 10],
      [10, 10],
    ]);
    for (const p of seen) expect(p.tokensPerSecond).toBeGreaterThan(0);
  });

  it('TextSession.generate and generate() pass the rate to onProgress', async () => {
    const lm = openModel(referenceEngine, tiny);
    const seen: PrefillProgress[] = [];
    const run = lm
      .createSession({ contextSize: 16, prefillChunk: 4 })
      .generate([1, 40, 41, 42, 43, 44], { maxTokens: 1, temperature: 0, onProgress: (p) => seen.push(p) });
    for await (const piece of run) void piece;
    expect(seen.map((p) => [p.done, p.total])).toEqual([
      [4, 6],
      [6, 6],
    ]);
    expect(seen.every((p) => p.tokensPerSecond > 0)).toBe(true);
    const fromGenerate: PrefillProgress[] = [];
    generate(lm.engine, lm.model, lm.tokenizer, 'abc', {
      steps: 8,
      temperature: 0,
      topp: 1,
      seed: 1,
      attention: defaultAttention('dense', 128, 8),
      onProgress: (p) => fromGenerate.push(p),
    });
    expect(fromGenerate.at(-1)).toMatchObject({ done: fromGenerate.at(-1)!.total });
    expect(fromGenerate.at(-1)!.tokensPerSecond).toBeGreaterThan(0);
  });
});
