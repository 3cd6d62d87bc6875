/**
 * The attention half of the reference backend, one op per file in attention/:
 * the KV-cache append (spec.md §4), dense decode and prefill (spec.md §1), SparQ
 * (spec.md §2) and the baselines with the same budget k (spec.md §3).
 * Shared pieces: cache-read.ts (f32/f16 reads), group.ts (GQA head groups),
 * attend.ts (scores, weighted values), softmax.ts, select.ts (top-k, ties low).
 */
import type { BackendOps } from '@sparq/core';
import { attentionDecode } from './attention/dense-decode.ts';
import { h2oDecode } from './attention/h2o-decode.ts';
import { h2oSeed } from './attention/h2o-seed.ts';
import { kvAppend } from './attention/kv-append.ts';
import { lmInfiniteDecode } from './attention/lm-infinite-decode.ts';
import { attentionPrefill } from './attention/prefill.ts';
import { sparqDecode } from './attention/sparq.ts';
import { topkDecode } from './attention/topk-decode.ts';

/** KV-cache append, dense attention, SparQ and the baselines. */
export const attentionOps: Partial<BackendOps> = {
  kvAppend,
  attentionDecode,
  attentionPrefill,
  sparqDecode,
  topkDecode,
  h2oDecode,
  h2oSeed,
  lmInfiniteDecode,
};
