/**
 * Scratch memory of long-context attention, measured: for each S, a KV cache
 * of S positions (the Llama 3 8B shape's 8 KV heads of 128, one layer), then
 * the last prefill chunk's causal attention (512 query rows of 32 heads over
 * all S positions: the largest a chunked prefill ever runs) and SparQ and
 * dense decode steps. Reports the peak RSS above the filled cache during the
 * attention calls (the kernels' thread-local buffers persist, so each S adds
 * only its growth over the previous one), beside memory-plan.ts's estimate, so
 * "no S x S buffers" is checked against the process, not the code (an S x S
 * f32 score matrix at 64k would be 16 GiB; 512 x S rows of scores 128 MiB).
 *
 *   pnpm bench:prefill-memory [--seq 32768,65536,131072] [--kv f16] [--threads N]
 */
import { parseArgs } from 'node:util';
import { KV_DTYPES, Tensor, kvCacheBytes, selectBackend, type KVDType } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import { MODEL_SHAPES, defaultAttention, scratchBytes, shapeConfig } from '@sparq/llm';
import { randomCache, randomQuery } from '../packages/cli/src/bench/random-cache.ts';
import { rssWindow } from '../packages/cli/src/bench/memory.ts';
import { PREFILL_CHUNK } from '../packages/cli/src/bench/sparq-e2e.ts';

const { values } = parseArgs({ options: { seq: { type: 'string' }, kv: { type: 'string' }, threads: { type: 'string' } } });
const seqs = (values.seq ?? '32768,65536,131072').split(',').map(Number);
const kv = (values.kv ?? 'f16') as KVDType;
if (!KV_DTYPES.includes(kv)) throw new Error(`--kv ${kv}, expected one of ${KV_DTYPES.join(', ')}`);
const engine = await selectBackend();
const shape = MODEL_SHAPES['llama3-8b'];
const c = shapeConfig(shape, 1);
const threads = engine.info().threads;
const mib = (bytes: number | null) => (bytes === null ? '-' : (bytes / 2 ** 20).toFixed(0));

console.log(`backend ${engine.name} (${engine.info().kernel}, ${threads} threads); llama3-8b layer: ${c.nHeads} heads over ${c.nKvHeads} KV heads of ${c.headDim}; KV ${kv} k-twice; prefill chunk ${PREFILL_CHUNK} rows`);
console.log('| S | KV cache MiB (kvCacheBytes) | prefill chunk: peak RSS above the filled cache MiB | SparQ + dense decode: peak RSS above MiB | scratch estimate (memory-plan.ts, 1 layer) MiB |');
console.log('| ---: | ---: | ---: | ---: | ---: |');
// The last chunk of a prefill: its rows are the newest positions, each seeing all before it. Made first, so the windows below see scratch only.
const q = Tensor.zeros('f32', [PREFILL_CHUNK, c.nHeads, c.headDim]);
for (let i = 0; i < q.size; i++) q.data[i] = Math.sin(i);
const att = Tensor.zeros('f32', q.shape);
const { q: q1, out } = randomQuery(c.nHeads, c.headDim);
for (const S of seqs) {
  const cache = randomCache(engine, { S, heads: c.nKvHeads, headDim: c.headDim, dtype: kv, layout: 'k-twice' });
  const filled = rssWindow(); // after the cache is written: what follows is scratch
  engine.attentionPrefill(att, q, cache, 0);
  const prefillPeak = filled.peakBytes();
  const decode = rssWindow();
  engine.sparqDecode(out, q1, cache, defaultAttention('sparq', c.headDim, S));
  engine.attentionDecode(out, q1, cache);
  const decodePeak = decode.peakBytes();
  const above = (peak: number | null, base: number | null) => (peak === null || base === null ? null : peak - base);
  console.log(`| ${S} | ${mib(kvCacheBytes(cache.options))} | ${mib(above(prefillPeak, filled.startBytes))} | ${mib(above(decodePeak, decode.startBytes))} | ${mib(scratchBytes(c, S, PREFILL_CHUNK, threads))} |`);
}
