import { defineConfig } from 'vitest/config';
import SummaryReporter from './test/support/summary-reporter.ts';

// Tests run the workspace packages from their TypeScript sources: the
// `sparq-source` export condition points at src/ (published consumers get dist/).
// NODE_OPTIONS carries it to processes the tests spawn and to worker threads
// (pnpm sets it too, from .npmrc; this covers vitest started another way).
const SOURCE_CONDITION = 'sparq-source';
// Vite's defaults for server code, after ours.
const conditions = [SOURCE_CONDITION, 'module', 'node', 'development|production'];
process.env.NODE_OPTIONS = [process.env.NODE_OPTIONS, `--conditions=${SOURCE_CONDITION}`].filter(Boolean).join(' ');

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: [SOURCE_CONDITION] } },
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 60_000,
    // Native code and large property runs: one worker per core.
    maxWorkers: 2,
    reporters: ['default', new SummaryReporter()],
  },
});
