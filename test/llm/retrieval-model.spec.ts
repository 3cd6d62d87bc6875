/**
 * The hand-built retrieval model (packages/llm/src/retrieval-model.ts, issue 25):
 * - its circuit at the far end of a 128k context, through the engine's own RoPE: a previous-token
 *   head picks the position o back among its neighbours and positions 128k back; the match head
 *   prefers a full n-gram match 128k back over a one-token mismatch next to the query;
 * - sparq's dense greedy decoding answers passkey and multi-key prompts (both backends);
 * - llama.cpp (node-llama-cpp) decodes the same greedy tokens from the same GGUF file.
 * Prompts of 300-1,500 tokens (the reference backend takes the short ones): the cost of a long context is in the eval, not here.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Tensor, type Engine } from '@sparq/core';
import {
  MATCH_MARGIN,
  PREV_MARGIN,
  RETRIEVAL_HEAD_DIM,
  RETRIEVAL_NORM_EPS,
  Session,
  argmax,
  buildModel,
  defaultAttention,
  fillerTokens,
  ggufTensors,
  llamaMetadata,
  needleCase,
  readModelFile,
  readTokenizerFile,
  retrievalModel,
  writeGGUFFile,
  type NeedleTask,
  type Tokenizer,
} from '@sparq/llm';
import { engines, referenceEngine } from '../support/backends.ts';
import { llamaCppGreedy, llamaCppMissing } from '../support/llama-cpp.ts';
import { sharedFile } from '../support/shared.ts';
import { runSparq } from './support.ts';

const tok512 = sharedFile('models/tok512.bin');
const text = sharedFile('data/tinystories_val.txt');
const missing = tok512.missing ?? text.missing;
const describeData = missing ? describe.skip : describe;
const fast: Engine = engines.find((e) => e.name === 'native') ?? referenceEngine;
const d = RETRIEVAL_HEAD_DIM;
const built = retrievalModel({ ngram: 4 });
const c = built.loaded.config;

/** Greedy tokens of sparq's dense decode after `prompt`. */
function sparqGreedy(engine: Engine, prompt: readonly number[], steps: number, loaded = built.loaded): number[] {
  const model = buildModel(engine, loaded);
  const session = new Session(engine, model, {
    capacity: prompt.length + steps,
    maxPrefill: 256,
    attention: defaultAttention('dense', d, prompt.length),
  });
  let logits = session.prefill([...prompt]);
  const out: number[] = [];
  for (let i = 0; i < steps; i++) {
    out.push(argmax(logits));
    if (i + 1 < steps) logits = session.decode(out[i]);
  }
  return out;
}

/** Row `row` of (rows, cols) weight w times x. */
function rowDot(w: Tensor, row: number, x: Float64Array): number {
  const cols = w.shape[1];
  let s = 0;
  for (let j = 0; j < cols; j++) s += (w.data as Float32Array)[row * cols + j] * x[j];
  return s;
}

/** One head's projection of the normalized residual x: (headDim) f32, rotated by the engine's RoPE at `pos`. */
function projectAt(engine: Engine, w: Tensor, head: number, x: Float64Array, pos: number): Float32Array {
  let sq = 0;
  for (const v of x) sq += v * v;
  const xn = x.map((v) => v / Math.sqrt(sq / x.length + RETRIEVAL_NORM_EPS));
  const t = Tensor.zeros('f32', [1, 1, d]);
  for (let i = 0; i < d; i++) t.data[i] = rowDot(w, head * d + i, xn);
  engine.rope(t, new Tensor('i32', Int32Array.of(pos), [1]), c.ropeTheta);
  return t.data as Float32Array;
}

const score = (q: Float32Array, k: Float32Array) => q.reduce((s, v, i) => s + v * k[i], 0) / Math.sqrt(d);

describe('retrieval model circuit at 128k positions', () => {
  const T = 131071; // the query's position: the last of the 128k context
  const embd = built.loaded.tensors.get('token_embd.weight')!;
  const row = (v: number) => Float64Array.from((embd.data as Float32Array).subarray(v * c.dim, (v + 1) * c.dim));

  it('a previous-token head peaks o positions back, by at least its margin over neighbours and far positions', () => {
    const wq = built.loaded.tensors.get('blk.0.attn_q.weight')!;
    const wk = built.loaded.tensors.get('blk.0.attn_k.weight')!;
    const x = row(300); // the key and query read only the constant component: any token
    for (const o of [1, 4]) {
      const q = projectAt(fast, wq, o - 1, x, T);
      const peak = score(q, projectAt(fast, wk, 0, x, T - o));
      const others = [0, 1, 2, 3, 5, 6, 7, 8, 12, 100, 1000, 65536, 131000, T].filter((back) => back !== o);
      for (const back of others)
        expect(peak - score(q, projectAt(fast, wk, 0, x, T - back)), `o ${o}, ${back} back`).toBeGreaterThan(
          0.9 * PREV_MARGIN,
        );
    }
  });

  it('the match head prefers a full 4-gram match 128k back over a 3-of-4 match next to the query', () => {
    const wq = built.loaded.tensors.get('blk.1.attn_q.weight')!;
    const wk = built.loaded.tensors.get('blk.1.attn_k.weight')!;
    const m = built.design.m;
    // Layer 2's input: [1, c(t), c(t-1), ..., c(t-4)] laid out as the embedding and P_1..P_4.
    const residual = (tokens: number[]) => {
      const x = new Float64Array(c.dim);
      x[0] = 1;
      tokens.forEach((v, o) =>
        row(v)
          .subarray(1, 1 + m)
          .forEach((value, j) => (x[1 + o * m + j] = value)),
      );
      return x;
    };
    const gram = [301, 302, 303, 304];
    const q = projectAt(fast, wq, 0, residual([...gram].reverse().concat(9)), T); // c(t) = 304, c(t-1) = 303, ...
    // The key at s reads tokens s-1..s-4: a full match, and each one-token mismatch.
    const full = score(q, projectAt(fast, wk, 0, residual([7, ...[...gram].reverse()]), 5));
    for (let wrong = 0; wrong < 4; wrong++) {
      for (const v of [10, 200, 305, 480]) {
        const partial = [...gram].reverse();
        partial[wrong] = v;
        expect(
          full - score(q, projectAt(fast, wk, 0, residual([7, ...partial]), T - 1)),
          `token ${wrong} back replaced by ${v}`,
        ).toBeGreaterThan(0.9 * MATCH_MARGIN);
      }
    }
  });
});

describeData(`retrieval model answers needle prompts${missing ? ` skipped: ${missing}` : ''}`, () => {
  const tokenizer: Tokenizer = missing ? (null as never) : readTokenizerFile(tok512.path, 512);
  const filler = missing ? [] : fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 4000);
  const cases = (length: number, depths: number[]) =>
    (['passkey', 'multikey'] as NeedleTask[]).flatMap((task) =>
      depths.map((depth, i) => needleCase(tokenizer, filler, task, length, depth, 11 + i, 4)),
    );

  it.each(engines.map((e) => [e.name, e] as const))('sparq dense greedy continues with the key (%s)', (_, engine) => {
    for (const x of engine === referenceEngine ? cases(300, [0.5]) : cases(1500, [0, 0.5, 1])) {
      const out = sparqGreedy(engine, x.prompt, x.answerTokens.length);
      expect(tokenizer.decode(out).trim(), `${x.task} depth ${x.depth}`).toBe(x.answer);
    }
  });

  it('a prompt without the needle does not produce the key', () => {
    const x = needleCase(tokenizer, filler, 'passkey', 1000, 0.5, 3, 4);
    const without = [...x.prompt.slice(0, x.needle[0]), ...x.prompt.slice(x.needle[1])];
    expect(tokenizer.decode(sparqGreedy(fast, without, x.answerTokens.length)).trim()).not.toBe(x.answer);
  });
});

const llamaMissing = missing ?? (await llamaCppMissing());
if (llamaMissing && process.env.CI === 'true' && !missing) throw new Error(`CI=true and ${llamaMissing}`);
const describeLlama = llamaMissing ? describe.skip : describe;
const dir = mkdtempSync(join(tmpdir(), 'sparq-retrieval-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeLlama(`retrieval model in llama.cpp${llamaMissing ? ` skipped: ${llamaMissing}` : ''}`, () => {
  it('gives the same greedy tokens as sparq dense on the same GGUF file', async () => {
    const tokenizer = readTokenizerFile(tok512.path, 512);
    const path = join(dir, 'retrieval.gguf');
    writeGGUFFile(
      path,
      llamaMetadata(c, tokenizer, { name: 'retrieval' }),
      ggufTensors(referenceEngine, built.loaded, 'f32').tensors,
    );
    const loaded = readModelFile(path, fast).loaded;
    const filler = fillerTokens(tokenizer, readFileSync(text.path, 'utf8'), 2000);
    for (const [task, depth] of [
      ['passkey', 0.2],
      ['multikey', 0.8],
    ] as const) {
      const x = needleCase(tokenizer, filler, task, 1200, depth, 5, 4);
      const steps = x.answerTokens.length + 2;
      const ours = sparqGreedy(fast, x.prompt, steps, loaded);
      const theirs = await llamaCppGreedy(path, x.prompt, steps, c.vocabSize);
      expect(tokenizer.decode(ours.slice(0, x.answerTokens.length)).trim(), `${task}: sparq`).toBe(x.answer);
      expect(theirs.tokens, `${task}: llama.cpp against sparq`).toEqual(ours);
    }
  }, 60_000);
});

describeData(`sparq retrieval-model${missing ? ` skipped: ${missing}` : ''}`, () => {
  it('writes a file of the requested n-gram and context, and refuses an n-gram out of range', () => {
    const path = join(dir, 'cli.gguf');
    const ok = runSparq('retrieval-model', '--out', path, '--ngram', '3', '--ctx', '4096');
    expect(ok.code, ok.stderr).toBe(0);
    const { config } = readModelFile(path).loaded;
    expect([config.seqLen, config.nLayers, config.headDim, config.nKvHeads, config.vocabSize]).toEqual([
      4096, 2, 128, 2, 512,
    ]);
    const bad = runSparq('retrieval-model', '--out', path, '--ngram', '9');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--ngram 9, expected an integer in [2, 5]');
  });
});
