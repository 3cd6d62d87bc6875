import type { BackendOps } from '@sparq/core';

/** KV-cache append, dense attention, SparQ and the baselines. */
export const attentionOps: Partial<BackendOps> = {};
