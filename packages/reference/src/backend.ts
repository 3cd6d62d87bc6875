/**
 * The reference backend object: the ops of ops/ (one per file), gathered by
 * topic in basic-ops.ts (quantization, linear algebra, normalisation, top-k)
 * and attention-ops.ts (KV cache, dense, SparQ and the baselines).
 */
import type { Backend } from '@sparq/core';
import { BLOCK_CODEC_DTYPES } from './ops/quantize.ts';
import { attentionOps } from './attention-ops.ts';
import { basicOps } from './basic-ops.ts';

/** The reference backend: every op in TypeScript, the definition the native kernels are tested against. */
export function createReferenceBackend(): Backend {
  return {
    name: 'reference',
    blockDTypes: BLOCK_CODEC_DTYPES,
    info: () => ({ name: 'reference', kernel: 'typescript', threads: 1 }),
    ...basicOps,
    ...attentionOps,
  };
}
