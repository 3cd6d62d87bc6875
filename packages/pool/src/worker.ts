// Piscina worker entry of the built package (dist/worker.js): the task runner.
// From sources, attention-pool.ts starts worker.mjs instead, which registers tsx first.
export { runTask as default } from './work.ts';
