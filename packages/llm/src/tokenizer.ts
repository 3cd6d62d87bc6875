/**
 * SentencePiece-style BPE with byte fallback, behaving as llama2.c's run.c
 * encode() and decode() do:
 *
 *   encode: optional BOS; a dummy-prefix space token when the text is not
 *           empty; each UTF-8 code point looked up whole, else its bytes as
 *           byte tokens (byteBase + byte, run.c's id + 3); then repeatedly
 *           merge the adjacent pair whose concatenation is the vocab entry of
 *           highest score (leftmost on ties) until no pair merges.
 *   decode: after BOS a leading space is stripped; `<0xAB>` pieces are the raw
 *           byte 0xAB; `printable()` drops a single byte that is neither
 *           printable ASCII nor whitespace (run.c's safe_printf).
 *
 * Pieces are byte strings (C strings in run.c: cut at the first NUL). Lookups
 * use latin1 strings as keys, one char per byte, so any byte sequence is a key.
 * Where a piece occurs twice the lowest id wins (run.c's bsearch is unspecified).
 */

const EMPTY = new Uint8Array(0);
/** run.c's best_score start: pairs scoring at or below -1e10 never merge. */
const NO_SCORE = Math.fround(-1e10);

export interface TokenizerOptions {
  bosId?: number;
  eosId?: number;
}

export class Tokenizer {
  /** (vocabSize) raw bytes of each piece. */
  readonly pieces: Uint8Array[];
  /** (vocabSize) merge priority of each piece. */
  readonly scores: Float32Array;
  readonly bosId: number;
  readonly eosId: number;
  /** Id of the byte token `<0x00>`; bytes b map to byteBase + b (run.c assumes 3). */
  readonly byteBase: number;
  /** Longest piece in bytes. */
  readonly maxTokenLength: number;
  /** (vocabSize) latin1 key of each piece. */
  private readonly keys: string[];
  /** latin1 key -> lowest id with that piece. */
  private readonly ids = new Map<string, number>();
  /** (vocabSize) the raw byte of `<0xAB>` pieces, -1 for other pieces. */
  private readonly byteOf: Int16Array;

  constructor(pieces: Uint8Array[], scores: Float32Array, options: TokenizerOptions = {}) {
    this.pieces = pieces.map((p) => {
      const nul = p.indexOf(0);
      return nul < 0 ? p : p.subarray(0, nul);
    });
    this.scores = scores;
    this.bosId = options.bosId ?? 1;
    this.eosId = options.eosId ?? 2;
    this.keys = this.pieces.map((p) => latin1(p));
    this.byteOf = new Int16Array(pieces.length).fill(-1);
    let longest = 0;
    this.keys.forEach((key, id) => {
      if (!this.ids.has(key)) this.ids.set(key, id);
      // run.c reads `<0x%02hhX>`: up to two hex digits after "<0x".
      const m = /^<0x([0-9A-Fa-f]{1,2})/.exec(key);
      if (m) this.byteOf[id] = parseInt(m[1], 16);
      longest = Math.max(longest, key.length);
    });
    this.maxTokenLength = longest;
    this.byteBase = this.ids.get('<0x00>') ?? 3;
  }

  get vocabSize(): number {
    return this.pieces.length;
  }

  /** Id of the piece with exactly these bytes (latin1 key), or -1. */
  lookup(key: string): number {
    return this.ids.get(key) ?? -1;
  }

  /** Token ids of `text`: [BOS] [dummy prefix] pieces [EOS]. */
  encode(text: string, bos = true, eos = false): number[] {
    const tokens: number[] = [];
    if (bos) tokens.push(this.bosId);
    const bytes = Buffer.from(text, 'utf8');
    if (bytes.length > 0) {
      // The dummy prefix: sentencepiece adds a space before the text.
      const space = this.lookup(' ');
      tokens.push(space >= 0 ? space : this.byteBase + 0x20);
    }
    // Code points: a lead byte and up to 3 continuation bytes, looked up whole.
    let start = 0;
    for (let i = 0; i < bytes.length; i++) {
      if ((bytes[i] & 0xc0) !== 0x80) start = i;
      const next = i + 1 < bytes.length ? bytes[i + 1] : 0;
      if ((next & 0xc0) === 0x80 && i + 1 - start < 4) continue;
      const id = this.lookup(bytes.toString('latin1', start, i + 1));
      if (id >= 0) tokens.push(id);
      // Byte fallback: one token per byte of the unknown code point.
      else for (let j = start; j <= i; j++) tokens.push(this.byteBase + bytes[j]);
      start = i + 1;
    }
    this.merge(tokens);
    if (eos) tokens.push(this.eosId);
    return tokens;
  }

  /** Greedy BPE in place: merge the best-scoring adjacent pair until none is in the vocab. */
  private merge(tokens: number[]): void {
    for (;;) {
      let bestScore = NO_SCORE;
      let bestId = -1;
      let bestAt = -1;
      // Scan every adjacent pair; strict > keeps the leftmost of equal scores.
      for (let i = 0; i + 1 < tokens.length; i++) {
        const id = this.lookup(this.keys[tokens[i]] + this.keys[tokens[i + 1]]);
        if (id >= 0 && this.scores[id] > bestScore) {
          bestScore = this.scores[id];
          bestId = id;
          bestAt = i;
        }
      }
      if (bestAt < 0) return;
      tokens.splice(bestAt, 2, bestId);
    }
  }

  /** The bytes run.c's decode(prev, token) gives: no leading space after BOS, byte pieces as raw bytes. */
  decodePiece(prev: number, token: number): Uint8Array {
    if (token < 0 || token >= this.pieces.length) return EMPTY;
    const b = this.byteOf[token];
    if (b >= 0) return BYTE_PIECES[b];
    const piece = this.pieces[token];
    return prev === this.bosId && piece[0] === 0x20 ? piece.subarray(1) : piece;
  }

  /** What the text of `tokens` prints as: each token decoded after its predecessor, as run.c's loop does. */
  decodeBytes(tokens: readonly number[]): Uint8Array {
    const parts: Uint8Array[] = [];
    for (let i = 1; i < tokens.length; i++) parts.push(printable(this.decodePiece(tokens[i - 1], tokens[i])));
    return Buffer.concat(parts);
  }

  /** decodeBytes as a string (invalid UTF-8 becomes U+FFFD). */
  decode(tokens: readonly number[]): string {
    return Buffer.from(this.decodeBytes(tokens)).toString('utf8');
  }
}

/** run.c's safe_printf: a lone byte is printed only if printable ASCII or whitespace. */
export function printable(piece: Uint8Array): Uint8Array {
  if (piece.length !== 1) return piece;
  const b = piece[0];
  const ok = (b >= 0x20 && b <= 0x7e) || (b >= 0x09 && b <= 0x0d);
  return ok ? piece : EMPTY;
}

/** One-byte pieces for the 256 byte tokens. */
const BYTE_PIECES = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));

function latin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}
