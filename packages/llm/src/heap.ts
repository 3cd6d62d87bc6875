/**
 * A binary min-heap over numbers, ordered by a caller's comparison. The BPE
 * and SentencePiece merge loops keep their candidate pairs here, so each merge
 * costs O(log n) instead of a rescan of every pair (O(n) per merge, O(n^2)
 * per word): what makes 100k-token prompts practical.
 */
export class Heap {
  private readonly items: number[] = [];
  /** True when a should come out before b. */
  private readonly before: (a: number, b: number) => boolean;

  constructor(before: (a: number, b: number) => boolean) {
    this.before = before;
  }

  get size(): number {
    return this.items.length;
  }

  push(x: number): void {
    const a = this.items;
    a.push(x);
    // Sift up: swap with the parent while x should come out first.
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(a[i], a[parent])) break;
      [a[i], a[parent]] = [a[parent], a[i]];
      i = parent;
    }
  }

  /** Removes and returns the first item (the heap must not be empty). */
  pop(): number {
    const a = this.items;
    const top = a[0];
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      // Sift down: swap with the child that should come out first.
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < a.length && this.before(a[l], a[best])) best = l;
        if (r < a.length && this.before(a[r], a[best])) best = r;
        if (best === i) break;
        [a[i], a[best]] = [a[best], a[i]];
        i = best;
      }
    }
    return top;
  }
}
