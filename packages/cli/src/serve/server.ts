/**
 * `sparq serve`'s HTTP side, on Node's http module: routes, request bodies read under a size and
 * time limit, responses whole or as server-sent events, and the faults a server meets (clients
 * that leave, slow or malformed bodies, a full queue, draining on shutdown). No request can stop
 * the server: every handler's failure becomes an error response (or ends that response).
 *
 *   POST /v1/chat/completions, /v1/completions   OpenAI's, whole or streamed (protocol.ts)
 *   GET  /v1/models                              the one model served
 *   GET  /health                                 200 {"status":"ok",...}; 503 while draining
 *   GET  /metrics                                Prometheus text
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, chunkBody, completionBody, parseRequest, type Endpoint, type Served } from './protocol.ts';
import { QueueFullError, Scheduler, type JobResult, type SchedulerOptions } from './scheduler.ts';

export interface ServeOptions extends SchedulerOptions {
  host: string;
  port: number;
  /** A request's whole life, queue included (ms); past it the request fails with 504 (or an SSE error). */
  timeoutMs: number;
  /** Time to receive a request body (ms); past it 408. */
  bodyTimeoutMs: number;
  /** Largest request body (bytes); larger gets 413. */
  maxBodyBytes: number;
}

export interface RunningServer {
  url: string;
  server: Server;
  scheduler: Scheduler;
  /**
   * Stops taking requests (503), finishes every completion request that arrived before (those still
   * sending their body included: bounded by --body-timeout), then closes every connection.
   */
  drain(): Promise<void>;
}

const ROUTES: Record<string, Endpoint> = { '/v1/chat/completions': 'chat', '/v1/completions': 'completions' };

/**
 * How long an idle kept-alive connection stays open (ms). Longer than the idle timeout of the load
 * balancers put in front of servers (commonly 60 s), so a balancer or client never reuses a
 * connection the server has just closed: that race is a reset without an answer. Node's 5 s default
 * is shorter than most clients' own keep-alive.
 */
export const KEEP_ALIVE_MS = 65_000;

/** The status line for Node's HTTP parser errors that have their own (the rest get 400). */
const CLIENT_ERROR_STATUS: Record<string, string> = {
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
};

/** Starts serving `served` (the scheduler allocates every slot's KV cache now); resolves once listening. */
export async function startServer(served: Served, options: ServeOptions): Promise<RunningServer> {
  const scheduler = new Scheduler(served.lm, options);
  const metrics = new Metrics();
  let draining = false;
  let sequence = 0;
  // Completion requests that have arrived and not ended: drain waits for them, not only for the scheduler.
  const open = new Set<ServerResponse>();
  let drained: (() => void) | null = null;

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // A bug in a handler: this request fails, the server goes on.
      sendError(
        res,
        error instanceof ApiError
          ? error
          : new ApiError(500, `internal error: ${(error as Error)?.message ?? String(error)}`),
      );
    });
  });
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  // Malformed HTTP: answer with its status when the socket can still take it (headers too large
  // 431, headers not complete within Node's headersTimeout of 60 s 408, anything else 400), then
  // close that socket; a reset one is just closed. (Node's header limit stays: with the body's 2 s,
  // a soak on the loaded machine lost 13 of its first 28 requests, most likely headers that waited
  // unread while a long step held the event loop.)
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    const code = error.code ?? 'unknown';
    metrics.clientErrors.set(code, (metrics.clientErrors.get(code) ?? 0) + 1);
    const status = CLIENT_ERROR_STATUS[code] ?? '400 Bad Request';
    if (socket.writable && code !== 'ECONNRESET')
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    else socket.destroy();
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    res.on('finish', () => metrics.request(path, res.statusCode));
    // A write to a connection that has just gone (EPIPE, reset) ends that response, nothing else.
    res.on('error', () => res.destroy());
    const endpoint = ROUTES[path];
    if (endpoint) {
      if (req.method !== 'POST')
        return sendError(res, new ApiError(405, `${req.method} ${path}: use POST`, { code: 'method_not_allowed' }));
      return complete(endpoint, req, res);
    }
    if (req.method !== 'GET')
      return sendError(res, new ApiError(405, `${req.method} ${path}: use GET`, { code: 'method_not_allowed' }));
    if (path === '/health') {
      const body = {
        status: draining ? 'draining' : 'ok',
        slots_idle: options.parallel - scheduler.busySlots,
        slots_processing: scheduler.busySlots,
        queue: scheduler.queueLength,
      };
      return sendJson(res, draining ? 503 : 200, body);
    }
    if (path === '/v1/models')
      return sendJson(res, 200, {
        object: 'list',
        data: [
          {
            id: served.name,
            object: 'model',
            created: 0,
            owned_by: 'sparq',
            meta: { context: served.context, parallel: options.parallel },
          },
        ],
      });
    if (path === '/metrics') {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' });
      return void res.end(metrics.render(scheduler, options));
    }
    sendError(
      res,
      new ApiError(
        404,
        `no route ${req.method} ${path} (routes: POST /v1/chat/completions, /v1/completions; GET /v1/models, /health, /metrics)`,
        { code: 'not_found' },
      ),
    );
  }

  async function complete(endpoint: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    if (draining) return sendError(res, new ApiError(503, 'the server is shutting down', { code: 'draining' }));
    open.add(res);
    res.on('close', () => {
      open.delete(res);
      if (open.size === 0) drained?.();
    });
    const raw = await readBody(req, res, options);
    if (raw === null) return;
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch (error) {
      return sendError(
        res,
        new ApiError(400, `the request body is not valid JSON: ${(error as Error).message}`, { code: 'invalid_json' }),
      );
    }
    const parsed = parseRequest(endpoint, body, served);
    const id = `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${process.pid.toString(36)}${(++sequence).toString(36)}`;
    let text = '';
    let ended = false;
    let firstToken = true;
    let timer: NodeJS.Timeout | undefined;
    const sse = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const end = () => {
      ended = true;
      clearTimeout(timer);
    };
    const fail = (error: ApiError) => {
      if (ended) return;
      end();
      if (res.headersSent) {
        // Mid-stream: an error event, then the end of the stream.
        sse(error.body());
        res.end();
      } else sendError(res, error);
    };
    const events = {
      onText(piece: string) {
        if (ended) return;
        if (firstToken) metrics.firstToken(performance.now() - started);
        firstToken = false;
        if (parsed.stream) sse(chunkBody(endpoint, id, parsed.model, { text: piece }, parsed.includeUsage));
        else text += piece;
      },
      onDone(result: JobResult) {
        if (ended) return;
        end();
        metrics.done(performance.now() - started);
        if (!parsed.stream) return sendJson(res, 200, completionBody(endpoint, id, parsed.model, text, result));
        sse(chunkBody(endpoint, id, parsed.model, { finish: result.finishReason }, parsed.includeUsage));
        if (parsed.includeUsage) sse(chunkBody(endpoint, id, parsed.model, { usage: result }));
        res.end('data: [DONE]\n\n');
      },
      onError(error: Error) {
        fail(new ApiError(500, `generation failed: ${error.message}`, { code: 'generation_failed' }));
      },
    };
    let job;
    try {
      job = scheduler.submit(parsed.spec, events);
    } catch (error) {
      if (!(error instanceof QueueFullError)) throw error;
      res.setHeader('Retry-After', String(metrics.retryAfterSeconds(scheduler.queueLength, options.parallel)));
      return sendError(
        res,
        new ApiError(429, `server busy: ${error.message}; retry later`, {
          type: 'rate_limit_error',
          code: 'queue_full',
        }),
      );
    }
    timer = setTimeout(() => {
      scheduler.cancel(job);
      fail(
        new ApiError(
          504,
          `the request took longer than the server's ${options.timeoutMs} ms limit (sparq serve --timeout)`,
          { type: 'timeout_error', code: 'timeout' },
        ),
      );
    }, options.timeoutMs);
    // The client left: its slot is freed now, before the next step.
    res.on('close', () => {
      if (!ended) {
        end();
        scheduler.cancel(job);
        metrics.disconnects++;
      }
    });
    if (parsed.stream) {
      res.writeHead(200, {
        'Content-Type': 'text/event-stream',
        'Cache-Control': 'no-cache',
        Connection: 'keep-alive',
      });
      if (endpoint === 'chat') sse(chunkBody(endpoint, id, parsed.model, { role: true }, parsed.includeUsage));
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    server,
    scheduler,
    async drain() {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      if (open.size > 0) await new Promise<void>((resolve) => (drained = resolve));
      await scheduler.idle();
      server.closeIdleConnections();
      // Give the last responses a moment to flush, then drop what is still open (keep-alive sockets).
      await new Promise((resolve) => setTimeout(resolve, 50));
      server.closeAllConnections();
      await closed;
    },
  };
}

/** The body as text, or null after answering 413 / 408 / nothing (the client left). */
function readBody(req: IncomingMessage, res: ServerResponse, options: ServeOptions): Promise<string | null> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > options.maxBodyBytes) {
      res.setHeader('Connection', 'close');
      sendError(
        res,
        new ApiError(
          413,
          `the request body is ${declared} bytes, the limit is ${options.maxBodyBytes} (sparq serve --max-body)`,
          { code: 'body_too_large' },
        ),
      );
      req.resume();
      return resolve(null);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (value: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(value);
    };
    const timer = setTimeout(() => {
      res.setHeader('Connection', 'close');
      sendError(
        res,
        new ApiError(
          408,
          `the request body did not arrive within ${options.bodyTimeoutMs} ms (sparq serve --body-timeout)`,
          { code: 'body_timeout' },
        ),
      );
      res.on('finish', () => req.destroy());
      finish(null);
    }, options.bodyTimeoutMs);
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > options.maxBodyBytes) {
        res.setHeader('Connection', 'close');
        sendError(
          res,
          new ApiError(
            413,
            `the request body is over the limit of ${options.maxBodyBytes} bytes (sparq serve --max-body)`,
            { code: 'body_too_large' },
          ),
        );
        res.on('finish', () => req.destroy());
        return finish(null);
      }
      chunks.push(chunk);
    });
    req.on('end', () => finish(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => finish(null));
    req.on('close', () => finish(null));
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.writableEnded) return void res.end();
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, error: ApiError): void {
  sendJson(res, error.status, error.body());
}

/** Counters and latencies for /metrics, and the Retry-After estimate. */
class Metrics {
  private readonly requests = new Map<string, number>();
  disconnects = 0;
  /** Connections Node's HTTP parser gave up on, by error code (bad HTTP, header or request timeouts, resets). */
  readonly clientErrors = new Map<string, number>();
  private completed = 0;
  private totalMs = 0;
  private firstTokens = 0;
  private firstTokenMs = 0;

  request(path: string, status: number): void {
    const known = ROUTES[path] !== undefined || ['/health', '/v1/models', '/metrics'].includes(path) ? path : 'other';
    const key = `path="${known}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  firstToken(ms: number): void {
    this.firstTokens++;
    this.firstTokenMs += ms;
  }

  done(ms: number): void {
    this.completed++;
    this.totalMs += ms;
  }

  /** Seconds until a slot is likely free: the mean request time, times the queue's rounds, within [1, 60]. */
  retryAfterSeconds(queued: number, parallel: number): number {
    const mean = this.completed ? this.totalMs / this.completed / 1000 : 1;
    return Math.min(60, Math.max(1, Math.ceil(mean * Math.ceil((queued + 1) / parallel))));
  }

  render(s: Scheduler, options: ServeOptions): string {
    const c = s.counters;
    const rate = (n: number, ms: number) => (ms > 0 ? (n / ms) * 1000 : 0);
    const lines: string[] = [];
    const metric = (name: string, type: 'counter' | 'gauge', help: string, values: [string, number][]) => {
      lines.push(`# HELP sparq_${name} ${help}`, `# TYPE sparq_${name} ${type}`);
      for (const [labels, v] of values)
        lines.push(`sparq_${name}${labels ? `{${labels}}` : ''} ${Number.isFinite(v) ? v : 0}`);
    };
    metric('requests_total', 'counter', 'HTTP requests answered, by path and status.', [...this.requests]);
    metric('client_disconnects_total', 'counter', 'Completion requests whose client left before the end.', [
      ['', this.disconnects],
    ]);
    metric(
      'http_client_errors_total',
      'counter',
      "Connections closed on an HTTP-level error (Node's code: malformed request, header or request timeout, reset).",
      [...this.clientErrors].map(([code, n]) => [`code="${code}"`, n]),
    );
    metric('prompt_tokens_total', 'counter', 'Prompt tokens forwarded (prefill).', [['', c.promptTokens]]);
    metric('prompt_cache_tokens_total', 'counter', "Prompt tokens found in a slot's cache and not forwarded again.", [
      ['', c.cachedTokens],
    ]);
    metric('generated_tokens_total', 'counter', 'Tokens sampled.', [['', c.generatedTokens]]);
    metric('steps_total', 'counter', 'Forward steps done (one pass over decode and prompt rows).', [['', c.steps]]);
    metric('decode_steps_total', 'counter', 'Forward steps with decode rows.', [['', c.decodeSteps]]);
    metric('decode_rows_total', 'counter', 'Decode rows forwarded (rows / steps = mean decode batch).', [
      ['', c.decodeRows],
    ]);
    metric('failed_steps_total', 'counter', 'Forward steps that threw (their requests failed).', [['', c.failedSteps]]);
    metric('queue_length', 'gauge', 'Requests waiting for a slot.', [['', s.queueLength]]);
    metric('queue_capacity', 'gauge', 'Requests the queue holds at most.', [['', options.queue]]);
    metric('slots_busy', 'gauge', 'Slots running a request.', [['', s.busySlots]]);
    metric('slots_total', 'gauge', 'Slots (--parallel).', [['', options.parallel]]);
    // A step's time is shared between its prompt and decode rows in proportion (SchedulerCounters).
    metric('prefill_tokens_per_second', 'gauge', 'Prompt tokens per second (their share of step time), since start.', [
      ['', rate(c.promptTokens, c.prefillMs)],
    ]);
    metric('decode_tokens_per_second', 'gauge', 'Decode rows per second (their share of step time), since start.', [
      ['', rate(c.decodeRows, c.decodeMs)],
    ]);
    metric('time_to_first_token_seconds_mean', 'gauge', 'Mean time from request to first text, since start.', [
      ['', this.firstTokens ? this.firstTokenMs / this.firstTokens / 1000 : 0],
    ]);
    metric('kv_bytes_in_use', 'gauge', 'KV cache bytes holding positions (cached prefixes included).', [
      ['', Math.round(s.kvBytesInUse)],
    ]);
    metric('kv_bytes_allocated', 'gauge', 'KV cache bytes allocated at start (slots x context).', [['', s.kvBytes]]);
    return lines.join('\n') + '\n';
  }
}
