/**
 * @sparq/reference: the readable TypeScript backend, the oracle every faster
 * backend is tested against. Importing this module registers it as backend
 * 'reference' (priority 0: always available, chosen when nothing faster is).
 */
import { registerBackend } from '@sparq/core';
import { createReferenceBackend } from './backend.ts';

export { createReferenceBackend } from './backend.ts';
export { lmInfinitePositions } from './attention/lm-infinite-decode.ts';
// The cache read as the reference's attention reads it (the playground's lessons recompute scores from it).
export { readKeyComponent, readRow } from './attention/cache-read.ts';

registerBackend('reference', createReferenceBackend, 0);
