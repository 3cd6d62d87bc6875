/**
 * A text session's state in a file, to pick a conversation up later or elsewhere (a long system
 * prompt prefilled once): the tokens in the cache, the pending token and the last logits, and every
 * layer's keys, values and running V sums. A session loads it when it has the same model shape and
 * KV element type and room for it; the layout may differ (K transposed is rebuilt from the rows).
 *
 * File layout, little-endian:
 *   "SPARQKV1"                     8 bytes
 *   header length                  u32, then the header as JSON (StateHeader), padded to 8 bytes
 *   per layer, per KV head:        K rows [0, nPast) (nPast, head_dim), V rows likewise (f16 or f32),
 *                                  vSum (head_dim) f64
 *   logits                         (vocab_size) f32
 */
import { SparqError, SparqRangeError } from '@sparq/core';
import { readFileSync, writeFileSync } from 'node:fs';
import type { TextSession } from './text-session.ts';

const MAGIC = 'SPARQKV1';

/** What the JSON header says; the shape fields must match the session that loads the file. */
interface StateHeader {
  shape: { nLayers: number; nKvHeads: number; headDim: number; vocabSize: number; dtype: string };
  nPast: number;
  nPad: number;
  tokens: number[];
  pending: number | null;
}

/** Writes `session`'s state to `path`. */
export function saveSessionState(session: TextSession, path: string): void {
  const f = session.forward;
  if (f.h2o[0] !== null) throw new SparqError('saveSessionState: an h2o session keeps eviction state this file does not hold');
  const { tokens, pending, logits } = session.snapshot();
  const cache0 = f.caches[0];
  const c = f.model.config;
  const header: StateHeader = { shape: shapeOf(session), nPast: cache0.nPast[0], nPad: cache0.nPad[0], tokens, pending };
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const headerBytes = align8(8 + 4 + json.length);
  const elementBytes = cache0.dtype === 'f16' ? 2 : 4;
  const perHead = 2 * header.nPast * c.headDim * elementBytes + 8 * c.headDim;
  const out = Buffer.alloc(headerBytes + c.nLayers * c.nKvHeads * perHead + 4 * c.vocabSize);
  out.write(MAGIC, 0, 'latin1');
  out.writeUInt32LE(json.length, 8);
  json.copy(out, 12);
  let at = headerBytes;
  const put = (view: ArrayBufferView) => {
    out.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), at);
    at += view.byteLength;
  };
  for (const cache of f.caches) {
    for (let h = 0; h < c.nKvHeads; h++) {
      // The rows of one head are contiguous: (capacity, head_dim) from position 0.
      const from = cache.rowOffset(0, h, 0);
      const to = cache.rowOffset(0, h, header.nPast);
      put(cache.k.subarray(from, to));
      put(cache.v.subarray(from, to));
      put(cache.vSum.subarray(h * c.headDim, (h + 1) * c.headDim));
    }
  }
  put(logits);
  writeFileSync(path, out);
}

/** Replaces `session`'s state with the one saved in `path`; the session is unchanged if the file does not fit. */
export function loadSessionState(session: TextSession, path: string): void {
  const f = session.forward;
  if (f.h2o[0] !== null) throw new SparqError('loadSessionState: an h2o session keeps eviction state this file does not hold');
  const bytes = readFileSync(path);
  if (bytes.length < 12 || bytes.toString('latin1', 0, 8) !== MAGIC) throw new SparqRangeError(`loadSessionState: ${path} is not a session state file (no ${MAGIC} magic)`);
  const length = bytes.readUInt32LE(8);
  const header = JSON.parse(bytes.toString('utf8', 12, 12 + length)) as StateHeader;
  const want = shapeOf(session);
  if (JSON.stringify(header.shape) !== JSON.stringify(want)) throw new SparqRangeError(`loadSessionState: ${path} holds a state of shape ${JSON.stringify(header.shape)}, this session has ${JSON.stringify(want)}`);
  const capacity = f.caches[0].capacity;
  if (header.nPast > capacity) throw new SparqRangeError(`loadSessionState: ${path} holds ${header.nPast} positions, this session's context is ${capacity}`);
  const c = f.model.config;
  const elementBytes = want.dtype === 'f16' ? 2 : 4;
  const n = header.nPast;
  const expected = align8(12 + length) + c.nLayers * c.nKvHeads * (2 * n * c.headDim * elementBytes + 8 * c.headDim) + 4 * c.vocabSize;
  if (bytes.length !== expected) throw new SparqRangeError(`loadSessionState: ${path} is ${bytes.length} bytes, its header implies ${expected}`);
  // Each run copied out on its own (Buffer.slice of an ArrayBuffer), so typed arrays of any element size fit.
  let at = align8(12 + length);
  const take = (count: number, size: number): ArrayBuffer => {
    const from = bytes.byteOffset + at;
    at += count * size;
    return bytes.buffer.slice(from, from + count * size) as ArrayBuffer;
  };
  const count = n * c.headDim;
  const rows = (): Float32Array | Uint16Array => (want.dtype === 'f16' ? new Uint16Array(take(count, 2)) : new Float32Array(take(count, 4)));
  session.reset();
  for (const cache of f.caches) {
    cache.reset(0, header.nPad);
    for (let h = 0; h < c.nKvHeads; h++) {
      const from = cache.rowOffset(0, h, 0);
      const k = rows();
      cache.k.set(k, from);
      cache.v.set(rows(), from);
      cache.vSum.set(new Float64Array(take(c.headDim, 8)), h * c.headDim);
      // K transposed, when the layout keeps it: component i of every position, contiguous.
      if (cache.kT) for (let i = 0; i < c.headDim; i++) for (let pos = 0; pos < n; pos++) cache.kT[cache.columnOffset(0, h, i) + pos] = k[pos * c.headDim + i];
    }
    cache.nPast[0] = n;
  }
  f.pos = n;
  session.adopt(header.tokens, header.pending, new Float32Array(take(c.vocabSize, 4)));
}

function shapeOf(session: TextSession): StateHeader['shape'] {
  const c = session.forward.model.config;
  return { nLayers: c.nLayers, nKvHeads: c.nKvHeads, headDim: c.headDim, vocabSize: c.vocabSize, dtype: session.forward.caches[0].dtype };
}

function align8(n: number): number {
  return Math.ceil(n / 8) * 8;
}
