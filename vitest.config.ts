import { defineConfig } from 'vitest/config';
import SummaryReporter from './test/support/summary-reporter.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 60_000,
    // Native code and large property runs: one worker per core.
    maxWorkers: 2,
    reporters: ['default', new SummaryReporter()],
  },
});
