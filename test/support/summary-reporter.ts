/**
 * Ends the run with the skipped tests' reasons, one line per file and reason,
 * then one plain line, `N passed, N failed, N skipped`, after vitest's own
 * summary: the form CI reads to count tests. Skipped tests (unavailable
 * backends, absent ops, absent ../shared files) are counted as skipped, never
 * as passed, and each says why. A file that failed without a failing test (an
 * import error, a failing beforeAll hook that skipped its tests) counts as one
 * failure, and so does each unhandled error, so the line never says 0 failed
 * when vitest fails.
 */
import type { Reporter, TestCase, TestModule, TestSuite } from 'vitest/node';

/** Why `test` was skipped: its `ctx.skip(note)`, else the "skipped: ..." part of its name or a suite's, else its full name (which names what it needs). */
export function skipReason(test: TestCase): string {
  const result = test.result();
  if (result.state === 'skipped' && result.note) return result.note;
  for (let node: TestCase | TestSuite | TestModule = test; node.type !== 'module'; node = node.parent) {
    const said = /(\()?skipped:?\s*(.*)$/i.exec(node.name);
    if (said) return (said[1] ? said[2].replace(/\)$/, '') : said[2]) || node.name;
  }
  return test.fullName;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const reasons = new Map<string, number>();
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') failedHere++;
        else {
          counts.skipped++;
          const line = `${module.relativeModuleId}: ${skipReason(test)}`;
          reasons.set(line, (reasons.get(line) ?? 0) + 1);
        }
      }
      counts.failed += failedHere === 0 && module.state() === 'failed' ? 1 : failedHere;
    }
    counts.failed += unhandledErrors.length;
    const skipped = [...reasons].map(([line, n]) => `  skipped ${n} in ${line}\n`).join('');
    process.stdout.write(`\n${skipped}${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
