/**
 * Scratch memory of long-context attention, measured: for each S, a KV cache
 * of S positions (the Llama 3 8B shape's 8 KV heads of 128, one layer), then
 * the last prefill chunk's causal attention (512 query rows of 32 heads over
 * all S positions: the largest a chunked prefill ever runs) and SparQ and
 * dense decode steps, each S in a fresh process. Reports the RSS the cache
 * added and the peak RSS above it during the attention calls, beside
 * memory-plan.ts's bound, so
 * "no S x S buffers" is checked against the process, not the code (an S x S
 * f32 score matrix at 64k would be 16 GiB; 512 x S rows of scores 128 MiB).
 *
 *   pnpm bench:prefill-memory [--seq 32768,65536,131072] [--kv f16]   (SPARQ_THREADS sets the threads)
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { KV_DTYPES, Tensor, kvCacheBytes, selectBackend, type KVDType } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import { MODEL_SHAPES, defaultAttention, scratchBytes, shapeConfig } from '@sparq/llm';
import { randomCache, randomQuery } from '../packages/cli/src/bench/random-cache.ts';
import { rssWindow } from '../packages/cli/src/bench/memory.ts';
import { PREFILL_CHUNK } from '../packages/cli/src/bench/sparq-e2e.ts';

const { values } = parseArgs({ options: { seq: { type: 'string' }, kv: { type: 'string' }, one: { type: 'string' } } });
const kv = (values.kv ?? 'f16') as KVDType;
if (!KV_DTYPES.includes(kv)) throw new Error(`--kv ${kv}, expected one of ${KV_DTYPES.join(', ')}`);
const c = shapeConfig(MODEL_SHAPES['llama3-8b'], 1);
const mib = (bytes: number | null) => (bytes === null ? '-' : (bytes / 2 ** 20).toFixed(0));

if (values.one) {
  // The measured process (a fresh one per S, so no buffer of another S is reused): RSS at each stage, as JSON.
  const S = Number(values.one);
  const engine = await selectBackend();
  // The last chunk of a prefill: its rows are the newest positions, each seeing all before it.
  const q = Tensor.zeros('f32', [PREFILL_CHUNK, c.nHeads, c.headDim]);
  for (let i = 0; i < q.size; i++) q.data[i] = Math.sin(i);
  const att = Tensor.zeros('f32', q.shape);
  const { q: q1, out } = randomQuery(c.nHeads, c.headDim);
  const start = await rssWindow();
  const cache = randomCache(engine, { S, heads: c.nKvHeads, headDim: c.headDim, dtype: kv, layout: 'k-twice' });
  const filled = await rssWindow(); // what follows is scratch
  engine.attentionPrefill(att, q, cache, 0);
  engine.sparqDecode(out, q1, cache, defaultAttention('sparq', c.headDim, S));
  engine.attentionDecode(out, q1, cache);
  process.stdout.write(
    JSON.stringify({
      S,
      threads: engine.info().threads,
      kernel: engine.info().kernel,
      kvBytes: kvCacheBytes(cache.options),
      start: start.startBytes,
      filled: filled.startBytes,
      peak: filled.peakBytes(),
    }),
  );
} else {
  const seqs = (values.seq ?? '32768,65536,131072').split(',').map(Number);
  console.log(
    `llama3-8b layer: ${c.nHeads} heads over ${c.nKvHeads} KV heads of ${c.headDim}; KV ${kv} k-twice; prefill chunk ${PREFILL_CHUNK} rows; one fresh process per S`,
  );
  console.log(
    '| S | KV cache MiB (kvCacheBytes) | RSS added by the cache MiB | peak RSS above the filled cache (prefill chunk, SparQ and dense decode) MiB | scratch bound (memory-plan.ts, 1 layer) MiB |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: |');
  for (const S of seqs) {
    const child = spawnSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), '--one', String(S), '--kv', kv],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    if (child.status !== 0) throw new Error(`S = ${S}: child failed with status ${child.status}`);
    const r = JSON.parse(child.stdout);
    const above = (a: number | null, b: number | null) => (a === null || b === null ? null : a - b);
    console.log(
      `| ${S} | ${mib(r.kvBytes)} | ${mib(above(r.filled, r.start))} | ${mib(above(r.peak, r.filled))} | ${mib(scratchBytes(c, S, PREFILL_CHUNK, r.threads))} |`,
    );
  }
}
