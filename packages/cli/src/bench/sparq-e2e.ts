/**
 * sparq's side of the end-to-end part: prefill S prompt tokens once, then
 * decode a few tokens with each attention method in turn over that same
 * context (Session.setAttention), timing each. The cache is created for
 * SparQ (K stored twice, its layout); dense decode reads the same K rows and
 * V as on the single-K layout. Each method's steps start where the previous
 * one's ended, so its context is S plus a few tokens (a few of S at most).
 */
import type { KVTypeChoice } from '@sparq/core';
import { Session, type AttentionConfig, type LanguageModel, type PrefillProgress } from '@sparq/llm';
import { rssWindow } from './memory.ts';

/** Prompt tokens per prefill forward step: bounded memory, weights read once per chunk of rows. */
export const PREFILL_CHUNK = 512;

export interface SystemTiming {
  prefillMs: number;
  /** Milliseconds per decode step, by method (same order as given). */
  decodeMs: number[];
}

export interface SparqRun extends SystemTiming {
  /** Bytes of the session's KV caches, all layers. */
  kvBytes: number;
  /** Peak RSS of the process over the run (session, prefill, decode), bytes; null where not measurable. */
  peakRssBytes: number | null;
  /** RSS just before the session was created, bytes. */
  startRssBytes: number | null;
}

/** Positions a run of `S` prompt tokens and `steps` tokens per method needs. */
export const e2ePositions = (S: number, steps: number, methods: number) => S + steps * methods;

export async function sparqEndToEnd(
  lm: LanguageModel,
  tokens: readonly number[],
  S: number,
  steps: number,
  methods: readonly AttentionConfig[],
  kv: KVTypeChoice,
  onProgress?: (progress: PrefillProgress) => void,
): Promise<SparqRun> {
  const capacity = e2ePositions(S, steps, methods.length);
  if (tokens.length < capacity)
    throw new RangeError(`sparqEndToEnd: ${tokens.length} tokens, expected at least ${capacity}`);
  const first = methods.find((m) => m.method === 'sparq') ?? methods[0];
  const window = await rssWindow();
  const session = new Session(lm.engine, lm.model, {
    capacity,
    maxPrefill: Math.min(PREFILL_CHUNK, S),
    attention: first,
    kvDType: kv,
  });
  let t0 = performance.now();
  session.prefill(tokens.slice(0, S), { onProgress });
  const prefillMs = performance.now() - t0;
  const decodeMs: number[] = [];
  let next = S;
  for (const m of methods) {
    session.setAttention(m);
    t0 = performance.now();
    for (let i = 0; i < steps; i++) session.decode(tokens[next++]);
    decodeMs.push((performance.now() - t0) / steps);
  }
  const kvBytes = session.kvBytes;
  return { prefillMs, decodeMs, kvBytes, peakRssBytes: window.peakBytes(), startRssBytes: window.startBytes };
}
