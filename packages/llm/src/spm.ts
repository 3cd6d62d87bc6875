/**
 * SentencePiece BPE (GGUF tokenizer model `llama`), as llama.cpp's SPM
 * tokenizer (and llama2.c's run.c, which gives the same ids) encode one
 * stretch of plain text:
 *
 * 1. Spaces become U+2581 ("▁"), the pieces' spelling of a space; with the
 *    dummy prefix one "▁" goes first. A literal "▁" in the text is therefore
 *    the same as a space, as in SentencePiece itself.
 * 2. Each code point starts as its own symbol.
 * 3. Repeatedly join the adjacent pair whose concatenation is a piece of
 *    highest score (the leftmost on ties), until no adjacent pair is a piece.
 * 4. Each symbol is then its piece; a code point that is no piece is spelled
 *    as byte tokens `<0xAB>`, one per UTF-8 byte ("byte fallback").
 *
 * Step 3 is merge-pairs.ts with priority -score. It runs on the whole
 * stretch of text, as SentencePiece has no words. But when no piece holds a
 * "▁" right after another character (true of the Llama and Mistral vocabs), no
 * merge can join across the start of a run of "▁": the text then splits there
 * into chunks ("▁▁word") that merge independently, with the same result,
 * and each chunk's ids are cached like BPE's words.
 */
import { mergePairs } from './merge-pairs.ts';
import { WordCache } from './word-cache.ts';
import { byteTokenText, type Vocab } from './vocab.ts';
import { encodeUtf8 } from './utf8.ts';

const SPACE_MARK = '\u2581';
/** A piece with "▁" after another character: it would join across a chunk boundary. */
const JOINS_ACROSS = /[^\u2581]\u2581/u;
/** Chunks: a run of "▁" (maybe empty) and the characters up to the next "▁"; or trailing "▁"s. */
const CHUNK = /\u2581*[^\u2581]+|\u2581+/gu;

export class SentencePieceEncoder {
  private readonly ids: Map<string, number>;
  private readonly scores: Float32Array;
  /** (256) the byte token of each byte value, -1 if the vocab lacks it. */
  private readonly byteIds: Int32Array;
  private readonly unk: number;
  private readonly addSpacePrefix: boolean;
  /** Whether chunks merge independently (see the file comment). */
  private readonly chunked: boolean;
  private readonly cache = new WordCache();

  constructor(vocab: Vocab, ids: Map<string, number>) {
    this.ids = ids;
    this.scores = vocab.scores;
    this.byteIds = Int32Array.from({ length: 256 }, (_, b) => ids.get(byteTokenText(b)) ?? -1);
    this.unk = vocab.unk;
    this.addSpacePrefix = vocab.addSpacePrefix;
    this.chunked = !vocab.tokens.some((t) => JOINS_ACROSS.test(t));
  }

  /** Appends the ids of `text`; `atStart` (text first, or right after a special token) adds the dummy prefix. */
  encode(text: string, atStart: boolean, out: number[]): void {
    const s = ((this.addSpacePrefix && atStart ? ' ' : '') + text).replaceAll(' ', SPACE_MARK);
    if (!this.chunked) this.encodeChunk(s, out);
    else for (const [chunk] of s.matchAll(CHUNK)) this.cache.append(chunk, (c) => this.encodeChunk(c, []), out);
  }

  /** Appends the ids of `s` (spaces already "▁") to `out`, and returns `out`. */
  private encodeChunk(s: string, out: number[]): number[] {
    // Symbols: (count) start and length (UTF-16 units) in s.
    const start: number[] = [];
    const len: number[] = [];
    for (let i = 0; i < s.length;) {
      const n = s.codePointAt(i)! > 0xffff ? 2 : 1;
      start.push(i);
      len.push(n);
      i += n;
    }
    const count = start.length;
    // Highest score first: priority = -score (mergePairs takes the lowest).
    const next = mergePairs(
      count,
      (left, right) => {
        const id = this.ids.get(s.substr(start[left], len[left] + len[right]));
        return id === undefined ? undefined : -this.scores[id];
      },
      (left, right) => {
        len[left] += len[right];
      },
    );

    for (let i = count > 0 ? 0 : -1; i >= 0; i = next[i]) {
      const piece = s.substr(start[i], len[i]);
      const id = this.ids.get(piece);
      if (id !== undefined) out.push(id);
      else for (const b of encodeUtf8(piece)) out.push(this.byteIds[b] >= 0 ? this.byteIds[b] : this.unk);
    }
    return out;
  }
}
