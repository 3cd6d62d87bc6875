/**
 * The merge loop SentencePiece and byte-level BPE share: symbols in a row,
 * and repeatedly the adjacent pair of best priority (lowest number, the
 * leftmost on ties) joins into one symbol, until no adjacent pair may join.
 *
 * Rescanning every pair after each join costs O(n) per join, O(n^2) per
 * text. Here the candidate pairs wait in a heap instead (O(log n) per join):
 * a join adds the two new pairs it creates, and the pairs it destroyed stay
 * in the heap but are recognised as stale when popped (a symbol in them was
 * joined away, or grew, since the pair was made).
 */
import { Heap } from './heap.ts';

/**
 * Runs the merges over `count` symbols; returns `next`, the linked row of
 * the surviving symbols (start at 0 when count > 0, -1 ends).
 * - priority(left, right): the pair's priority, or undefined if it may not join;
 * - join(left, right): the caller's symbol `left` absorbs `right`.
 */
export function mergePairs(
  count: number,
  priority: (left: number, right: number) => number | undefined,
  join: (left: number, right: number) => void,
): Int32Array {
  const next = Int32Array.from({ length: count }, (_, i) => (i + 1 < count ? i + 1 : -1));
  const prev = Int32Array.from({ length: count }, (_, i) => i - 1);
  // Bumped each time a symbol grows (or is joined away): a pair remembers both versions.
  const version = new Int32Array(count);
  const alive = new Uint8Array(count).fill(1);

  // Candidate pairs (parallel arrays, indexed by the heap's items).
  const pairLeft: number[] = [];
  const pairRight: number[] = [];
  const pairPriority: number[] = [];
  const pairVersions: number[] = [];
  const heap = new Heap(
    (a, b) => pairPriority[a] < pairPriority[b] || (pairPriority[a] === pairPriority[b] && pairLeft[a] < pairLeft[b]),
  );
  const consider = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const p = priority(left, right);
    if (p === undefined) return;
    pairLeft.push(left);
    pairRight.push(right);
    pairPriority.push(p);
    pairVersions.push(version[left], version[right]);
    heap.push(pairLeft.length - 1);
  };
  for (let i = 0; i + 1 < count; i++) consider(i, i + 1);

  while (heap.size > 0) {
    const p = heap.pop();
    const left = pairLeft[p];
    const right = pairRight[p];
    const fresh =
      alive[left] &&
      alive[right] &&
      version[left] === pairVersions[2 * p] &&
      version[right] === pairVersions[2 * p + 1];
    if (!fresh) continue;
    join(left, right);
    version[left]++;
    alive[right] = 0;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    consider(prev[left], left);
    consider(left, next[left]);
  }
  return next;
}
