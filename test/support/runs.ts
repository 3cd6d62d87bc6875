/**
 * How many cases a fast-check property draws. SPARQ_FC_SCALE multiplies every count in the
 * native and conformance suites: scripts/test-avx2-only.sh sets it below 1, because under qemu
 * those suites are there to find an instruction wider than the CPU, code runs 10-30x slower, and
 * the full counts already run on the real CPU (where the AVX2 path is forced as well).
 */
const SCALE = scaleFromEnv(process.env.SPARQ_FC_SCALE);

function scaleFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const scale = Number(value);
  if (!(scale > 0 && scale <= 1)) throw new Error(`SPARQ_FC_SCALE must be in (0, 1], got '${value}'`);
  return scale;
}

/** `n` cases, scaled by SPARQ_FC_SCALE; at least 2, so a property still draws more than its first case. */
export function fcRuns(n: number): number {
  return Math.max(Math.min(n, 2), Math.round(n * SCALE));
}
