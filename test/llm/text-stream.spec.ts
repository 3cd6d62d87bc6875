/**
 * Text pieces from tokens: UTF-8 split across byte-fallback tokens comes out
 * whole, ASCII control bytes are dropped as run.c drops them; stop strings
 * split across pieces are found and hidden, and near-misses are released.
 */
import { StopFilter, TextStream, Tokenizer, detokenize, sentencePieceVocab } from '@sparq/llm';
import { describe, expect, it } from 'vitest';

/** <unk>, <s>, </s>, the 256 byte tokens, then a few words. */
function tokenizer(): Tokenizer {
  const words = [' hello', 'world', '!'];
  const pieces = [
    '<unk>',
    '\n<s>\n',
    '\n</s>\n',
    ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`),
    ...words,
  ];
  return new Tokenizer(sentencePieceVocab(pieces, new Float32Array(pieces.length)));
}
const byte = (b: number) => 3 + b;
const word = (i: number) => 3 + 256 + i;

describe('TextStream', () => {
  it('holds a UTF-8 sequence until its last byte token arrives', () => {
    const stream = new TextStream(tokenizer(), 1);
    // € is E2 82 AC; 😀 is F0 9F 98 80.
    const got = [0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80].map((b) => stream.push(byte(b)));
    expect(got).toEqual(['', '', '€', '', '', '', '😀']);
    expect(stream.flush()).toBe('');
  });

  it('drops lone ASCII control bytes, keeps whitespace, strips the space after BOS', () => {
    const t = tokenizer();
    expect(detokenize(t, [1, word(0), byte(0x07), byte(0x0a), word(1), word(2)])).toBe('hello\nworld!');
  });

  it('turns an unfinished sequence into U+FFFD at the end', () => {
    const stream = new TextStream(tokenizer());
    expect(stream.push(byte(0xe2))).toBe('');
    expect(stream.flush()).toBe('\ufffd');
  });
});

describe('StopFilter', () => {
  it('finds a stop string split across pieces and shows only what precedes it', () => {
    const f = new StopFilter(['THE END']);
    expect(f.push('and so TH')).toEqual({ text: 'and so ', stopped: false });
    expect(f.push('E E')).toEqual({ text: '', stopped: false });
    expect(f.push('ND here')).toEqual({ text: '', stopped: true });
  });

  it('releases held text once it cannot begin a stop string, and at the end', () => {
    const f = new StopFilter(['abc', '']);
    expect(f.push('xab')).toEqual({ text: 'x', stopped: false });
    expect(f.push('d')).toEqual({ text: 'abd', stopped: false });
    expect(f.push('a')).toEqual({ text: '', stopped: false });
    expect(f.flush()).toBe('a');
  });

  it('stops at the earliest of several stop strings', () => {
    const f = new StopFilter(['world', 'lo w']);
    expect(f.push('hello world')).toEqual({ text: 'hel', stopped: true });
  });
});
