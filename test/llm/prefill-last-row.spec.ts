/**
 * The last layer of a prefill forwards the last row alone past its K and V projections
 * (forward.ts). Its keys and values, and so the caches and every later decode step, are those of
 * forwarding every row ({ allRows: true }) bit for bit: the K and V products take the same operands
 * either way. The returned logits come from the same math on one row; they agree with the all-rows
 * logits within the product paths' rounding, and the residual stream's other rows are not computed.
 */
import {
  Session,
  buildModel,
  randomLlama,
  readModelFile,
  writeRandomGGUF,
  type AttentionConfig,
  type Model,
} from '@sparq/llm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { forEachBackend, referenceEngine } from '../support/backends.ts';

const DENSE: AttentionConfig = { method: 'dense', r: 4, k: 8, l: 2, reallocate: true };
const CONFIG = { dim: 64, hiddenDim: 160, nLayers: 2, nHeads: 4, nKvHeads: 2, seqLen: 64, seed: 11 };
const PROMPT = [1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51];
/**
 * Largest |difference| of the logits between the one-row and the all-rows last layer, relative
 * to the largest |logit|: the two differ only in f32 rounding order (a matvec against a matmul row,
 * one query row's attention against the causal tile's): a few ulps of each dot product of
 * length <= 160, far below 1e-5 of the logits' scale (the int8 path quantizes the same rows to the same codes).
 */
const ROUNDING = 1e-5;

const random = randomLlama(CONFIG);
const dir = mkdtempSync(join(tmpdir(), 'sparq-last-row-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Key and value rows of every layer's cache, copied (f16 bits or f32 values). */
function cacheRows(s: Session): number[][] {
  return s.caches.flatMap((c) => [Array.from(c.k), Array.from(c.v)]);
}

forEachBackend('prefill: the last layer forwards the last row alone', (engine) => {
  const q8File = join(dir, `q8_0-${engine.name}.gguf`);
  writeRandomGGUF(referenceEngine, random, 'q8_0', q8File);
  // f32 weights in chunks of 5 rows; q8_0 in one chunk of 13 (past gemm_q8_min_n: native's blocked int8 product).
  const models: [string, Model, number][] = [
    ['f32', buildModel(engine, random.loaded), 5],
    ['q8_0', buildModel(engine, readModelFile(q8File, engine).loaded), PROMPT.length],
  ];
  for (const [type, model, chunk] of models) {
    it(`${type} weights, chunks of ${chunk}: the same caches and decode steps bit for bit, the same logits within rounding`, () => {
      const session = (allRows: boolean) => {
        const s = new Session(engine, model, { capacity: 32, maxPrefill: chunk, attention: DENSE });
        const logits = s.prefill(PROMPT, { allRows }).slice();
        return { s, logits };
      };
      const one = session(false);
      const all = session(true);
      expect(cacheRows(one.s)).toEqual(cacheRows(all.s));
      const scale = Math.max(...all.logits.map(Math.abs));
      for (let i = 0; i < all.logits.length; i++)
        expect(Math.abs(one.logits[i] - all.logits[i])).toBeLessThanOrEqual(ROUNDING * scale);
      for (const token of [7, 60]) expect(one.s.decode(token)).toEqual(all.s.decode(token));
    });
  }

  it('the one-row prefill leaves the other rows of the residual stream where the layer before left them', () => {
    const [, model] = models[0];
    const s = new Session(engine, model, { capacity: 32, maxPrefill: PROMPT.length, attention: DENSE });
    s.prefill(PROMPT);
    const row0 = s.state.x.slice(0, CONFIG.dim);
    s.reset();
    s.prefill(PROMPT, { allRows: true });
    expect(Array.from(row0)).not.toEqual(Array.from(s.state.x.subarray(0, CONFIG.dim)));
  });
});
