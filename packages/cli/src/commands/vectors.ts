/**
 * `sparq vectors <file>`: runs every case of a SparQ test-vector file (spec.md §7)
 * through each available backend, or the one named by --backend.
 */
import { writeFileSync } from 'node:fs';
import { loadBackends, selectBackend, type Engine, type OpName } from '@sparq/core';
import { readTextFile } from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { parseFlagsAndFiles } from '../flags.ts';
import { formatResult, parseVectors, runCase } from '../vectors-file.ts';

/** The ops a case needs (with --backend, a missing one fails each case instead). */
const NEEDED_OPS: OpName[] = ['kvAppend', 'sparqDecode', 'attentionDecode'];

export const vectorsCommand: Command = {
  name: 'vectors',
  summary: 'check every backend against a SparQ test-vector file (sparq-oracle-vectors/v1)',
  usage: `sparq vectors <file> [--backend NAME] [--out FILE]

Runs every case of <file> through each available backend (or only NAME): a KV
cache with the case's keys, values and left padding, then sparqDecode (with a
trace) and attentionDecode. A case passes when, for SparQ and for dense,
max|y - expected| <= 1e-5 * (1 + max|expected|), and i1, i2 equal the expected
sets. Prints one line per case and backend, then 'N passed, N failed'; exits 1
on any failure. A backend lacking one of the ops is listed as SKIP (not counted)
unless named by --backend.

  --backend NAME  run only this backend (fails if it is unavailable)
  --out FILE      write each backend's y, i1, i2, alpha per case as {shape, data} JSON`,
  async run(argv) {
    const parsed = parseFlagsAndFiles(argv, { backend: { type: 'string' }, out: { type: 'string' } }, true);
    const { values, positionals } = parsed;
    if (positionals.length !== 1) throw new UsageError(`expected one vector file, got ${positionals.length}`);
    const file = positionals[0];
    const cases = parseVectors(readTextFile(file), file);

    let engines: Engine[];
    if (values.backend !== undefined) {
      engines = [await selectBackend({ backend: values.backend })];
    } else {
      const { available, unavailable } = await loadBackends();
      for (const { name, reason } of unavailable) process.stderr.write(`skipping backend ${name}: ${reason}\n`);
      // A backend that declares an op absent cannot run the file: skipped with the reason, never passed.
      engines = available.filter((engine) => {
        const missing = NEEDED_OPS.filter((op) => !engine.has(op));
        if (missing.length > 0)
          process.stdout.write(`SKIP  [${engine.name}]  does not implement ${missing.join(', ')}\n`);
        return missing.length === 0;
      });
    }

    let passed = 0;
    let failed = 0;
    const results: Record<string, Record<string, unknown>> = {};
    // Every backend runs every case; a throw counts as a failure of that case.
    for (const engine of engines) {
      results[engine.name] = {};
      for (const c of cases) {
        try {
          const result = runCase(engine, c);
          process.stdout.write(formatResult(result, engine.name) + '\n');
          if (result.pass) passed++;
          else failed++;
          results[engine.name][c.name] = {
            y: { shape: [c.nKv * c.g, c.d], data: Array.from(result.y) },
            i1: { shape: [c.nKv, c.r], data: result.i1.flat() },
            i2: { shape: [c.nKv, result.i2[0].length], data: result.i2.flat() },
            alpha: { shape: [c.nKv * c.g], data: Array.from(result.alpha) },
          };
        } catch (error) {
          process.stdout.write(
            `FAIL  ${c.name.padEnd(24)} [${engine.name}]  threw ${(error as Error).name}: ${(error as Error).message}\n`,
          );
          failed++;
        }
      }
    }
    process.stdout.write(`${passed} passed, ${failed} failed\n`);
    if (values.out !== undefined) {
      writeFileSync(
        values.out,
        JSON.stringify({ format: 'sparq-vectors-results/v1', source: file, backends: results }) + '\n',
      );
      process.stderr.write(`wrote ${values.out}\n`);
    }
    return failed > 0 ? 1 : 0;
  },
};
