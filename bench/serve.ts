/**
 * `sparq serve` under load: aggregate decode tokens/s with 1, 4 and 8 parallel greedy streams,
 * time to first token and inter-token latency p50 / p99, measured by a client process against a
 * server process on 127.0.0.1:
 *   pnpm bench:serve [--model FILE] [--streams 1,4,8] [--tokens 64] [--rounds 3] [--threads 2]
 *                    [--layers 4] [--type q8_0]
 *
 * Without --model, the model is a random-weight llama written to a temporary directory: dim 2048,
 * 16 heads of 128 with 4 KV heads (GQA), FFN 5632, --layers layers, matrices in --type: a slice
 * of a Llama-3-8B-like shape whose weights (about 48 MB per layer at Q8_0) do not fit in the
 * caches, so a decode step reads them from memory, as a real model's does.
 *
 * The server runs with --parallel = the largest stream count and --ctx 512. Each round runs every
 * stream count in turn (so a noisy machine shifts all of them alike); each stream asks for
 * --tokens tokens after a 16-token prompt of its own. Aggregate decode tokens/s = tokens after
 * each stream's first / (last piece of any stream - first piece of any stream); the table gives
 * the median round, and each count's speed-up over one stream from the same rounds.
 */
import { loadBackends } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import { randomLlama, writeRandomGGUF, type GGUFFileType } from '@sparq/llm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { option, percentile, startServe, streamCompletion, type StreamTiming } from './serve-client.ts';

const STREAMS = option('streams', '1,4,8').split(',').map(Number);
const TOKENS = Number(option('tokens', '64'));
const ROUNDS = Number(option('rounds', '3'));
const THREADS = option('threads', '2');
const LAYERS = Number(option('layers', '4'));
const TYPE = option('type', 'q8_0') as GGUFFileType;
const PROMPT_TOKENS = 16;

const dir = mkdtempSync(join(tmpdir(), 'sparq-bench-serve-'));
let model = option('model', '');
let description = model;
if (!model) {
  const { available } = await loadBackends();
  const engine = available.find((e) => e.name === 'native') ?? available[0];
  const shape = { dim: 2048, hiddenDim: 5632, nLayers: LAYERS, nHeads: 16, nKvHeads: 4, seqLen: 512 };
  model = writeRandomGGUF(engine, randomLlama(shape), TYPE, join(dir, `random-${TYPE}.gguf`));
  description = `random llama: dim 2048, 16 heads of 128 (4 KV heads), FFN 5632, ${LAYERS} layers, ${TYPE.toUpperCase()}`;
}

try {
  const parallel = Math.max(...STREAMS);
  const server = await startServe(['--model', model, '--parallel', String(parallel), '--ctx', '512', '--queue', '64'], { SPARQ_THREADS: THREADS });
  const prompt = (s: number) => [1, ...Array.from({ length: PROMPT_TOKENS - 1 }, (_, i) => 3 + ((s * 31 + i * 7) % 250))];
  // Warm-up: one stream, a few tokens.
  await streamCompletion(server.url, prompt(0), 8);
  const rows = new Map<number, { rate: number; ttft: number[]; gaps: number[] }[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of STREAMS) {
      const runs: StreamTiming[] = await Promise.all(Array.from({ length: n }, (_, s) => streamCompletion(server.url, prompt(s + round * 8), TOKENS)));
      const span = Math.max(...runs.map((r) => r.last)) - Math.min(...runs.map((r) => r.first));
      const decoded = runs.reduce((sum, r) => sum + r.tokens - 1, 0);
      const list = rows.get(n) ?? [];
      list.push({ rate: (decoded / span) * 1000, ttft: runs.map((r) => r.ttft), gaps: runs.flatMap((r) => r.gaps) });
      rows.set(n, list);
      process.stderr.write(`round ${round + 1}: ${n} stream(s) ${((decoded / span) * 1000).toFixed(1)} tok/s\n`);
    }
  }
  const code = await server.stop();
  const median = (xs: number[]) => percentile(xs, 50);
  const one = median(rows.get(STREAMS[0])!.map((r) => r.rate));
  const lines = [
    `model: ${description}; server: --parallel ${parallel}, SPARQ_THREADS=${THREADS}; ${TOKENS} tokens per stream, ${PROMPT_TOKENS}-token prompts, greedy; ${ROUNDS} rounds (median)`,
    '',
    `| streams | decode tok/s (all streams) | vs ${STREAMS[0]} stream | TTFT p50 / p99 ms | inter-token p50 / p99 ms |`,
    '|---:|---:|---:|---:|---:|',
    ...STREAMS.map((n) => {
      const r = rows.get(n)!;
      const rate = median(r.map((x) => x.rate));
      const ttft = r.flatMap((x) => x.ttft);
      const gaps = r.flatMap((x) => x.gaps);
      return `| ${n} | ${rate.toFixed(1)} | ${(rate / one).toFixed(2)}x | ${percentile(ttft, 50).toFixed(0)} / ${percentile(ttft, 99).toFixed(0)} | ${percentile(gaps, 50).toFixed(1)} / ${percentile(gaps, 99).toFixed(1)} |`;
    }),
    '',
    `server exit code after SIGINT: ${code}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
