/**
 * What bench/serve.ts and bench/serve-soak.ts share: a `sparq serve` child process on 127.0.0.1
 * (port 0, its URL read from stdout), a streamed completion whose token times are recorded, and
 * their command-line options.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The value after `--name` on the command line, or `fallback`. */
export function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** What the server wrote to stderr so far. */
  stderr(): string;
  /** Resident memory of the server process in bytes (Linux /proc). */
  rss(): number;
  /** SIGINT, then resolves with the exit code once it has drained and exited. */
  stop(): Promise<number | null>;
}

/** Starts `sparq serve` with `args` (--port 0 added) and resolves once it listens. */
export function startServe(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'packages/cli/src/main.ts'), 'serve', '--port', '0', ...args],
    { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((done) => child.on('exit', done));
  return new Promise((resolveStart, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      process.stderr.write(stderr);
      resolveStart({
        url: m[1],
        child,
        stderr: () => stderr,
        rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) * 1024,
        stop: () => {
          child.kill('SIGINT');
          return exited;
        },
      });
    });
    void exited.then((code) => reject(new Error(`sparq serve exited with ${code}: ${stderr}`)));
  });
}

/** A streamed request answered with another status than 200: the status, body and Retry-After header. */
export class StatusError extends Error {
  readonly status: number;
  readonly body: string;
  readonly retryAfter: string | null;
  constructor(status: number, body: string, retryAfter: string | null) {
    super(`status ${status}: ${body}`);
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

export interface StreamTiming {
  /** ms from sending the request to the first text piece. */
  ttft: number;
  /** ms between consecutive text pieces. */
  gaps: number[];
  /** Times (ms, performance.now()) of the first and last piece. */
  first: number;
  last: number;
  tokens: number;
  finishReason: string;
}

/**
 * A streamed greedy completion of `prompt` (token ids); `abortAfter` pieces, then it leaves (for the
 * soak's intended disconnects; it then resolves with finishReason 'aborted'). With `chat`, a chat
 * completion whose one user message is the prompt's ids written as text; with `ignoreEos`, exactly
 * `maxTokens` tokens (the server's ignore_eos).
 */
export async function streamCompletion(
  url: string,
  prompt: number[],
  maxTokens: number,
  abortAfter = Infinity,
  options: { chat?: boolean; ignoreEos?: boolean } = {},
): Promise<StreamTiming> {
  const controller = new AbortController();
  const t0 = performance.now();
  const request = options.chat ? { messages: [{ role: 'user', content: prompt.join(' ') }] } : { prompt };
  const res = await fetch(`${url}/v1/${options.chat ? 'chat/completions' : 'completions'}`, {
    method: 'POST',
    signal: controller.signal,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      ...request,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
      ...(options.ignoreEos ? { ignore_eos: true } : {}),
    }),
  });
  if (res.status !== 200) throw new StatusError(res.status, await res.text(), res.headers.get('retry-after'));
  const timing: StreamTiming = { ttft: 0, gaps: [], first: 0, last: 0, tokens: 0, finishReason: '' };
  const decoder = new TextDecoder();
  let buffered = '';
  let pieces = 0;
  try {
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(bytes, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const event = buffered.slice(0, end).replace(/^data: /, '');
        buffered = buffered.slice(end + 2);
        if (event === '[DONE]') return timing;
        const data = JSON.parse(event) as {
          error?: { message: string };
          choices: { text?: string; delta?: { content?: string }; finish_reason: string | null }[];
          usage?: { completion_tokens: number };
        };
        if (data.error) throw new Error(data.error.message);
        if (data.usage) timing.tokens = data.usage.completion_tokens;
        const choice = data.choices[0];
        if (choice?.finish_reason) timing.finishReason = choice.finish_reason;
        if (!(choice?.text ?? choice?.delta?.content)) continue;
        const now = performance.now();
        if (pieces === 0) [timing.ttft, timing.first] = [now - t0, now];
        else timing.gaps.push(now - timing.last);
        timing.last = now;
        if (++pieces >= abortAfter) {
          controller.abort();
          timing.finishReason = 'aborted';
          return timing;
        }
      }
    }
  } catch (error) {
    if (timing.finishReason === 'aborted') return timing;
    throw error;
  }
  throw new Error('the stream ended without [DONE]');
}

/** The p-th percentile (0..100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
