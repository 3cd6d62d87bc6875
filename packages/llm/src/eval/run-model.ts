/**
 * What every evaluation run needs to make sessions: a model on an engine and
 * the storage choices (KV element type, INT4 product path) of the variant
 * under test.
 */
import type { Engine, ProductPath, KVTypeChoice, KTDType } from '@sparq/core';
import type { AttentionConfig } from '../attention-method.ts';
import { Session } from '../forward.ts';
import type { Model } from '../weights.ts';

export interface EvalModel {
  engine: Engine;
  model: Model;
  kvDType: KVTypeChoice;
  /** SparQ's transposed K type, default DEFAULT_SESSION_KT of kvDType's K type (forward.ts). */
  kTDType?: KTDType;
  productPath: ProductPath;
}

/** A session of `capacity` positions that can prefill them all in one call. */
export function evalSession(
  m: EvalModel,
  attention: AttentionConfig,
  capacity: number,
  engine: Engine = m.engine,
): Session {
  return new Session(engine, m.model, {
    capacity,
    maxPrefill: capacity,
    attention,
    kvDType: m.kvDType,
    kt: m.kTDType,
    productPath: m.productPath,
  });
}
