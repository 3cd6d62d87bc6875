/**
 * A text session's state in a file, to pick a conversation up later or elsewhere (a long system
 * prompt prefilled once): the tokens in the cache, the pending token and the last logits, and every
 * layer's keys, values, K transposed (with its block scales) and running V sums, byte for byte as the
 * caches hold them. A session loads it when it has the same model shape, K and V row types and
 * K-transposed type, and room for it.
 *
 * File layout, little-endian:
 *   "SPARQKV1"                     8 bytes
 *   header length                  u32, then the header as JSON (StateHeader), padded to 8 bytes
 *   per layer, per KV head:        K rows [0, nPast), V rows likewise (as stored: f32, f16 or blocks; K's and V's own types),
 *                                  vSum (head_dim) f64, then per component the K-transposed column over
 *                                  [0, nPast) (whole 64-position blocks for integer codes) and its scales
 *   logits                         (vocab_size) f32
 */
import { KT_BLOCK, KT_INT_BITS, SparqError, SparqRangeError, isIntegerKT, kvLabel, type KVCache } from '@sparq/core';
import { readFileSync, writeFileSync } from 'node:fs';
import type { TextSession } from './text-session.ts';

const MAGIC = 'SPARQKV1';

/** What the JSON header says; the shape fields must match the session that loads the file. */
interface StateHeader {
  /** dtype: the row types as the CLI spells them ('q8_0', or 'q8_0/q4_0' for K then V). */
  shape: { nLayers: number; nKvHeads: number; headDim: number; vocabSize: number; dtype: string; kt: string | null };
  nPast: number;
  nPad: number;
  tokens: number[];
  pending: number | null;
}

/** Writes `session`'s state to `path`. */
export function saveSessionState(session: TextSession, path: string): void {
  const f = session.forward;
  if (f.h2o[0] !== null)
    throw new SparqError('saveSessionState: an h2o session keeps eviction state this file does not hold');
  const { tokens, pending, logits } = session.snapshot();
  const cache0 = f.caches[0];
  const c = f.model.config;
  const header: StateHeader = {
    shape: shapeOf(session),
    nPast: cache0.nPast[0],
    nPad: cache0.nPad[0],
    tokens,
    pending,
  };
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const headerBytes = align8(8 + 4 + json.length);
  const n = header.nPast;
  const out = Buffer.alloc(
    headerBytes + f.caches.reduce((sum, cache) => sum + stateBytes(cache, n), 0) + 4 * c.vocabSize,
  );
  out.write(MAGIC, 0, 'latin1');
  out.writeUInt32LE(json.length, 8);
  json.copy(out, 12);
  let at = headerBytes;
  const put = (view: ArrayBufferView) => {
    out.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), at);
    at += view.byteLength;
  };
  for (const cache of f.caches) for (const run of stateRuns(cache, n)) put(run);
  put(logits);
  writeFileSync(path, out);
}

/** Replaces `session`'s state with the one saved in `path`; the session is unchanged if the file does not fit. */
export function loadSessionState(session: TextSession, path: string): void {
  const f = session.forward;
  if (f.h2o[0] !== null)
    throw new SparqError('loadSessionState: an h2o session keeps eviction state this file does not hold');
  const bytes = readFileSync(path);
  if (bytes.length < 12 || bytes.toString('latin1', 0, 8) !== MAGIC)
    throw new SparqRangeError(`loadSessionState: ${path} is not a session state file (no ${MAGIC} magic)`);
  const length = bytes.readUInt32LE(8);
  const header = JSON.parse(bytes.toString('utf8', 12, 12 + length)) as StateHeader;
  const want = shapeOf(session);
  if (JSON.stringify(header.shape) !== JSON.stringify(want))
    throw new SparqRangeError(
      `loadSessionState: ${path} holds a state of shape ${JSON.stringify(header.shape)}, this session has ${JSON.stringify(want)}`,
    );
  const capacity = f.caches[0].capacity;
  if (header.nPast > capacity)
    throw new SparqRangeError(
      `loadSessionState: ${path} holds ${header.nPast} positions, this session's context is ${capacity}`,
    );
  const c = f.model.config;
  const n = header.nPast;
  const expected =
    align8(12 + length) + f.caches.reduce((sum, cache) => sum + stateBytes(cache, n), 0) + 4 * c.vocabSize;
  if (bytes.length !== expected)
    throw new SparqRangeError(`loadSessionState: ${path} is ${bytes.length} bytes, its header implies ${expected}`);
  let at = align8(12 + length);
  const take = (byteLength: number): Uint8Array => {
    const view = bytes.subarray(at, at + byteLength);
    at += byteLength;
    return view;
  };
  session.reset();
  for (const cache of f.caches) {
    cache.reset(0, header.nPad);
    // Each run's bytes go into the cache's own memory, whatever its element type.
    for (const run of stateRuns(cache, n))
      new Uint8Array(run.buffer, run.byteOffset, run.byteLength).set(take(run.byteLength));
    cache.nPast[0] = n;
  }
  f.pos = n;
  session.adopt(header.tokens, header.pending, new Float32Array(new Uint8Array(take(4 * c.vocabSize)).buffer));
}

function shapeOf(session: TextSession): StateHeader['shape'] {
  const c = session.forward.model.config;
  const cache = session.forward.caches[0];
  return {
    nLayers: c.nLayers,
    nKvHeads: c.nKvHeads,
    headDim: c.headDim,
    vocabSize: c.vocabSize,
    dtype: kvLabel(cache.options.dtype),
    kt: cache.kTDType,
  };
}

/**
 * The parts of one layer's cache that hold its first n positions (batch 1), in file order: per KV
 * head the K and V rows, the V sum, then each K-transposed column and its block scales. Integer
 * columns are taken in whole 64-position blocks, whose codes are whole bytes.
 */
function stateRuns(cache: KVCache, n: number): ArrayBufferView[] {
  const d = cache.headDim;
  const blocks = Math.ceil(n / KT_BLOCK);
  const columnUnits = isIntegerKT(cache.kTDType) ? (blocks * KT_BLOCK * KT_INT_BITS[cache.kTDType]) / 8 : n;
  const runs: ArrayBufferView[] = [];
  for (let h = 0; h < cache.nKvHeads; h++) {
    const k = cache.k.subarray(cache.kRowOffset(0, h, 0), cache.kRowOffset(0, h, n));
    const v = cache.v.subarray(cache.vRowOffset(0, h, 0), cache.vRowOffset(0, h, n));
    runs.push(k, v, cache.vSum.subarray(h * d, (h + 1) * d));
    for (let i = 0; cache.kT && i < d; i++) {
      const column = cache.columnOffset(0, h, i);
      runs.push(cache.kT.subarray(column, column + columnUnits));
      if (cache.kTScale)
        runs.push(cache.kTScale.subarray(cache.scaleOffset(0, h, i), cache.scaleOffset(0, h, i) + blocks));
    }
  }
  return runs;
}

/** Bytes stateRuns(cache, n) holds. */
function stateBytes(cache: KVCache, n: number): number {
  return stateRuns(cache, n).reduce((sum, run) => sum + run.byteLength, 0);
}

function align8(n: number): number {
  return Math.ceil(n / 8) * 8;
}
