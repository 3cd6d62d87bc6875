/**
 * @sparq/core: the tensor type, the KV cache layout, the Backend interface,
 * validation, errors, and backend selection. Start at backend.ts for what an
 * op computes, validate.ts for what it accepts, engine.ts for how it is called.
 */
export * from './dtype.ts';
export * from './half.ts';
export * from './errors.ts';
export * from './tensor.ts';
export * from './int4-matrix.ts';
export * from './kv-cache.ts';
export * from './memory.ts';
export * from './attention.ts';
export * from './backend.ts';
export * from './validate.ts';
export * from './engine.ts';
export * from './registry.ts';
