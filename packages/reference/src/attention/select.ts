/**
 * Top-k selection with the tie rule of spec.md §2: larger key first, equal keys
 * broken by the lowest index. Used for SparQ's i1 (components) and i2
 * (positions) and for the baselines' position budgets.
 *
 * A full sort of the candidates (O(n log n)) keeps the rule obvious; faster
 * backends use a partial selection that must agree with it exactly.
 */

/**
 * The k best of `candidates` (indices), ranked by `primary[j]` then `key[j]`,
 * both larger-first, then by the lower index. `primary` is optional (SparQ's
 * isLocal flag). Returns the chosen indices in ascending index order.
 *   candidates (n) -> chosen (min(k, n))
 */
export function topIndices(
  candidates: ArrayLike<number>,
  k: number,
  key: ArrayLike<number>,
  primary?: ArrayLike<number>,
): Int32Array {
  const order = Array.from(candidates);
  // Comparator: primary descending, key descending, index ascending (the tie rule).
  order.sort((a, b) => (primary ? primary[b] - primary[a] : 0) || key[b] - key[a] || a - b);
  const chosen = Int32Array.from(order.slice(0, Math.min(k, order.length)));
  // Ascending positions: gathers then walk the cache front to back, in the same order as dense.
  return chosen.sort();
}
