/**
 * A tokenizer's vocabulary as GGUF describes it (tokenizer.ggml.*), the one
 * form every loader produces (GGUF, llama2.c's tokenizer file, tests building
 * one from a Hugging Face tokenizer.json) and the GGUF writer consumes.
 *
 * Two models, as llama.cpp names them:
 * - `llama`: SentencePiece BPE. Tokens are pieces with U+2581 ("▁") for a
 *   space; merges are chosen by each piece's score; a code point with no
 *   piece falls back to byte tokens `<0xAB>`.
 * - `gpt2`: byte-level BPE. Text is first cut into words by a pre-tokenizer
 *   (`pre`), each word's UTF-8 bytes are spelled in GPT-2's 256-character
 *   alphabet, and `merges` ("left right", highest priority first) join them.
 */

/** tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

export interface Vocab {
  /** tokenizer.ggml.model. */
  model: 'llama' | 'gpt2';
  /** tokenizer.ggml.pre: gpt2's pre-tokenizer ('llama-bpe', 'qwen2', 'smollm', 'gpt-2'); '' for llama. */
  pre: string;
  /** (n) each token's text as GGUF stores it. */
  tokens: string[];
  /** (n) TOKEN_TYPE of each token. */
  types: Int32Array;
  /** (n) SentencePiece merge priority of each piece (llama; zeros for gpt2). */
  scores: Float32Array;
  /** gpt2's merges, "left right", rank = index (empty for llama). */
  merges: string[];
  /** Special token ids, -1 when the vocab has none. */
  bos: number;
  eos: number;
  /** End of turn (`<|eot_id|>`, `<|im_end|>`) and end of message (`<|eom_id|>`). */
  eot: number;
  eom: number;
  unk: number;
  pad: number;
  /** Whether encoding with addSpecial puts BOS first / EOS last. */
  addBos: boolean;
  addEos: boolean;
  /** SentencePiece's dummy prefix: a space before text at the start and after each special token. */
  addSpacePrefix: boolean;
}

/** llama.cpp's defaults for what a GGUF file leaves out. */
export function vocabDefaults(
  model: Vocab['model'],
): Omit<Vocab, 'model' | 'pre' | 'tokens' | 'types' | 'scores' | 'merges'> {
  return model === 'llama'
    ? { bos: 1, eos: 2, eot: -1, eom: -1, unk: 0, pad: -1, addBos: true, addEos: false, addSpacePrefix: true }
    : { bos: -1, eos: -1, eot: -1, eom: -1, unk: -1, pad: -1, addBos: false, addEos: false, addSpacePrefix: false };
}

/** The GGUF spelling of a byte token: `<0x0A>`. */
export function byteTokenText(b: number): string {
  return `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
}

/**
 * A SentencePiece vocab from raw pieces (llama2.c's tokenizer file: ' ' for a
 * space, no token types): types as llama.cpp's converter assigns them, id 0
 * unknown, BOS 1 and EOS 2 control, `<0xAB>` byte, the rest normal.
 */
export function sentencePieceVocab(pieces: readonly string[], scores: Float32Array): Vocab {
  const defaults = vocabDefaults('llama');
  const tokens = pieces.map((p) => p.replaceAll(' ', '\u2581'));
  const types = Int32Array.from(tokens, (s, id) =>
    id === defaults.unk
      ? TOKEN_TYPE.unknown
      : id === defaults.bos || id === defaults.eos
        ? TOKEN_TYPE.control
        : /^<0x[0-9A-F]{2}>$/.test(s)
          ? TOKEN_TYPE.byte
          : TOKEN_TYPE.normal,
  );
  return { model: 'llama', pre: '', tokens, types, scores, merges: [], ...defaults };
}
