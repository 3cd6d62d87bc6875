/**
 * Ends the run with one plain line, `N passed, N failed, N skipped`, after
 * vitest's own summary: the form CI reads to count tests. Skipped tests
 * (unavailable backends, absent ops) are counted as skipped, never as passed.
 * A file that failed without a failing test (an import error, a failing
 * beforeAll hook that skipped its tests) counts as one failure, and so does
 * each unhandled error, so the line never says 0 failed when vitest fails.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') failedHere++;
        else counts.skipped++;
      }
      counts.failed += failedHere === 0 && module.state() === 'failed' ? 1 : failedHere;
    }
    counts.failed += unhandledErrors.length;
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
