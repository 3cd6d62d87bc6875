/**
 * stories260K through GGUF: convert, write, read back. F32 keeps every tensor
 * bit for bit and the greedy text byte for byte; Q4_0 tensors hold exactly
 * engine.quantize's bytes; every type loads and runs; the tokenizer embedded
 * in the metadata is tok512 again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Tensor } from '@sparq/core';
import {
  buildModel,
  findTokenizer,
  ggufTensors,
  llamaMetadata,
  readModelFile,
  readTokenizerFile,
  tensorBytes,
  writeGGUFFile,
  type GGUFFileType,
} from '@sparq/llm';
import { forEachBackend } from '../support/backends.ts';
import { expectedText, files, greedy, lacking, storiesMissing, teacherForced, GENERATE_OPS } from './support.ts';

const describeStories = storiesMissing ? describe.skip : describe;
const dir = mkdtempSync(join(tmpdir(), 'sparq-gguf-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeStories(`stories260K as GGUF${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  forEachBackend('GGUF conversion', (engine) => {
    const skip = lacking(engine, [...GENERATE_OPS, 'quantize', 'dequantize']);
    const test = skip ? it.skip : it;
    const suffix = skip ? ` (skipped: ${skip})` : '';
    const source = () => readModelFile(files.model.path, engine);
    // The f32 greedy tokens, computed once per backend.
    let f32Tokens: number[] | null = null;
    const f32Greedy = () =>
      (f32Tokens ??= greedy(
        engine,
        buildModel(engine, source().loaded),
        readTokenizerFile(files.tok512.path, 512),
      ).tokens);
    /** Converts to `type`, writes the file, reads it back. */
    const roundTrip = (type: GGUFFileType) => {
      const src = source();
      const tokenizer = readTokenizerFile(files.tok512.path, 512);
      const { tensors } = ggufTensors(engine, src.loaded, type);
      const path = join(dir, `${engine.name}-${type}.gguf`);
      writeGGUFFile(path, llamaMetadata(src.loaded.config, tokenizer, { fileType: type }), tensors);
      return { src, tokenizer, written: tensors, back: readModelFile(path, engine) };
    };

    test(`f32: same config, every tensor bit for bit, the tokenizer, and the greedy text${suffix}`, () => {
      const { src, tokenizer, back } = roundTrip('f32');
      expect(back.loaded.config).toEqual(src.loaded.config);
      // A shared classifier is not written: llama.cpp falls back to token_embd.
      expect(back.gguf!.tensors.some((t) => t.name === 'output.weight')).toBe(false);
      expect([...back.loaded.tensors.keys()].sort()).toEqual([...src.loaded.tensors.keys()].sort());
      for (const [name, t] of src.loaded.tensors) {
        const b = back.loaded.tensors.get(name)!;
        expect(b.dtype, name).toBe('f32');
        expect(b.shape, name).toEqual(t.shape);
        expect(Buffer.from(tensorBytes(b)).equals(Buffer.from(tensorBytes(t))), name).toBe(true);
      }
      const embedded = findTokenizer(back);
      expect(embedded.source).toContain('GGUF metadata');
      expect(embedded.tokenizer.vocab.tokens).toEqual(tokenizer.vocab.tokens);
      expect(Array.from(embedded.tokenizer.scores)).toEqual(Array.from(tokenizer.scores));
      const r = greedy(engine, buildModel(engine, back.loaded), embedded.tokenizer);
      expect(Buffer.from(r.text).toString('utf8')).toBe(expectedText());
    });

    test(`q4_0: matrices hold engine.quantize's bytes, norms and ragged rows stay F32, text is sensible${suffix}`, () => {
      const { src, back } = roundTrip('q4_0');
      for (const [name, t] of src.loaded.tensors) {
        const b = back.loaded.tensors.get(name)!;
        if (t.rank === 1 || t.shape[1] % 32 !== 0) {
          expect(b.dtype, name).toBe('f32');
          continue;
        }
        const q = Tensor.zeros('q4_0', t.shape);
        engine.quantize(q, t as Tensor<'f32'>);
        expect(b.dtype, name).toBe('q4_0');
        expect(Buffer.from(tensorBytes(b)).equals(Buffer.from(q.data)), name).toBe(true);
      }
      const same = teacherForced(engine, buildModel(engine, back.loaded), f32Greedy());
      console.log(`[${engine.name}] GGUF q4_0: ${same}/200 teacher-forced tokens agree with f32`);
      expect(same).toBeGreaterThanOrEqual(160);
    });

    for (const type of ['f16', 'q4_1', 'q8_0'] as const) {
      // 100 positions keep the reference backend's slower f16/q4_1/q8_0 products within the time budget.
      test(`${type}: loads with ${type} matrices and runs (teacher-forced floor 80/100)${suffix}`, () => {
        const { written, back } = roundTrip(type);
        expect(written.find((w) => w.name === 'blk.0.attn_q.weight')!.tensor.dtype).toBe(type);
        expect(back.loaded.tensors.get('blk.0.attn_q.weight')!.dtype).toBe(type);
        const same = teacherForced(engine, buildModel(engine, back.loaded), f32Greedy().slice(0, 101));
        console.log(`[${engine.name}] GGUF ${type}: ${same}/100 teacher-forced tokens agree with f32`);
        expect(same).toBeGreaterThanOrEqual(80);
      });
    }
  });
});
