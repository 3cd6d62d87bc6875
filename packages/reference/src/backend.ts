/**
 * The reference backend object: one op per file under ops/, gathered here.
 */
import type { Backend } from '@sparq/core';

export function createReferenceBackend(): Backend {
  return {
    name: 'reference',
    info: () => ({ name: 'reference', kernel: 'typescript', threads: 1 }),
  };
}
