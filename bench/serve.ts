/**
 * `sparq serve` under load: aggregate decode tokens/s with 1, 4 and 8 parallel greedy streams,
 * time to first token and inter-token latency p50 / p99, measured by a client process against a
 * server process on 127.0.0.1:
 *   pnpm bench:serve [--model FILE | --shape NAME] [--streams 1,4,8] [--tokens 64] [--rounds 3] [--threads 2]
 *                    [--layers 4] [--type q8_0] [--forward]
 *
 * --shape NAME (e.g. llama3-8b): the random-weight slice of `sparq bench --shape NAME --layers N`
 * (--layers default 2 here; Q4_K_M; the real vocabulary and embedding), reused from its shape
 * directory or written there: the model bench/serve-soak.ts runs by default.
 *
 * Without --model, the model is a random-weight llama written to a temporary directory: dim 2048,
 * 16 heads of 128 with 4 KV heads (GQA), FFN 5632, --layers layers, matrices in --type: a slice
 * of a Llama-3-8B-like shape whose weights (about 48 MB per layer at Q8_0) do not fit in the
 * caches, so a decode step reads them from memory, as a real model's does.
 *
 * The server runs with --parallel = the largest stream count and --ctx 512. Each round runs every
 * stream count in turn (so a noisy machine shifts all of them alike); each stream asks for
 * --tokens tokens after a 16-token prompt of its own (ignore_eos: every stream decodes all of
 * them). Aggregate decode tokens/s = tokens after each stream's first / (last piece of any
 * stream - first piece of any stream); the table gives the median round, and each count's
 * speed-up over one stream from the same rounds.
 *
 * --forward times the batched decode step alone, in this process, without HTTP: Session.decodeBatch
 * over n sessions (each with a 16-token prompt), n taking turns over --rounds rounds of 5 steps;
 * per n the best round's wall time per step and CPU time per step (user + system of every thread:
 * on a shared machine it shows the work a step costs; run with SPARQ_THREADS=1 SPARQ_SPIN_US=0 so
 * that idle threads do not add their spinning).
 */
import { loadBackends } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import {
  BatchState,
  RunState,
  Session,
  buildModel,
  defaultAttention,
  randomLlama,
  readModelFile,
  writeRandomGGUF,
  type GGUFFileType,
  type ShapeName,
} from '@sparq/llm';
import { DEFAULT_SHAPE_DIR, shapeModel } from '../packages/cli/src/bench/bench-model.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { option, percentile, startServe, streamCompletion, type StreamTiming } from './serve-client.ts';

const STREAMS = option('streams', '1,4,8').split(',').map(Number);
const TOKENS = Number(option('tokens', '64'));
const ROUNDS = Number(option('rounds', '3'));
const THREADS = option('threads', '2');
const SHAPE = option('shape', '') as ShapeName | '';
const LAYERS = Number(option('layers', SHAPE ? '2' : '4'));
const TYPE = option('type', 'q8_0') as GGUFFileType;
const PROMPT_TOKENS = 16;

const dir = mkdtempSync(join(tmpdir(), 'sparq-bench-serve-'));
let model = option('model', '');
let description = model;
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native') ?? available[0];
if (!model && SHAPE) {
  // The reference quantizes the file's K-quants (native quantizes Q4_0, Q4_1 and Q8_0 only).
  const reference = available.find((e) => e.name === 'reference')!;
  model = shapeModel(SHAPE, LAYERS, 'q4_k_m', DEFAULT_SHAPE_DIR, reference, (line) =>
    process.stderr.write(line + '\n'),
  ).path;
  description = `the ${SHAPE}-shaped slice of sparq bench --shape ${SHAPE} --layers ${LAYERS} (random weights, Q4_K_M, ${model})`;
} else if (!model) {
  const shape = { dim: 2048, hiddenDim: 5632, nLayers: LAYERS, nHeads: 16, nKvHeads: 4, seqLen: 512 };
  model = writeRandomGGUF(engine, randomLlama(shape), TYPE, join(dir, `random-${TYPE}.gguf`));
  description = `random llama: dim 2048, 16 heads of 128 (4 KV heads), FFN 5632, ${LAYERS} layers, ${TYPE.toUpperCase()}`;
}

/** The batched decode step alone: best round's wall and CPU ms per step, per batch size. */
function timeForward(path: string): void {
  const m = buildModel(engine, readModelFile(path, engine).loaded);
  const parallel = Math.max(...STREAMS);
  const state = new RunState(m.config, Math.max(PROMPT_TOKENS, parallel));
  const batch = new BatchState(state);
  const attention = defaultAttention('dense', m.config.headDim, 512);
  const sessions = Array.from(
    { length: parallel },
    () => new Session(engine, m, { capacity: 512, maxPrefill: PROMPT_TOKENS, attention, state }),
  );
  sessions.forEach((s, i) => s.prefill(Array.from({ length: PROMPT_TOKENS }, (_, j) => 3 + ((i * 31 + j * 7) % 250))));
  const best = new Map<number, { wall: number; cpu: number }>();
  const STEPS = 5;
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of STREAMS) {
      const group = sessions.slice(0, n);
      if (group[0].pos + STEPS > 512) group.forEach((s) => s.truncate(PROMPT_TOKENS));
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < STEPS; i++)
        Session.decodeBatch(
          group,
          group.map(() => 5),
          batch,
        );
      const wall = (performance.now() - t0) / STEPS;
      const c = process.cpuUsage(c0);
      const cpu = (c.user + c.system) / 1000 / STEPS;
      const b = best.get(n);
      best.set(n, { wall: Math.min(b?.wall ?? Infinity, wall), cpu: Math.min(b?.cpu ?? Infinity, cpu) });
    }
  }
  const one = best.get(STREAMS[0])!;
  const lines = [
    `model: ${description}; backend ${engine.name} (${engine.info().threads} threads); Session.decodeBatch, ${ROUNDS} rounds of ${STEPS} steps, best round`,
    '',
    `| batch | wall ms / step | tok/s (wall) | vs ${STREAMS[0]} | CPU ms / step | tok per CPU-s | vs ${STREAMS[0]} |`,
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...STREAMS.map((n) => {
      const b = best.get(n)!;
      return `| ${n} | ${b.wall.toFixed(1)} | ${((n / b.wall) * 1000).toFixed(1)} | ${(n / b.wall / (STREAMS[0] / one.wall)).toFixed(2)}x | ${b.cpu.toFixed(1)} | ${((n / b.cpu) * 1000).toFixed(1)} | ${(n / b.cpu / (STREAMS[0] / one.cpu)).toFixed(2)}x |`;
    }),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

try {
  if (process.argv.includes('--forward')) timeForward(model);
  else await serveBench(model);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** The streams against a server process (see the file comment). */
async function serveBench(model: string): Promise<void> {
  const parallel = Math.max(...STREAMS);
  const loadStart = loadavg()[0];
  const server = await startServe(['--model', model, '--parallel', String(parallel), '--ctx', '512', '--queue', '64'], {
    SPARQ_THREADS: THREADS,
  });
  const prompt = (s: number) => [
    1,
    ...Array.from({ length: PROMPT_TOKENS - 1 }, (_, i) => 3 + ((s * 31 + i * 7) % 250)),
  ];
  // Warm-up: one stream, a few tokens.
  await streamCompletion(server.url, prompt(0), 8);
  const rows = new Map<number, { rate: number; ttft: number[]; gaps: number[] }[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of STREAMS) {
      const runs: StreamTiming[] = await Promise.all(
        Array.from({ length: n }, (_, s) =>
          streamCompletion(server.url, prompt(s + round * 8), TOKENS, Infinity, { ignoreEos: true }),
        ),
      );
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
  // A round whose streams all stopped (end of text) at their first token has no decode span: no rate.
  const rates = (n: number) =>
    rows
      .get(n)!
      .map((r) => r.rate)
      .filter(Number.isFinite);
  const one = median(rates(STREAMS[0]));
  const lines = [
    `model: ${description}; server: --parallel ${parallel}, SPARQ_THREADS=${THREADS}; ${TOKENS} tokens per stream, ${PROMPT_TOKENS}-token prompts, greedy; ${ROUNDS} rounds (median)`,
    '',
    `| streams | decode tok/s (all streams) | vs ${STREAMS[0]} stream | TTFT p50 / p99 ms | inter-token p50 / p99 ms | samples (TTFT / gaps) |`,
    '|---:|---:|---:|---:|---:|---:|',
    ...STREAMS.map((n) => {
      const r = rows.get(n)!;
      const rate = median(rates(n));
      const ttft = r.flatMap((x) => x.ttft);
      const gaps = r.flatMap((x) => x.gaps);
      return `| ${n} | ${rate.toFixed(1)} | ${(rate / one).toFixed(2)}x | ${percentile(ttft, 50).toFixed(0)} / ${percentile(ttft, 99).toFixed(0)} | ${percentile(gaps, 50).toFixed(1)} / ${percentile(gaps, 99).toFixed(1)} | ${ttft.length} / ${gaps.length} |`;
    }),
    '',
    `load average (1 min) at start ${loadStart.toFixed(1)}, at end ${loadavg()[0].toFixed(1)} (${cpus().length} CPUs); server exit code after SIGINT: ${code}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
}
