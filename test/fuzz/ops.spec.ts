/**
 * The op fuzzer (ops.ts), seeded and bounded for CI: every case on every
 * backend ends in a project error or a result, and the backends agree (same
 * error class, or outputs within AGREE, NaN and infinities in the same
 * places). The long run is `pnpm fuzz --cases N --seed S`.
 */
import { describe, expect, it } from 'vitest';
import { engines } from '../support/backends.ts';
import { fuzzOps } from './ops.ts';

/** Cases in the test suite: about 15 s on a loaded 2-core machine. */
const CASES = 8000;

describe(`op fuzzer (${CASES} cases, ${engines.map((e) => e.name).join(' + ')}, seeded)`, () => {
  it('every case a project error or a result, and the backends agree', () => {
    const r = fuzzOps(engines, CASES, 1);
    console.log(
      `op fuzzer: ${r.cases} cases: ${r.errors} project errors, ${r.results} results, ${r.unsupported} declared unsupported on a backend`,
    );
    expect(r.problems).toEqual([]);
    // The draws must reach both ends: real results and every kind of refusal.
    expect(r.results).toBeGreaterThan(CASES / 3);
    expect(r.errors).toBeGreaterThan(CASES / 10);
  }, 120_000);
});
