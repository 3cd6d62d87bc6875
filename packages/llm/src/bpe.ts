/**
 * Byte-level BPE (GGUF tokenizer model `gpt2`), as llama.cpp and Hugging
 * Face encode one stretch of plain text:
 *
 * 1. The pre-tokenizer cuts the text into words (pre-tokenize.ts).
 * 2. Each word's UTF-8 bytes are spelled in GPT-2's byte alphabet: one
 *    printable character per byte value, so that every token is a string.
 * 3. With `ignoreMerges` (Llama 3) a word that is itself a token is taken
 *    whole, whatever the merges would build.
 * 4. Otherwise each byte starts as a symbol, and the adjacent pair with the
 *    lowest merge rank joins (the leftmost on ties) until no pair has a rank.
 *
 * Step 4 is merge-pairs.ts with priority = rank. Each word's ids are cached
 * (word-cache.ts).
 */
import { mergePairs } from './merge-pairs.ts';
import { preTokenizer } from './pre-tokenize.ts';
import type { Vocab } from './vocab.ts';
import { WordCache } from './word-cache.ts';
import { encodeUtf8 } from './utf8.ts';

/**
 * GPT-2's byte alphabet: the printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
 * stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD)
 * take the code points from 256 up, in byte order.
 */
export const BYTE_CHARS: readonly string[] = (() => {
  const chars: string[] = [];
  let extra = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    chars.push(String.fromCodePoint(printable ? b : extra++));
  }
  return chars;
})();

/** The byte each character of the alphabet stands for. */
export const CHAR_BYTES: ReadonlyMap<string, number> = new Map(BYTE_CHARS.map((c, b) => [c, b]));

export class BytePairEncoder {
  private readonly ids: Map<string, number>;
  /** "left right" -> merge rank (lower merges first). */
  private readonly ranks = new Map<string, number>();
  private readonly split: (text: string) => string[];
  /** Llama 3's rule: a word that is a token is not merged. */
  private readonly ignoreMerges: boolean;
  private readonly cache = new WordCache();

  constructor(vocab: Vocab, ids: Map<string, number>) {
    this.ids = ids;
    vocab.merges.forEach((m, rank) => {
      if (!this.ranks.has(m)) this.ranks.set(m, rank);
    });
    this.split = preTokenizer(vocab.pre);
    this.ignoreMerges = ['llama-bpe', 'llama3', 'llama-v3'].includes(vocab.pre);
  }

  encode(text: string, _atStart: boolean, out: number[]): void {
    for (const word of this.split(text)) this.cache.append(word, (w) => this.encodeWord(w), out);
  }

  private encodeWord(word: string): number[] {
    let spelled = '';
    for (const b of encodeUtf8(word)) spelled += BYTE_CHARS[b];
    const whole = this.ids.get(spelled);
    if (this.ignoreMerges && whole !== undefined) return [whole];

    // Symbols: the word's bytes, one alphabet character each (all in the BMP: one UTF-16 unit).
    const text = Array.from(spelled);
    const next = mergePairs(
      text.length,
      (left, right) => this.ranks.get(`${text[left]} ${text[right]}`),
      (left, right) => {
        text[left] += text[right];
      },
    );

    const ids: number[] = [];
    for (let i = text.length > 0 ? 0 : -1; i >= 0; i = next[i]) {
      const id = this.ids.get(text[i]);
      if (id !== undefined) ids.push(id);
      // A merge result missing from the vocab (a broken file): llama.cpp then
      // looks up each byte of its UTF-8 spelling alone, which only ASCII finds.
      else for (const c of text[i]) if (c.charCodeAt(0) < 0x80 && this.ids.has(c)) ids.push(this.ids.get(c)!);
    }
    return ids;
  }
}
