/**
 * The evaluation text as tokens, by the protocol of issue 14 (and of the
 * independent numpy baseline in ../shared/models/README.md):
 *   - the first `chars` characters of the text (100,000 by default),
 *   - split at blank lines, each piece trimmed, empty pieces dropped,
 *   - each piece encoded on its own with BOS and the tokenizer's dummy-prefix space,
 *   - the pieces concatenated (46,731 tokens for stories260K's tok512).
 * The file marks no story boundaries (paragraphs and stories are both separated
 * by blank lines), so a "story" of the greedy task is one such piece.
 */
import type { Tokenizer } from '../tokenizer.ts';

/** Characters of the text the perplexity protocol reads. */
export const EVAL_CHARS = 100_000;

/** The blank-line-separated pieces of the first `chars` characters, trimmed, none empty. */
export function textPieces(text: string, chars = EVAL_CHARS): string[] {
  return text
    .slice(0, chars)
    .split(/\n\s*\n/)
    .map((piece) => piece.trim())
    .filter((piece) => piece.length > 0);
}

/** Each piece encoded with BOS (and the dummy prefix), concatenated. */
export function encodePieces(tokenizer: Tokenizer, pieces: readonly string[]): number[] {
  const tokens: number[] = [];
  for (const piece of pieces) for (const t of tokenizer.encode(piece, { addSpecial: true })) tokens.push(t);
  return tokens;
}

/**
 * Greedy-task prompts: the first `length` tokens (BOS included) of the first
 * `count` pieces that have at least that many tokens.
 */
export function storyPrompts(
  tokenizer: Tokenizer,
  pieces: readonly string[],
  count: number,
  length: number,
): number[][] {
  const prompts: number[][] = [];
  for (const piece of pieces) {
    if (prompts.length === count) break;
    const tokens = tokenizer.encode(piece, { addSpecial: true });
    if (tokens.length >= length) prompts.push(tokens.slice(0, length));
  }
  return prompts;
}
