/**
 * How closely sparq's default 'int8' product follows llama.cpp (node-llama-cpp's prebuilt CPU build)
 * on files of every tensor type: random-weight llamas (random-model.ts, dim 256, no planted path, so
 * the greedy tokens follow the arithmetic) written by our quantizers (byte-exact with llama-quantize
 * without an importance matrix, test/conformance/ggml-oracle.spec.ts), both engines with f32 KV caches.
 *
 * Per type, over SEEDS models of STEPS greedy steps from BOS:
 * - tokens: greedy tokens equal before the first difference (median over the seeds);
 * - chars: characters of the decoded text equal before the first difference (median);
 * - rel: max over steps and tokens of |Δlogit| / max |logit| of the step, sparq fed llama.cpp's
 *   tokens (teacher forcing), the worst seed; the share of all steps whose rel is within 1e-3; and
 *   the first step beyond 1e-5 (median; STEPS when none): the steps before it agree to f32
 *   rounding, before a float summation order has flipped a rounding of the activations.
 *
 *   pnpm tsx bench/llama-cpp-agreement.ts [--product int8|dequant] [--steps N] [--seeds N]
 *     [--types bf16,f16] [--engine native|reference]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProductPath } from '@sparq/core';
import {
  GGUF_FILE_TYPES,
  Session,
  argmax,
  buildModel,
  defaultAttention,
  randomLlama,
  readModelFile,
  writeRandomGGUF,
} from '@sparq/llm';
import { engines, referenceEngine } from '../test/support/backends.ts';
import { llamaCppGreedy, llamaCppMissing } from '../test/support/llama-cpp.ts';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const PRODUCT = arg('product', 'int8') as ProductPath;
const STEPS = Number(arg('steps', '128'));
const SEEDS = Number(arg('seeds', '5'));
const TYPES = arg('types', GGUF_FILE_TYPES.join(',')).split(',');
const unknown = TYPES.filter((t) => !(GGUF_FILE_TYPES as readonly string[]).includes(t));
if (unknown.length) throw new Error(`--types: ${unknown.join(', ')}, expected some of ${GGUF_FILE_TYPES.join(', ')}`);
const BOS = 1;

const missing = await llamaCppMissing();
if (missing) throw new Error(missing);
const ENGINE = arg('engine', 'native');
const engine = engines.find((e) => e.name === ENGINE);
if (!engine) throw new Error(`--engine ${ENGINE}: not available here (${engines.map((e) => e.name).join(', ')})`);
const dir = mkdtempSync(join(tmpdir(), 'sparq-agreement-'));
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const commonPrefix = (a: string, b: string) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

console.log(`engine ${engine.name}, product ${PRODUCT}, ${SEEDS} seeds x ${STEPS} steps, f32 KV in both`);
console.log(
  '| type | tokens equal (median) | chars equal (median) | max rel |Δlogit| | steps within 1e-3 | first step beyond 1e-5 (median) |',
);
console.log('|---|---|---|---|---|---|');
try {
  for (const type of TYPES as (typeof GGUF_FILE_TYPES)[number][]) {
    const tokens: number[] = [];
    const chars: number[] = [];
    let rel = 0;
    let within = 0;
    const firstBeyond: number[] = [];
    for (let seed = 1; seed <= SEEDS; seed++) {
      let beyond = STEPS;
      const random = randomLlama({ seed });
      const path = writeRandomGGUF(referenceEngine, random, type, join(dir, `${type}-${seed}.gguf`));
      const theirs = await llamaCppGreedy(path, BOS, STEPS, random.tokenizer.vocabSize, { f32Kv: true });
      const model = buildModel(engine, readModelFile(path, engine).loaded);
      const options = {
        capacity: STEPS,
        maxPrefill: 1,
        attention: defaultAttention('dense', model.config.headDim, STEPS),
        kvDType: 'f32' as const,
        productPath: PRODUCT,
      };
      // Teacher forcing: the logits of every step given llama.cpp's tokens.
      const forced = new Session(engine, model, options);
      let out = forced.prefill([BOS]);
      let firstDiff = STEPS;
      for (let step = 0; step < STEPS; step++) {
        const want = theirs.logits[step];
        let scale = 0;
        let delta = 0;
        for (let j = 0; j < want.length; j++) {
          scale = Math.max(scale, Math.abs(want[j]));
          delta = Math.max(delta, Math.abs(out[j] - want[j]));
        }
        rel = Math.max(rel, delta / scale);
        if (delta / scale <= 1e-3) within++;
        if (delta / scale > 1e-5 && beyond === STEPS) beyond = step;
        if (firstDiff === STEPS && argmax(out) !== theirs.tokens[step]) firstDiff = step;
        if (step + 1 < STEPS) out = forced.decode(theirs.tokens[step]);
      }
      // sparq's own greedy run, for the text.
      const free = new Session(engine, model, options);
      const ours: number[] = [];
      out = free.prefill([BOS]);
      for (let step = 0; step < STEPS; step++) {
        ours.push(argmax(out));
        if (step + 1 < STEPS) out = free.decode(ours[step]);
      }
      tokens.push(firstDiff);
      firstBeyond.push(beyond);
      chars.push(commonPrefix(random.tokenizer.decode(ours), random.tokenizer.decode(theirs.tokens)));
    }
    console.log(
      `| ${type} | ${median(tokens)}/${STEPS} | ${median(chars)} | ${rel.toExponential(2)} | ${((100 * within) / (SEEDS * STEPS)).toFixed(0)}% | ${median(firstBeyond)} |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
