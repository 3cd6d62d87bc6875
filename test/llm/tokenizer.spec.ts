/**
 * The tokenizer against run.c's encode()/decode(): hand-derived encodings for
 * tok512 (stories260K) and tokenizer.bin (Llama 2, 32000), byte fallback,
 * the empty string, BOS/EOS, round trips and safe_printf's filter.
 */
import { describe, expect, it } from 'vitest';
import { TOKEN_TYPE, Tokenizer, printable, readTokenizerFile, sentencePieceVocab } from '@sparq/llm';
import { files } from './support.ts';

const piece = (t: Tokenizer, id: number) => Buffer.from(t.pieces[id]).toString('utf8');

describe.skipIf(files.tok512.missing)(
  `tok512 (stories260K vocab)${files.tok512.missing ? ` skipped: ${files.tok512.missing}` : ''}`,
  () => {
    const t = files.tok512.missing ? null! : readTokenizerFile(files.tok512.path, 512);

    it('reads the file: 512 tokens, byte tokens at 3..258', () => {
      expect(t.vocabSize).toBe(512);
      expect(t.vocab.tokens[3]).toBe('<0x00>');
      expect(t.vocab.tokens[258]).toBe('<0xFF>');
      expect(t.tokenType(3)).toBe(TOKEN_TYPE.byte);
      expect(Array.from(t.pieces[258])).toEqual([0xff]);
    });

    it('encodes "cat" by hand: [BOS, " c", "at"]', () => {
      // Start: " " (dummy prefix) c a t. " c" scores -21, "at" -35: " c" merges first.
      // Then " c"+"a" = " ca" and " c"+"at" = " cat" are not pieces: [" c", "at"].
      expect(t.scores[t.lookup('▁c')]).toBeGreaterThan(t.scores[t.lookup('at')]);
      expect(t.lookup('▁cat')).toBe(-1);
      expect(t.encode('cat')).toEqual([1, t.lookup('▁c'), t.lookup('at')]);
      expect(t.encode('cat')).toEqual([1, 280, 294]);
    });

    it('encodes "Once upon a time" into whole-word pieces', () => {
      expect(t.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
      expect([403, 407, 261, 378].map((id) => piece(t, id))).toEqual([' Once', ' upon', ' a', ' time']);
    });

    it('falls back to bytes (id = byte + 3) for a code point not in the vocab', () => {
      // U+65E5 is E6 97 A5 in UTF-8; tok512 has no piece for it.
      expect(t.lookup('日')).toBe(-1);
      expect(t.encode('日')).toEqual([1, t.lookup('▁'), 0xe6 + 3, 0x97 + 3, 0xa5 + 3]);
      // The emoji U+1F642 (F0 9F 99 82): four byte tokens.
      expect(t.encode('🙂', { addSpecial: false })).toEqual([410, 0xf0 + 3, 0x9f + 3, 0x99 + 3, 0x82 + 3]);
    });

    it('encodes the empty string as BOS alone (no dummy prefix), or nothing', () => {
      expect(t.encode('')).toEqual([1]);
      expect(t.encode('', { addSpecial: false })).toEqual([]);
      expect(t.decode([1])).toBe('');
    });

    it('round-trips text made of vocab pieces (the leading space after BOS is stripped)', () => {
      for (const s of [
        'Once upon a time, there was a little girl named Lily.',
        'She said, "I want to play!"\nThe end.',
        'a  b   c',
        'é',
      ]) {
        expect(t.decode(t.encode(s))).toBe(s);
      }
    });

    it('decodes byte tokens to raw bytes; the printed text drops lone non-printable bytes as safe_printf does', () => {
      const ids = t.encode('x日y');
      const raw = Buffer.concat(ids.slice(1).map((id, i) => t.decodePiece(ids[i], id)));
      expect(raw.toString('utf8')).toBe('x日y');
      expect(t.decode(ids)).toBe('xy');
      expect(Buffer.from(printable(Uint8Array.of(0x0a)))).toEqual(Buffer.of(0x0a));
      expect(printable(Uint8Array.of(0x07)).length).toBe(0);
      expect(printable(Uint8Array.of(0xc3)).length).toBe(0);
    });
  },
);

describe.skipIf(files.tokenizer.missing)(
  `tokenizer.bin (Llama 2 vocab)${files.tokenizer.missing ? ` skipped: ${files.tokenizer.missing}` : ''}`,
  () => {
    const t = files.tokenizer.missing ? null! : readTokenizerFile(files.tokenizer.path, 32000);

    it('reads 32000 tokens', () => {
      expect(t.vocabSize).toBe(32000);
    });

    it('encodes the classic examples: "Hello world", "Once upon a time"', () => {
      // " Hello" and " world" are single pieces: every merge path ends there.
      expect(t.encode('Hello world')).toEqual([1, 15043, 3186]);
      expect([15043, 3186].map((id) => piece(t, id))).toEqual([' Hello', ' world']);
      expect(t.encode('Once upon a time')).toEqual([1, 9038, 2501, 263, 931]);
    });

    it('keeps the dummy prefix apart when a space follows it (" x" -> " ", " x")', () => {
      // "  " (two spaces, id 259) scores -1e9, " x" scores -662: " x" merges, then nothing does.
      expect(t.encode(' x')).toEqual([1, 29871, 921]);
    });

    it('looks CJK up whole but falls back to bytes for an emoji', () => {
      expect(t.encode('日')).toEqual([1, 29871, 30325]);
      expect(t.encode('🙂')).toEqual([1, 29871, 0xf0 + 3, 0x9f + 3, 0x99 + 3, 0x82 + 3]);
    });

    it('round-trips text', () => {
      const s = 'The quick brown fox jumps over the lazy dog. Ünïcödé 日本語!';
      expect(t.decode(t.encode(s))).toBe(s);
    });
  },
);

describe('Tokenizer on a made-up vocab', () => {
  // Pieces: 0 <unk>, 1 <s>, 2 </s>, 3..258 bytes, then merges.
  const pieces = [
    '<unk>',
    '<s>',
    '</s>',
    ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`),
    ' ',
    'a',
    'b',
    'ab',
    ' a',
    ' ab',
  ];
  const scores = Float32Array.from(pieces, (p) => ({ ab: -1, ' a': -2, ' ab': -3 })[p] ?? -10);
  const t = new Tokenizer(sentencePieceVocab(pieces, scores));
  const id = (p: string) => pieces.indexOf(p);

  it('merges the highest-scoring pair first, then continues from the result', () => {
    // " ", a, b: "ab" (-1) beats " a" (-2); then " " + "ab" = " ab" (-3).
    expect(t.encode('ab')).toEqual([1, id(' ab')]);
  });

  it('prefers the leftmost pair on equal scores', () => {
    const tie = new Tokenizer(
      sentencePieceVocab(['<unk>', '<s>', '</s>', ' ', 'x', ' x', 'xx'], Float32Array.of(0, 0, 0, -5, -5, -1, -1)),
    );
    // " ", x, x: " x" and "xx" both score -1; the leftmost (" x") merges.
    expect(tie.encode('xx')).toEqual([1, 5, 4]);
  });
});
