/**
 * @sparq/pool: decode attention across worker threads on any backend.
 */
export { AttentionPool, planUnits, type AttentionPoolOptions, type PooledMethod } from './attention-pool.ts';
