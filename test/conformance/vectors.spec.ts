/**
 * The spec.md §7 test vectors (../shared/vectors/sparq_public.json) through every
 * backend and both K layouts, with spec.md §7's pass rule (in vectors-file.ts, the
 * module `sparq vectors` uses), and the parser's errors on malformed files.
 */
import { FormatError } from '@sparq/core';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseVectors, runCase } from '../../packages/cli/src/vectors-file.ts';
import { forEachBackend, opIt } from '../support/backends.ts';
import { sharedFile } from '../support/shared.ts';

const file = sharedFile('vectors/sparq_public.json');
const cases = file.missing ? [] : parseVectors(readFileSync(file.path, 'utf8'), file.path);

forEachBackend('sparq_public.json', (engine) => {
  if (file.missing) {
    it.skip(`skipped: ${file.missing}`, () => {});
    return;
  }
  for (const layout of ['k-twice', 'single-k'] as const) {
    opIt(
      engine,
      'sparqDecode',
      `passes all ${cases.length} cases (${layout}): y within 1e-5 (1 + max|y|), identical i1 and i2, dense too`,
      () => {
        const failures = cases.map((c) => runCase(engine, c, layout)).filter((r) => !r.pass);
        expect(
          failures.map((r) => `${r.name}: sparq ${r.sparqError} dense ${r.denseError} i1 ${r.i1Match} i2 ${r.i2Match}`),
        ).toEqual([]);
      },
    );
  }
});

describe('parseVectors', () => {
  const good = () => ({
    format: 'sparq-oracle-vectors/v1',
    cases: [
      {
        name: 'tiny',
        S: 2,
        d: 1,
        n_kv: 1,
        g: 1,
        r: 1,
        k: 1,
        l: 0,
        reallocate: true,
        n_pad: 0,
        q: { shape: [1, 1], data: [1] },
        K: { shape: [1, 2, 1], data: [0, 1] },
        V: { shape: [1, 2, 1], data: [2, 3] },
        expected: {
          algorithm1: {
            y: { shape: [1, 1], data: [2.9] },
            i1: [[0]],
            i2: [[1]],
            alpha: { shape: [1, 1], data: [0.7] },
          },
          dense: { y: { shape: [1, 1], data: [2.6] } },
        },
      },
    ],
  });

  it('reads a well-formed file', () => {
    const [c] = parseVectors(JSON.stringify(good()));
    expect([c.name, c.S, c.nKv, c.expected.i2]).toEqual(['tiny', 2, 1, [[1]]]);
  });

  it('names the case index and field of what is malformed', () => {
    const bad = (edit: (f: ReturnType<typeof good>) => void) => {
      const f = good();
      edit(f);
      return () => parseVectors(JSON.stringify(f), 'v.json');
    };
    expect(bad((f) => (f.format = 'other'))).toThrow(FormatError);
    expect(bad((f) => ((f.cases[0] as Record<string, unknown>).S = 1.5))).toThrow(
      "v.json: case 0 (tiny): field 'S' is 1.5, expected an integer >= 1",
    );
    expect(bad((f) => (f.cases[0].K.data = [0]))).toThrow("case 0 (tiny): field 'K.data' has 1 values, expected 2");
    expect(bad((f) => (f.cases[0].q.shape = [2, 1]))).toThrow("field 'q.shape' is [2,1], expected [1,1]");
    expect(bad((f) => (f.cases[0].expected.algorithm1.i2 = [[5]]))).toThrow(
      "field 'expected.algorithm1.i2[0][0]' is 5, expected an integer in [0, 1]",
    );
    expect(() => parseVectors('{', 'v.json')).toThrow('v.json: not JSON');
  });
});
