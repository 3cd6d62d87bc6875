/**
 * Byte-level BPE pre-tokenizers (GGUF `tokenizer.ggml.pre`): the regexes
 * that cut text into words before merging, so that no merge crosses a word
 * boundary. The patterns are the ones each model family's tokenizer.json
 * declares, in the forms llama.cpp uses (llama-vocab.cpp):
 *
 * - `(?i:'s|...)` spelled case by case (`'[sS]`), which means the same;
 * - `\s` as Unicode White_Space (JavaScript's `\s` also takes U+FEFF and
 *   misses U+0085; llama.cpp's whitespace table is exactly White_Space).
 *
 * Several patterns apply in turn, each cutting the pieces the previous one
 * left. Text between matches is kept as a piece of its own (Hugging Face's
 * "Isolated" split), so no byte is ever dropped.
 */
import { FormatError } from '@sparq/core';

const WS = '\\p{White_Space}';
const NOT_WS = '\\P{White_Space}';

/** GPT-2's word pattern: contractions, letters, numbers, other symbols, each with an optional leading space; trailing spaces. */
const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|${WS}+(?!${NOT_WS})`;

/**
 * Llama 3's and Qwen 2's pattern differs from GPT-2's: any one non-letter
 * (not just a space) may lead a word, newlines group with the symbols before
 * them, and numbers are cut into runs of `digits` (1-3 for Llama 3, single
 * digits for Qwen).
 */
const llama3Like = (digits: string) =>
  `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}${digits}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|${WS}*[\\r\\n]+|${WS}+(?!${NOT_WS})|${WS}+`;

/** Each pre-tokenizer's patterns, applied in order. */
const PATTERNS: Record<string, string[]> = {
  llama3: [llama3Like('{1,3}')],
  qwen2: [llama3Like('')],
  // SmolLM: every digit a word of its own, then GPT-2's pattern.
  smollm: ['\\p{N}', GPT2],
  gpt2: [GPT2],
};

/** tokenizer.ggml.pre names llama.cpp accepts for each pattern set (the ones this engine supports). */
const NAMES: Record<string, string> = {
  'llama-bpe': 'llama3',
  llama3: 'llama3',
  'llama-v3': 'llama3',
  qwen2: 'qwen2',
  'deepseek-r1-qwen': 'qwen2',
  smollm: 'smollm',
  'gpt-2': 'gpt2',
};

export const PRE_TOKENIZERS: readonly string[] = Object.keys(NAMES);

/** The word splitter for `pre`; a FormatError names what is supported otherwise. */
export function preTokenizer(pre: string): (text: string) => string[] {
  const family = NAMES[pre];
  if (!family)
    throw new FormatError(`tokenizer.ggml.pre "${pre}" is not supported (supported: ${PRE_TOKENIZERS.join(', ')})`);
  const regexes = PATTERNS[family].map((p) => new RegExp(p, 'gu'));
  return (text) => {
    let pieces = [text];
    for (const re of regexes) {
      const cut: string[] = [];
      for (const piece of pieces) splitIsolated(piece, re, cut);
      pieces = cut;
    }
    return pieces;
  };
}

/** Appends the matches of `re` in `text` and the stretches between them, in order. */
function splitIsolated(text: string, re: RegExp, out: string[]): void {
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(m[0]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
}
