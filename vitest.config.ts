import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 60_000,
    // Native code and large property runs: keep one worker per core.
    maxWorkers: 2,
  },
});
