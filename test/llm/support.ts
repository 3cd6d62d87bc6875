/**
 * Shared pieces of the llm tests: the stories260K files from ../shared (skipped
 * with the reason when absent), a greedy run, and token agreement counting.
 */
import type { Engine, ProductPath } from '@sparq/core';
import {
  Session,
  argmax,
  buildModel,
  defaultAttention,
  generate,
  readModelFile,
  readTokenizerFile,
  type AttentionConfig,
  type Model,
  type Tokenizer,
  type WeightType,
} from '@sparq/llm';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedFile } from '../support/shared.ts';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** `sparq ...` as a user runs it (from source), text output. */
export function runSparq(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/cli/src/main.ts'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export const files = {
  model: sharedFile('models/stories260K.bin'),
  tok512: sharedFile('models/tok512.bin'),
  tokenizer: sharedFile('models/tokenizer.bin'),
  expected: sharedFile('models/stories260K_greedy200.txt'),
};

/** Why the stories260K tests cannot run, or null. */
export const storiesMissing = files.model.missing ?? files.tok512.missing ?? files.expected.missing;

export function expectedText(): string {
  return readFileSync(files.expected.path, 'utf8');
}

export function stories(engine: Engine, weights?: WeightType): { model: Model; tokenizer: Tokenizer } {
  const file = readModelFile(files.model.path, engine);
  return {
    model: buildModel(engine, file.loaded, weights),
    tokenizer: readTokenizerFile(files.tok512.path, file.loaded.config.vocabSize),
  };
}

/** Greedy run of `steps` positions from BOS (run.c's `-t 0 -n steps`); products with quantized weights by `productPath` (default: the runtime's). */
export function greedy(
  engine: Engine,
  model: Model,
  tokenizer: Tokenizer,
  attention?: Partial<AttentionConfig>,
  steps = 200,
  productPath?: ProductPath,
) {
  const a = { ...defaultAttention('dense', model.config.headDim, steps), ...attention };
  return generate(engine, model, tokenizer, '', {
    steps,
    temperature: 0,
    topp: 0.9,
    seed: 1,
    attention: a,
    productPath,
  });
}

/** Positions where two token sequences agree (compared up to the shorter length). */
export function agreement(a: readonly number[], b: readonly number[]): number {
  let same = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] === b[i]) same++;
  return same;
}

/** Ops a full generation needs (any attention method). */
export const GENERATE_OPS = [
  'matvec',
  'matmul',
  'rmsnorm',
  'rope',
  'kvAppend',
  'attentionPrefill',
  'attentionDecode',
] as const;

/** The first op of `ops` the engine lacks, as a skip reason, or null. */
export function lacking(engine: Engine, ops: readonly string[]): string | null {
  const missing = ops.filter((op) => !engine.has(op as never));
  return missing.length ? `${engine.name} does not implement ${missing.join(', ')}` : null;
}

/**
 * Teacher-forced agreement: feeds `reference` (BOS then tokens) one token at a
 * time and counts the positions where the model's argmax is the next token. Products with
 * quantized weights by `productPath` (default: the runtime's, DEFAULT_PRODUCT_PATH).
 */
export function teacherForced(
  engine: Engine,
  model: Model,
  reference: readonly number[],
  productPath?: ProductPath,
): number {
  const steps = reference.length - 1;
  const session = new Session(engine, model, {
    capacity: steps,
    maxPrefill: 1,
    attention: defaultAttention('dense', model.config.headDim, steps),
    productPath,
  });
  let logits = session.prefill([reference[0]]);
  let same = 0;
  for (let i = 1; i <= steps; i++) {
    if (argmax(logits) === reference[i]) same++;
    if (i < steps) logits = session.decode(reference[i]);
  }
  return same;
}
