/**
 * Tokens to text, one token at a time, safe for UTF-8 split across tokens.
 *
 * A token's bytes are what run.c's decode(prev, token) gives (no leading
 * space after BOS, `<0xAB>` pieces as the raw byte). A byte-fallback character
 * arrives as 2 to 4 one-byte tokens, so the bytes go through a streaming UTF-8
 * decoder that holds an incomplete sequence until its last byte arrives.
 * run.c's safe_printf drops every lone byte that is not printable ASCII or
 * whitespace, which loses those characters; here only lone ASCII control bytes
 * are dropped, so text that is ASCII prints exactly as run.c prints it.
 */
import { printable, type Tokenizer } from './tokenizer.ts';

/** A token's bytes as they are shown: lone ASCII control bytes dropped (run.c's filter below 0x80). */
export function visibleBytes(piece: Uint8Array): Uint8Array {
  return piece.length === 1 && piece[0] < 0x80 ? printable(piece) : piece;
}

export class TextStream {
  private readonly tokenizer: Tokenizer;
  private readonly utf8 = new TextDecoder('utf-8');
  /** The token before the next one (decodePiece strips a leading space after BOS); -1 for none. */
  private prev: number;

  constructor(tokenizer: Tokenizer, prev = -1) {
    this.tokenizer = tokenizer;
    this.prev = prev;
  }

  /** The text `token` completes: '' while a UTF-8 sequence is still incomplete. */
  push(token: number): string {
    const bytes = visibleBytes(this.tokenizer.decodePiece(this.prev, token));
    this.prev = token;
    return this.utf8.decode(bytes, { stream: true });
  }

  /** Whatever is held back; an unfinished UTF-8 sequence becomes U+FFFD. */
  flush(): string {
    return this.utf8.decode();
  }
}

/** The text of `tokens` as generation shows it: a leading BOS is not printed and strips the space after it. */
export function detokenize(tokenizer: Tokenizer, tokens: readonly number[]): string {
  const start = tokens[0] === tokenizer.bosId ? 1 : 0;
  const stream = new TextStream(tokenizer, start === 1 ? tokenizer.bosId : -1);
  let text = '';
  for (let i = start; i < tokens.length; i++) text += stream.push(tokens[i]);
  return text + stream.flush();
}
