import type { BackendOps } from '@sparq/core';

/** Quantization, matvec/matmul, rmsnorm, rope, softmax, top-k. */
export const basicOps: Partial<BackendOps> = {};
