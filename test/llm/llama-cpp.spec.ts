/**
 * Our GGUF files against llama.cpp itself (node-llama-cpp's prebuilt CPU
 * build). A small random-weight llama model is written in each tensor type
 * by our quantizers, loaded by both engines, and decoded greedily from BOS:
 * the tokens must be the same for 64 steps, and every logit of every step
 * within a tolerance named per type. A Q4_K_M-like mix (Q4_K, Q6_K for
 * attn_v, ffn_down and output, F32 norms) must work as well.
 *
 * The model plants a path in its classifier (random-model.ts `margin`), so
 * each step's top token leads the next by 0.13 or more while the engines
 * differ by under 0.09: agreement of the tokens is then expected, and the
 * logit tolerance is what tests the numbers. A misread block (a wrong scale,
 * nibble order or offset) moves logits by whole units.
 *
 * A copy of the f32 file with every tensor past a 2 GiB boundary (over 40 GiB,
 * sparse) must decode the same tokens in both engines: 64-bit offsets.
 *
 * Every tensor type runs (about 10 s for all of them).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '@sparq/core';
import {
  GGUF_FILE_TYPES,
  Session,
  argmax,
  buildModel,
  defaultAttention,
  expectedTensors,
  llamaMetadata,
  randomLlama,
  q4kmLike,
  readModelFile,
  withGGUF,
  writeGGUFFile,
  writeRandomGGUF,
  type GGUFFileType,
} from '@sparq/llm';
import { engines, referenceEngine } from '../support/backends.ts';
import { llamaCppGreedy, llamaCppMissing } from '../support/llama-cpp.ts';

const STEPS = 64;
const BOS = 1;

/**
 * Largest |Δlogit| accepted, by what the two engines round differently (the
 * logits span about 6 units here; both KV caches are f32, so the cache rounds
 * nothing):
 * - F32_ORDER: f32 weights, sums in different orders: a dot of K <= 512 terms
 *   differs by at most K U of its scale, through DEPTH = 9 products (per layer
 *   q/k/v, wo, w1/w3, w2; two layers; the classifier), logits within 6 units:
 *   DEPTH * 512 U * 6. Measured: 2.4e-6.
 * - F16_DOT: f16 weights (both engines round the activations to f16, 2^-11
 *   relative, so only elements near an f16 rounding boundary differ). Measured: 1.5e-3.
 * - BF16_DOT: a BF16 matrix is multiplied by activations rounded to bf16
 *   (relative step 2^-8, 8x f16's). Measured: 1.0e-2.
 * - Q8_DOT: both engines quantize the activations into ggml's activation
 *   blocks (Q8_0, Q8_1, Q8_K; docs/int8-products.md) with the same codes,
 *   except where a code lies within the engines' f32 disagreement of a rounding
 *   boundary and flips by one step (1/127 of its block's largest value); such a
 *   flip in a cached K or V row stays for every later step. Measured: 2e-6 to
 *   3e-6 where no code flipped (q2_k, q3_k, the mix), 4e-4 to 6.1e-2 otherwise
 *   (it was 4.8e-2 to 9.7e-2 with f16 caches and the engines' own roundings).
 * Each is at least 2.5x the largest measured value (Q8_DOT 3x).
 */
const F32_ORDER = 9 * 512 * 2 ** -24 * 6;
const F16_DOT = 0.01;
const BF16_DOT = 0.04;
const Q8_DOT = 0.2;
const tolerance = (type: GGUFFileType | 'mixed') =>
  type === 'f32' ? F32_ORDER : type === 'f16' ? F16_DOT : type === 'bf16' ? BF16_DOT : Q8_DOT;

const missing = await llamaCppMissing();
const requireOracle = process.env.CI === 'true';
const dir = mkdtempSync(join(tmpdir(), 'sparq-llama-cpp-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The fastest backend that computes on every matrix type of the file: native when it has them, else the reference. */
function engineFor(types: Set<string>): Engine {
  return (
    engines.find((e) => e.name === 'native' && [...types].every((t) => e.has('matvec', t as GGUFFileType))) ??
    referenceEngine
  );
}

/** sparq's greedy decode from BOS: tokens and each step's logits. */
function sparqGreedy(path: string) {
  const probe = readModelFile(path, referenceEngine);
  const types = new Set([...probe.loaded.tensors.values()].filter((t) => t.rank === 2).map((t) => t.dtype));
  const engine = engineFor(types);
  const model = buildModel(engine, engine === referenceEngine ? probe.loaded : readModelFile(path, engine).loaded);
  const session = new Session(engine, model, {
    capacity: STEPS,
    maxPrefill: 1,
    attention: defaultAttention('dense', model.config.headDim, STEPS),
    kvDType: 'f32',
  });
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let out = session.prefill([BOS]);
  for (let i = 0; i < STEPS; i++) {
    logits.push(out.slice());
    tokens.push(argmax(out));
    if (i + 1 < STEPS) out = session.decode(tokens[i]);
  }
  return { tokens, logits, engine: engine.name };
}

describe(`GGUF files in llama.cpp and sparq${missing && !requireOracle ? ` skipped: ${missing}` : ''}`, () => {
  if (missing) {
    (requireOracle ? it : it.skip)(`needs llama.cpp (CI=true requires it): ${missing}`, () => {
      throw new Error(missing);
    });
    return;
  }
  const model = randomLlama({ margin: 0.5 });
  const vocab = model.tokenizer.vocabSize;

  const cases: [GGUFFileType | 'mixed', GGUFFileType | ((name: string) => GGUFFileType)][] = [
    ...GGUF_FILE_TYPES.map((t): [GGUFFileType, GGUFFileType] => [t, t]),
    ['mixed', q4kmLike],
  ];
  it(`a file over 4 GiB (general.alignment 2^31, sparse on disk): both engines decode the packed file's tokens`, async () => {
    const packed = writeRandomGGUF(referenceEngine, model, 'f32', join(dir, 'packed.gguf'));
    const huge = join(dir, 'huge.gguf');
    const metadata = llamaMetadata(model.loaded.config, model.tokenizer).filter(([k]) => k !== 'general.alignment');
    const tensors = expectedTensors(model.loaded.config).map(({ name }) => ({
      name,
      tensor: model.loaded.tensors.get(name)!,
    }));
    writeGGUFFile(huge, [...metadata, ['general.alignment', { type: 'u32', value: 2 ** 31 }]], tensors);
    expect(Math.max(...withGGUF(huge, (f) => f.tensors.map((t) => t.fileOffset)))).toBeGreaterThan(2 ** 35);
    const expected = (await llamaCppGreedy(packed, BOS, 16, vocab)).tokens;
    expect((await llamaCppGreedy(huge, BOS, 16, vocab, { useMmap: false })).tokens).toEqual(expected);
    expect(sparqGreedy(huge).tokens.slice(0, 16)).toEqual(expected);
  });

  for (const [label, type] of cases) {
    it(`${label === 'mixed' ? 'mixed Q4_K / Q6_K / F32 (Q4_K_M-like)' : label}: same greedy tokens for ${STEPS} steps, every logit within ${tolerance(label)}`, async () => {
      const path = writeRandomGGUF(referenceEngine, model, type, join(dir, `${label}.gguf`));
      // The file holds the types asked for (the writer did not fall back to F32).
      const want = typeof type === 'string' ? () => type : type;
      withGGUF(path, (f) => {
        for (const t of f.tensors)
          expect(t.type.name, t.name).toBe((t.ne.length === 1 ? 'f32' : want(t.name)).toUpperCase());
      });
      const theirs = await llamaCppGreedy(path, BOS, STEPS, vocab, { f32Kv: true });
      const ours = sparqGreedy(path);
      let worst = 0;
      for (let step = 0; step < STEPS; step++) {
        for (let j = 0; j < vocab; j++)
          worst = Math.max(worst, Math.abs(ours.logits[step][j] - theirs.logits[step][j]));
      }
      console.log(
        `[llama.cpp vs sparq ${ours.engine}] ${label}: ${ours.tokens.filter((t, i) => t === theirs.tokens[i]).length}/${STEPS} greedy tokens equal, max |Δlogit| ${worst.toExponential(2)}`,
      );
      expect(ours.tokens).toEqual(theirs.tokens);
      expect(worst).toBeLessThanOrEqual(tolerance(label));
    });
  }
});
