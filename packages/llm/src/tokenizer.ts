/**
 * Text <-> token ids for the two GGUF tokenizer models (vocab.ts): the part
 * both share, as llama.cpp's llama_tokenize / llama_token_to_piece behave.
 *
 * encode(text, { addSpecial, parseSpecial }):
 *   1. BOS first when addSpecial and the vocab's addBos flag say so;
 *   2. the text cut at special tokens written in it (special-tokens.ts);
 *   3. each plain stretch encoded by the model: SentencePiece (spm.ts) or
 *      byte-level BPE (bpe.ts); SentencePiece's dummy-prefix space goes
 *      before the first stretch and after each special token;
 *   4. EOS last when addSpecial and addEos say so.
 *   Text is UTF-8 for the tokenizer: a lone UTF-16 surrogate (which UTF-8
 *   cannot spell) becomes U+FFFD first, as any UTF-8 conversion does.
 *
 * Decoding: tokenToPiece(id) gives a token's bytes (control tokens give
 * nothing unless asked); decodePiece / decodeBytes / decode keep llama2.c's
 * run.c behaviour (no leading space after BOS, lone non-printable bytes
 * dropped) that the byte-exact generation test holds us to.
 *
 * End of generation: isEog(id) for EOS, EOT, EOM and the tokens llama.cpp
 * recognizes by their text (`<|eot_id|>`, `<|im_end|>`, `<|endoftext|>`, ...).
 */
import { BytePairEncoder, CHAR_BYTES } from './bpe.ts';
import { SpecialTokens } from './special-tokens.ts';
import { SentencePieceEncoder } from './spm.ts';
import { TOKEN_TYPE, type Vocab } from './vocab.ts';
import { concatBytes, decodeUtf8, encodeUtf8 } from './utf8.ts';

/** How `Tokenizer.encode` treats special tokens. */
export interface EncodeOptions {
  /** Add BOS / EOS as the vocab's addBos / addEos flags say (llama.cpp's add_special). Default true. */
  addSpecial?: boolean;
  /** Turn control tokens written in the text (`<|begin_of_text|>`) into their ids (llama.cpp's parse_special). Default false. */
  parseSpecial?: boolean;
}

/**
 * Token texts that end generation besides the vocab's EOS / EOT / EOM ids:
 * llama.cpp's list (llama-vocab.cpp), including its FIM pad / repo / file
 * separator tokens. As in llama.cpp, such a token counts as a control token
 * even where the file calls it normal (e.g. "</s>" in Qwen's vocab).
 */
const EOG_TEXTS = new Set([
  '<|eot_id|>',
  '<|im_end|>',
  '<|end|>',
  '<|return|>',
  '<|call|>',
  '<|flush|>',
  '<|calls|>',
  '<end_of_turn>',
  '<|endoftext|>',
  '</s>',
  '<|eom_id|>',
  '<EOT>',
  '_<EOT>',
  '[EOT]',
  '[EOS]',
  '<|end_of_text|>',
  '<end_of_utterance>',
  '<eos>',
  '<turn|>',
  '<|tool_response>',
  '<｜end▁of▁sentence｜>',
  '[e~[',
  '<|fim_pad|>',
  '<fim-pad>',
  '<fim_pad>',
  '<PAD>',
  '[PAD]',
  '<|fim_repo|>',
  '<|repo_name|>',
  '<fim-repo>',
  '<REPO>',
  '<reponame>',
  '<|file_sep|>',
]);
/** Texts llama.cpp takes as the end-of-turn token when the file names none. */
const EOT_TEXTS = [
  '<|eot_id|>',
  '<|im_end|>',
  '<|end|>',
  '<end_of_turn>',
  '<|endoftext|>',
  '<|end_of_text|>',
  '<EOT>',
  '_<EOT>',
  '[EOT]',
  '<｜end▁of▁sentence｜>',
  '<end_of_utterance>',
];

const EMPTY = new Uint8Array(0);
/** With the u flag, a surrogate pair is one code point, so this matches only unpaired halves. */
const LONE_SURROGATE = /\p{Cs}/gu;

/** Text to token ids and back, for SentencePiece and byte-level BPE vocabularies, as llama.cpp's tokenizer does. */
export class Tokenizer {
  readonly vocab: Vocab;
  readonly bosId: number;
  readonly eosId: number;
  /** End of turn, end of message; -1 when absent. */
  readonly eotId: number;
  readonly eomId: number;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** Every id that ends generation. */
  readonly eogIds: ReadonlySet<number>;
  /** (vocabSize) the bytes each token stands for, special tokens spelled out (llama.cpp's piece with special = true). */
  readonly pieces: Uint8Array[];
  /** (vocabSize) SentencePiece scores (zeros for BPE). */
  readonly scores: Float32Array;
  /** (vocabSize) token types as used: the vocab's, with every end-of-generation token control (as llama.cpp makes them). */
  readonly types: Int32Array;
  /** Token text -> lowest id with that text. */
  private readonly ids = new Map<string, number>();
  private readonly specials: SpecialTokens;
  private readonly encoder: SentencePieceEncoder | BytePairEncoder;

  constructor(vocab: Vocab) {
    this.vocab = vocab;
    vocab.tokens.forEach((text, id) => {
      if (!this.ids.has(text)) this.ids.set(text, id);
    });
    this.bosId = vocab.bos;
    this.eosId = vocab.eos;
    this.eotId = vocab.eot >= 0 ? vocab.eot : (EOT_TEXTS.map((t) => this.lookup(t)).find((id) => id >= 0) ?? -1);
    this.eomId = vocab.eom >= 0 ? vocab.eom : this.lookup('<|eom_id|>');
    this.addBos = vocab.addBos;
    this.addEos = vocab.addEos;
    const eog = new Set([this.eosId, this.eotId, this.eomId].filter((id) => id >= 0));
    vocab.tokens.forEach((text, id) => {
      if (EOG_TEXTS.has(text)) eog.add(id);
    });
    this.eogIds = eog;
    this.types = Int32Array.from(vocab.types);
    for (const id of [...eog, this.eotId, this.eomId]) if (id >= 0) this.types[id] = TOKEN_TYPE.control;
    this.scores = vocab.scores;
    this.pieces = vocab.tokens.map((text, id) => piece(vocab, text, vocab.types[id]));
    this.specials = new SpecialTokens(vocab.tokens, this.types);
    this.encoder =
      vocab.model === 'llama' ? new SentencePieceEncoder(vocab, this.ids) : new BytePairEncoder(vocab, this.ids);
  }

  get vocabSize(): number {
    return this.vocab.tokens.length;
  }

  /** Id of the token with exactly this text (GGUF spelling: "▁" for a SentencePiece space), or -1. */
  lookup(text: string): number {
    return this.ids.get(text) ?? -1;
  }

  isEog(id: number): boolean {
    return this.eogIds.has(id);
  }

  /** Token type of `id` (TOKEN_TYPE), as used (see `types`). */
  tokenType(id: number): number {
    return this.types[id];
  }

  /** Token ids of `text` (see the file comment for the steps). */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const { addSpecial = true, parseSpecial = false } = options;
    const out: number[] = [];
    if (addSpecial && this.addBos) out.push(this.required('BOS', this.bosId));
    let afterSpecial = true;
    for (const fragment of this.specials.split(text.replace(LONE_SURROGATE, '\uFFFD'), parseSpecial)) {
      if (typeof fragment === 'number') out.push(fragment);
      else this.encoder.encode(fragment, afterSpecial, out);
      afterSpecial = typeof fragment === 'number';
    }
    if (addSpecial && this.addEos) out.push(this.required('EOS', this.eosId));
    return out;
  }

  /** The bytes token `id` stands for; control and unknown tokens give nothing unless `special`. Out of range: nothing. */
  tokenToPiece(id: number, special = false): Uint8Array {
    if (id < 0 || id >= this.pieces.length) return EMPTY;
    const type = this.types[id];
    if (type === TOKEN_TYPE.unused) return EMPTY;
    if (!special && (type === TOKEN_TYPE.control || type === TOKEN_TYPE.unknown)) return EMPTY;
    return this.pieces[id];
  }

  /** The text of `ids`: their pieces joined, then read as UTF-8 (a broken sequence becomes U+FFFD). */
  detokenize(ids: readonly number[], special = false): string {
    return decodeUtf8(concatBytes(ids.map((id) => this.tokenToPiece(id, special))));
  }

  /** The bytes run.c's decode(prev, token) gives: no leading space after BOS. */
  decodePiece(prev: number, token: number): Uint8Array {
    const p = this.tokenToPiece(token, true);
    const strip = prev === this.bosId && p[0] === 0x20 && this.tokenType(token) !== TOKEN_TYPE.byte;
    return strip ? p.subarray(1) : p;
  }

  /** What the text of `tokens` prints as: each token decoded after its predecessor, as run.c's loop does. */
  decodeBytes(tokens: readonly number[]): Uint8Array {
    const parts: Uint8Array[] = [];
    for (let i = 1; i < tokens.length; i++) parts.push(printable(this.decodePiece(tokens[i - 1], tokens[i])));
    return concatBytes(parts);
  }

  /** decodeBytes as a string (invalid UTF-8 becomes U+FFFD). */
  decode(tokens: readonly number[]): string {
    return decodeUtf8(this.decodeBytes(tokens));
  }

  private required(what: string, id: number): number {
    if (id < 0)
      throw new Error(
        `tokenizer: the vocab asks for ${what} (add_${what.toLowerCase()}_token) but has no ${what} token`,
      );
    return id;
  }
}

/**
 * The bytes a token stands for (llama.cpp's token_to_piece with special =
 * true): byte tokens their byte; normal tokens their text with the model's
 * spelling undone (SentencePiece "▁" -> space, BPE alphabet -> bytes); the
 * rest (control, user-defined, unknown) their text as written.
 */
function piece(vocab: Vocab, text: string, type: number): Uint8Array {
  if (type === TOKEN_TYPE.byte) {
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
    if (m) return Uint8Array.of(parseInt(m[1], 16));
  }
  if (type !== TOKEN_TYPE.normal) return encodeUtf8(text);
  if (vocab.model === 'llama') return encodeUtf8(text.replaceAll('\u2581', ' '));
  const bytes: number[] = [];
  for (const c of text) {
    const b = CHAR_BYTES.get(c);
    if (b !== undefined) bytes.push(b);
    else bytes.push(...encodeUtf8(c));
  }
  return Uint8Array.from(bytes);
}

/** run.c's safe_printf: a lone byte is printed only if printable ASCII or whitespace. */
export function printable(piece: Uint8Array): Uint8Array {
  if (piece.length !== 1) return piece;
  const b = piece[0];
  const ok = (b >= 0x20 && b <= 0x7e) || (b >= 0x09 && b <= 0x0d);
  return ok ? piece : EMPTY;
}
