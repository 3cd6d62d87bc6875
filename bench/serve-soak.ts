/**
 * A bounded soak of `sparq serve`: --clients clients stream greedy completions back to back for
 * --minutes minutes against a server process on 127.0.0.1 (nothing else is contacted), every
 * --disconnect-every-th request leaving after a few pieces on purpose. It then stops the server
 * with SIGINT and reports: requests, intended disconnects, failures (anything else that did not
 * end with a finish reason: the target is 0), and the server's resident memory sampled every
 * 10 s (the target: flat after warm-up).
 *   pnpm bench:serve-soak [--model FILE] [--tokenizer FILE] [--minutes 3] [--clients 8]
 *                         [--parallel 8] [--disconnect-every 5] [--tokens 96]
 * Default model: ../shared/models/stories260K.bin (small: the soak exercises the server, not the
 * kernels). Exit status 1 when a request failed or the server did not exit 0.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, option, startServe, streamCompletion } from './serve-client.ts';

const MINUTES = Number(option('minutes', '3'));
const CLIENTS = Number(option('clients', '8'));
const PARALLEL = option('parallel', '8');
const DISCONNECT_EVERY = Number(option('disconnect-every', '5'));
const TOKENS = Number(option('tokens', '96'));
const model = option('model', join(ROOT, '../shared/models/stories260K.bin'));
const tokenizer = option('tokenizer', join(ROOT, '../shared/models/tok512.bin'));
if (!existsSync(model)) throw new Error(`${model} is absent: pass --model FILE`);

const server = await startServe(['--model', model, ...(existsSync(tokenizer) ? ['--tokenizer', tokenizer] : []), '--parallel', PARALLEL, '--ctx', '256']);
const end = performance.now() + MINUTES * 60_000;
const counts = { requests: 0, completed: 0, disconnects: 0, failures: 0, tokens: 0 };
const failures: string[] = [];
const memory: { s: number; mib: number }[] = [];
const t0 = performance.now();
const sample = () => memory.push({ s: Math.round((performance.now() - t0) / 1000), mib: server.rss() / 2 ** 20 });
sample();
const sampler = setInterval(sample, 10_000);

async function client(c: number): Promise<void> {
  for (let i = 0; performance.now() < end; i++) {
    const n = ++counts.requests;
    const prompt = [1, ...Array.from({ length: 4 + ((c * 7 + i) % 24) }, (_, j) => 3 + ((c * 131 + i * 17 + j * 29) % 500))];
    const leave = DISCONNECT_EVERY > 0 && n % DISCONNECT_EVERY === 0;
    try {
      const r = await streamCompletion(server.url, prompt, TOKENS, leave ? 3 : Infinity);
      if (r.finishReason === 'aborted') counts.disconnects++;
      else if (r.finishReason === 'stop' || r.finishReason === 'length') {
        counts.completed++;
        counts.tokens += r.tokens;
      } else throw new Error(`finish reason '${r.finishReason}'`);
    } catch (error) {
      counts.failures++;
      if (failures.length < 10) failures.push((error as Error).message);
    }
  }
}

await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
clearInterval(sampler);
sample();
const code = await server.stop();
const seconds = (performance.now() - t0) / 1000;
const warm = memory.filter((m) => m.s >= 30);
const lines = [
  `soak: ${MINUTES} min, ${CLIENTS} clients, --parallel ${PARALLEL}, every ${DISCONNECT_EVERY}th request leaves after 3 pieces; model ${model}`,
  `requests ${counts.requests}: completed ${counts.completed}, intended disconnects ${counts.disconnects}, failures ${counts.failures}${failures.length ? ` (${failures.join('; ')})` : ''}`,
  `tokens ${counts.tokens} (${(counts.tokens / seconds).toFixed(1)} tok/s over the soak); server exit code ${code}`,
  `server RSS MiB by time (s): ${memory.map((m) => `${m.s}:${m.mib.toFixed(1)}`).join(' ')}`,
  warm.length >= 2 ? `after 30 s warm-up: min ${Math.min(...warm.map((m) => m.mib)).toFixed(1)} MiB, max ${Math.max(...warm.map((m) => m.mib)).toFixed(1)} MiB, last - first ${(warm[warm.length - 1].mib - warm[0].mib).toFixed(1)} MiB` : 'too short for a memory trend (samples after 30 s)',
];
process.stdout.write(lines.join('\n') + '\n');
process.exitCode = counts.failures === 0 && code === 0 ? 0 : 1;
