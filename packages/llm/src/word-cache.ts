/**
 * Ids of words already encoded. Natural text repeats its words, so the
 * tokenizers merge each distinct word once. The cache starts over when full,
 * which bounds its memory on any input.
 */
const LIMIT = 1 << 16;

export class WordCache {
  private readonly ids = new Map<string, number[]>();

  /** Appends the ids of `word` to `out`, computing them with `encode` on a miss. */
  append(word: string, encode: (word: string) => number[], out: number[]): void {
    let ids = this.ids.get(word);
    if (!ids) {
      ids = encode(word);
      if (this.ids.size >= LIMIT) this.ids.clear();
      this.ids.set(word, ids);
    }
    for (const id of ids) out.push(id);
  }
}
