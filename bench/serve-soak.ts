/**
 * A soak of `sparq serve`: --clients clients send requests back to back for --minutes minutes to a
 * server process on 127.0.0.1 (nothing else is contacted). Most requests are ordinary (streamed
 * and whole completions, streamed chat); the others are the faults a server meets, on purpose:
 *
 *   abort-mid       streamed, the client leaves after 3 text pieces            -> we left
 *   abort-early     the client leaves 30 ms after sending (queued or prefilling) -> we left
 *   slow-body       the body arrives in 4 pieces over ~1 s (under --body-timeout) -> 200
 *   stalled-body    half the declared body, then nothing                        -> 408
 *   malformed       not JSON                                                    -> 400 invalid_json
 *   bad-field       temperature "hot"                                           -> 400, param temperature
 *   oversize        a prompt of context + 1 tokens                              -> 400 context_length_exceeded
 *   too-large-body  a body over --max-body                                      -> 413
 *   burst           every 60 s one client sends 20 short requests at once: the slots and the
 *                   queue (--queue 4) overflow                                  -> 200 or 429 with Retry-After
 *
 * A request fails when its outcome is not the one its kind expects (any 5xx, a dropped
 * connection, a stream without [DONE], a wrong status or code): the target is 0 failures. While a
 * burst is in flight the queue is full for everyone, so then any completion request may get the
 * burst's answer, 429 queue_full with Retry-After (counted apart, as "refused during a burst"). Every
 * --sample seconds it records the server's resident memory and /health (a non-200 /health is a
 * failure too). At the end it checks that every slot is free and the queue empty, reads /metrics,
 * stops the server with SIGINT (exit code 0 expected) and writes to --out:
 *   requests.jsonl  every request: t (s), client, kind, status, outcome, ok, ms, tokens
 *   rss.csv         t (s), RSS MiB, /health status, slots busy, queue
 *   rss.svg         RSS over time
 *   metrics.txt     /metrics at the end
 *   server.log      the server's stderr
 *   summary.md      the counts, RSS start / after warm-up / end, the command
 *
 *   pnpm bench:serve-soak [--model FILE [--tokenizer FILE]] [--minutes 10] [--clients 8] [--parallel 8] [--tokens 24]
 *                         [--warmup 60] [--sample 2] [--burst-every 60] [--threads 2] [--out DIR]
 * Default model: the Llama-3-8B-shaped slice of `sparq bench --shape llama3-8b --layers 2`
 * (random weights, Q4_K_M, 2 of 32 layers, the real vocabulary and embedding: about 1 GB), reused
 * from its shape directory or written there. Exit status 1 when a request failed, a slot was left
 * busy or the server did not exit 0.
 */
import { selectBackend } from '@sparq/core';
import '@sparq/reference';
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { DEFAULT_SHAPE_DIR, shapeModel } from '../packages/cli/src/bench/bench-model.ts';
import { StatusError, option, startServe, streamCompletion } from './serve-client.ts';

const MINUTES = Number(option('minutes', '10'));
const CLIENTS = Number(option('clients', '8'));
const PARALLEL = Number(option('parallel', '8'));
const TOKENS = Number(option('tokens', '24'));
const WARMUP_S = Number(option('warmup', '60'));
const SAMPLE_S = Number(option('sample', '2'));
const THREADS = option('threads', '2');
const OUT = option('out', 'sparq-serve-soak');
const CONTEXT = 512;
const QUEUE = 4;
const BODY_TIMEOUT_S = 2;
const MAX_BODY = 65_536;
const BURST = 20;
const BURST_EVERY_S = Number(option('burst-every', '60'));

let model = option('model', '');
if (!model)
  model = shapeModel(
    'llama3-8b',
    2,
    'q4_k_m',
    DEFAULT_SHAPE_DIR,
    await selectBackend({ backend: 'reference' }),
    (line) => process.stderr.write(line + '\n'),
  ).path;

const tokenizer = option('tokenizer', '');
const serverArgs = [
  '--model',
  model,
  ...(tokenizer ? ['--tokenizer', tokenizer] : []),
  '--parallel',
  String(PARALLEL),
  '--ctx',
  String(CONTEXT),
  '--queue',
  String(QUEUE),
  '--body-timeout',
  String(BODY_TIMEOUT_S),
  '--max-body',
  String(MAX_BODY),
  '--timeout',
  '300',
];
const server = await startServe(serverArgs, { SPARQ_THREADS: THREADS });
const t0 = performance.now();
const seconds = () => (performance.now() - t0) / 1000;
const end = t0 + MINUTES * 60_000;

type Kind =
  | 'stream'
  | 'whole'
  | 'chat-stream'
  | 'abort-mid'
  | 'abort-early'
  | 'slow-body'
  | 'stalled-body'
  | 'malformed'
  | 'bad-field'
  | 'oversize'
  | 'too-large-body'
  | 'burst';
interface Outcome {
  t: number;
  client: number;
  kind: Kind;
  status: number;
  outcome: string;
  ok: boolean;
  ms: number;
  tokens: number;
}
const outcomes: Outcome[] = [];

/** The outcomes each kind counts as intended (see the file comment). */
const EXPECTED: Record<Kind, string> = {
  stream: 'completed',
  whole: 'completed',
  'chat-stream': 'completed',
  'abort-mid': 'left mid-stream (or completed stop first)',
  'abort-early': 'left early (or completed)',
  'slow-body': 'completed',
  'stalled-body': '408 body_timeout',
  malformed: '400 invalid_json',
  'bad-field': '400 param temperature',
  oversize: '400 context_length_exceeded',
  'too-large-body': '413 body_too_large',
  burst: 'completed, or 429 queue_full with Retry-After',
};

/** Each client walks this list from its own offset: 12 of 20 ordinary requests, 8 faults. */
const ROTATION: Kind[] = [
  'stream',
  'stream',
  'abort-mid',
  'whole',
  'stream',
  'malformed',
  'chat-stream',
  'slow-body',
  'stream',
  'abort-early',
  'oversize',
  'stream',
  'bad-field',
  'chat-stream',
  'stalled-body',
  'whole',
  'too-large-body',
  'stream',
  'abort-mid',
  'stream',
];

/** A prompt of token ids (BOS first), different per client and request, 8..39 tokens. */
const prompt = (c: number, i: number) => [
  1,
  ...Array.from({ length: 7 + ((c * 7 + i * 5) % 32) }, (_, j) => 3 + ((c * 131 + i * 17 + j * 29) % 500)),
];

interface Raw {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A POST whose body is written in `pieces` with `gapMs` between them; `stallAfter` pieces, then the client stops writing (and waits). */
function rawPost(
  path: string,
  body: string,
  options: { pieces?: number; gapMs?: number; declared?: number; stallAfter?: number } = {},
): Promise<Raw> {
  const { pieces = 1, gapMs = 0, declared = Buffer.byteLength(body), stallAfter = Infinity } = options;
  const url = new URL(path, server.url);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': declared } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
        res.on('error', reject);
      },
    );
    // The server may answer (413, 408) and close before the body is written: that is its answer.
    req.on('error', reject);
    const size = Math.ceil(body.length / pieces);
    const write = (k: number) => {
      if (k >= pieces) return void req.end();
      if (k >= stallAfter) return;
      req.write(body.slice(k * size, (k + 1) * size));
      setTimeout(() => write(k + 1), gapMs);
    };
    write(0);
  });
}

const completionBody = (c: number, i: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'soak', prompt: prompt(c, i), max_tokens: TOKENS, temperature: 0, ...extra });

/** The error object's code (or param) of a JSON error body. */
function errorOf(body: string): { code: string | null; param: string | null } {
  try {
    const e = (JSON.parse(body) as { error: { code: string | null; param: string | null } }).error;
    return { code: e.code, param: e.param };
  } catch {
    return { code: 'unparseable', param: null };
  }
}

/** A 429 as issue 27 asks for it: code queue_full, Retry-After 1..60 s. */
function queueFull(r: Raw): boolean {
  const after = Number(r.headers['retry-after']);
  return errorOf(r.body).code === 'queue_full' && after >= 1 && after <= 60;
}

/** A finished whole completion: 200 with a finish reason. */
function wholeOutcome(r: Raw): { status: number; outcome: string; ok: boolean; tokens: number } {
  if (r.status === 429)
    return {
      status: 429,
      outcome: queueFull(r) ? 'status 429 queue_full' : `status 429 ${r.body.slice(0, 100)}`,
      ok: false,
      tokens: 0,
    };
  if (r.status !== 200)
    return { status: r.status, outcome: `status ${r.status} ${errorOf(r.body).code}`, ok: false, tokens: 0 };
  const b = JSON.parse(r.body) as { choices: { finish_reason: string }[]; usage: { completion_tokens: number } };
  const reason = b.choices[0].finish_reason;
  return {
    status: 200,
    outcome: `completed ${reason}`,
    ok: reason === 'stop' || reason === 'length',
    tokens: b.usage.completion_tokens,
  };
}

/** An expected error: `status` with error code `code` (or param `param`). */
function errorOutcome(
  r: Raw,
  status: number,
  expect: { code?: string; param?: string },
): { status: number; outcome: string; ok: boolean; tokens: number } {
  const e = errorOf(r.body);
  const ok =
    r.status === status &&
    (expect.code === undefined || e.code === expect.code) &&
    (expect.param === undefined || e.param === expect.param);
  return { status: r.status, outcome: `status ${r.status} ${e.code ?? e.param}`, ok, tokens: 0 };
}

async function run(c: number, i: number, kind: Kind): Promise<Omit<Outcome, 't' | 'client' | 'kind' | 'ms'>> {
  switch (kind) {
    case 'stream':
    case 'abort-mid': {
      const r = await streamCompletion(server.url, prompt(c, i), TOKENS, kind === 'abort-mid' ? 3 : Infinity);
      const ok =
        kind === 'abort-mid'
          ? r.finishReason === 'aborted' || r.finishReason === 'stop'
          : r.finishReason === 'stop' || r.finishReason === 'length';
      return {
        status: 200,
        outcome: r.finishReason === 'aborted' ? 'left mid-stream' : `completed ${r.finishReason}`,
        ok,
        tokens: r.tokens,
      };
    }
    case 'chat-stream': {
      const r = await streamCompletion(server.url, prompt(c, i), TOKENS, Infinity, { chat: true });
      return {
        status: 200,
        outcome: `completed ${r.finishReason}`,
        ok: r.finishReason === 'stop' || r.finishReason === 'length',
        tokens: r.tokens,
      };
    }
    case 'abort-early': {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 30);
      try {
        const res = await fetch(`${server.url}/v1/completions`, {
          method: 'POST',
          signal: controller.signal,
          headers: { 'Content-Type': 'application/json' },
          body: completionBody(c, i, { stream: true }),
        });
        await res.text();
        // It finished within 30 ms: a whole stream is fine too.
        return { status: res.status, outcome: `completed before leaving`, ok: res.status === 200, tokens: 0 };
      } catch (error) {
        if ((error as Error).name === 'AbortError') return { status: 0, outcome: 'left early', ok: true, tokens: 0 };
        throw error;
      }
    }
    case 'whole':
      return wholeOutcome(await rawPost('/v1/completions', completionBody(c, i)));
    case 'slow-body':
      return wholeOutcome(await rawPost('/v1/completions', completionBody(c, i), { pieces: 4, gapMs: 250 }));
    case 'stalled-body':
      return errorOutcome(await rawPost('/v1/completions', completionBody(c, i), { pieces: 2, stallAfter: 1 }), 408, {
        code: 'body_timeout',
      });
    case 'malformed':
      return errorOutcome(await rawPost('/v1/completions', completionBody(c, i).slice(0, -7)), 400, {
        code: 'invalid_json',
      });
    case 'bad-field':
      return errorOutcome(await rawPost('/v1/completions', completionBody(c, i, { temperature: 'hot' })), 400, {
        param: 'temperature',
      });
    case 'oversize':
      return errorOutcome(
        await rawPost(
          '/v1/completions',
          JSON.stringify({ prompt: Array.from({ length: CONTEXT + 1 }, (_, j) => 3 + (j % 500)), max_tokens: 4 }),
        ),
        400,
        { code: 'context_length_exceeded' },
      );
    case 'too-large-body':
      return errorOutcome(
        await rawPost('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(MAX_BODY), max_tokens: 4 })).catch(
          tooLargeReset,
        ),
        413,
        { code: 'body_too_large' },
      );
    case 'burst':
      throw new Error('a burst is run by burst()');
  }
}

/** The server answered 413 and closed while the body was still being written: the socket resets. */
function tooLargeReset(error: Error): Raw {
  if (/EPIPE|ECONNRESET/.test(String((error as NodeJS.ErrnoException).code ?? error.message)))
    return { status: 413, body: JSON.stringify({ error: { code: 'body_too_large' } }), headers: {} };
  throw error;
}

async function record(
  c: number,
  kind: Kind,
  work: () => Promise<Omit<Outcome, 't' | 'client' | 'kind' | 'ms'>>,
): Promise<void> {
  const started = performance.now();
  const t = seconds();
  let result: Omit<Outcome, 't' | 'client' | 'kind' | 'ms'>;
  try {
    result = await work();
  } catch (error) {
    if (error instanceof StatusError && error.status === 429) {
      result = { status: 429, outcome: 'status 429 queue_full', ok: false, tokens: 0 };
      if (!queueFull({ status: 429, body: error.body, headers: { 'retry-after': error.retryAfter ?? undefined } }))
        result.outcome = `status 429 ${error.body.slice(0, 100)}`;
    } else {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      result = {
        status: 0,
        outcome: `exception: ${(error as Error).message.slice(0, 200)}${cause ? ` (${cause.code ?? cause.message})` : ''}`,
        ok: false,
        tokens: 0,
      };
    }
  }
  if (result.status === 429 && kind !== 'burst' && burstsInFlight > 0 && result.outcome === 'status 429 queue_full')
    result = { ...result, outcome: 'refused during a burst (429 queue_full)', ok: true };
  outcomes.push({
    t: Math.round(t * 10) / 10,
    client: c,
    kind,
    ms: Math.round(performance.now() - started),
    ...result,
  });
}

/** BURST short whole requests at once: each 200, or 429 with a Retry-After of 1..60 s. */
let burstsInFlight = 0;
async function burst(c: number, i: number): Promise<void> {
  burstsInFlight++;
  await Promise.all(
    Array.from({ length: BURST }, (_, b) =>
      record(c, 'burst', async () => {
        const r = await rawPost(
          '/v1/completions',
          JSON.stringify({ prompt: prompt(c, i + b), max_tokens: 2, temperature: 0 }),
        );
        if (r.status === 429) return { status: 429, outcome: 'status 429 queue_full', ok: queueFull(r), tokens: 0 };
        return wholeOutcome(r);
      }),
    ),
  );
  burstsInFlight--;
}

let nextBurst = BURST_EVERY_S;
async function client(c: number): Promise<void> {
  for (let i = 0; performance.now() < end; i++) {
    if (c === 0 && seconds() >= nextBurst) {
      nextBurst += BURST_EVERY_S;
      await burst(c, i);
      continue;
    }
    const kind = ROTATION[(i + c * 3) % ROTATION.length];
    await record(c, kind, () => run(c, i, kind));
  }
}

interface Sample {
  t: number;
  mib: number;
  health: number;
  busy: number;
  queue: number;
}
const samples: Sample[] = [];
const healthErrors: string[] = [];
async function sample(): Promise<void> {
  const t = Math.round(seconds());
  const mib = server.rss() / 2 ** 20;
  try {
    const h = await fetch(`${server.url}/health`);
    const b = (await h.json()) as { slots_processing: number; queue: number };
    samples.push({ t, mib, health: h.status, busy: b.slots_processing, queue: b.queue });
  } catch (error) {
    samples.push({ t, mib, health: 0, busy: -1, queue: -1 });
    healthErrors.push(`${t} s: ${(error as Error).message} (${String((error as { cause?: unknown }).cause)})`);
  }
}
await sample();
const sampler = setInterval(() => void sample(), SAMPLE_S * 1000);
const progress = setInterval(() => {
  const last = samples[samples.length - 1];
  process.stderr.write(
    `${Math.round(seconds())} s: ${outcomes.length} requests, ${outcomes.filter((o) => !o.ok).length} failed; RSS ${last.mib.toFixed(1)} MiB\n`,
  );
}, 60_000);
await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
clearInterval(sampler);
clearInterval(progress);

// Every client has its answer: every slot must be free and the queue empty (a cancelled job frees its slot before the next step).
let settled: { slots_processing: number; queue: number } = { slots_processing: -1, queue: -1 };
for (let k = 0; k < 100; k++) {
  settled = (await (await fetch(`${server.url}/health`)).json()) as typeof settled;
  if (settled.slots_processing === 0 && settled.queue === 0) break;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
await sample();
const metrics = await (await fetch(`${server.url}/metrics`)).text();
const code = await server.stop();
const duration = seconds();

// --- report ----------------------------------------------------------------------------------
// A sample is stored when its /health answer comes: in time order again.
samples.sort((a, b) => a.t - b.t);
mkdirSync(OUT, { recursive: true });
writeFileSync(join(OUT, 'requests.jsonl'), outcomes.map((o) => JSON.stringify(o)).join('\n') + '\n');
writeFileSync(
  join(OUT, 'rss.csv'),
  't_s,rss_mib,health,slots_busy,queue\n' +
    samples.map((s) => `${s.t},${s.mib.toFixed(1)},${s.health},${s.busy},${s.queue}`).join('\n') +
    '\n',
);
writeFileSync(join(OUT, 'metrics.txt'), metrics);
writeFileSync(join(OUT, 'server.log'), server.stderr());
writeFileSync(join(OUT, 'rss.svg'), rssSvg(samples, WARMUP_S));

const failures = outcomes.filter((o) => !o.ok);
const badHealth = samples.filter((s) => s.health !== 200);
const byKind = new Map<string, Map<string, number>>();
for (const o of outcomes) {
  const m = byKind.get(o.kind) ?? new Map<string, number>();
  m.set(o.outcome, (m.get(o.outcome) ?? 0) + 1);
  byKind.set(o.kind, m);
}
const warm = samples.filter((s) => s.t >= WARMUP_S);
const at = (s: Sample | undefined) => (s ? `${s.mib.toFixed(1)} MiB (${s.t} s)` : 'n/a');
const tokens = outcomes.reduce((sum, o) => sum + o.tokens, 0);
const lines = [
  `soak: ${duration.toFixed(0)} s, ${CLIENTS} clients; server ${serverArgs.join(' ')} (SPARQ_THREADS=${THREADS})`,
  `requests ${outcomes.length}, failures ${failures.length}; /health samples ${samples.length}, not 200: ${badHealth.length}; after the clients: slots busy ${settled.slots_processing}, queue ${settled.queue}; server exit code ${code}`,
  `tokens generated (completions that reported usage): ${tokens} (${(tokens / duration).toFixed(1)} tok/s)`,
  '',
  '| kind | expected | outcomes |',
  '|---|---|---|',
  ...[...byKind].sort().map(
    ([kind, m]) =>
      `| ${kind} | ${EXPECTED[kind as Kind]} | ${[...m]
        .sort((a, b) => b[1] - a[1])
        .map(([o, n]) => `${o}: ${n}`)
        .join(', ')} |`,
  ),
  '',
  'Any completion request may also get 429 queue_full with Retry-After while a burst is in flight ("refused during a burst").',
  '',
  `RSS: start ${at(samples[0])}; after warm-up ${at(warm[0])}; end ${at(samples[samples.length - 1])}; after warm-up min ${Math.min(...warm.map((s) => s.mib)).toFixed(1)}, max ${Math.max(...warm.map((s) => s.mib)).toFixed(1)} MiB`,
  ...(healthErrors.length ? ['', '/health failures:', ...healthErrors.map((e) => `- ${e}`)] : []),
  ...(failures.length
    ? ['', 'failures (first 20):', ...failures.slice(0, 20).map((f) => `- ${JSON.stringify(f)}`)]
    : []),
];
writeFileSync(join(OUT, 'summary.md'), lines.join('\n') + '\n');
process.stdout.write(lines.join('\n') + '\n');
process.exitCode =
  failures.length === 0 && badHealth.length === 0 && settled.slots_processing === 0 && settled.queue === 0 && code === 0
    ? 0
    : 1;

/** RSS over time as a small SVG line chart, the warm-up shaded. */
function rssSvg(points: Sample[], warmupS: number): string {
  const [W, H, L, B] = [640, 240, 56, 32];
  const tMax = Math.max(...points.map((p) => p.t), 1);
  const lo = Math.floor(Math.min(...points.map((p) => p.mib)) / 10) * 10;
  const hi = Math.ceil(Math.max(...points.map((p) => p.mib)) / 10) * 10 || lo + 10;
  const x = (t: number) => L + ((W - L - 10) * t) / tMax;
  const y = (m: number) => H - B - ((H - B - 10) * (m - lo)) / Math.max(hi - lo, 1);
  const path = points.map((p) => `${x(p.t).toFixed(1)},${y(p.mib).toFixed(1)}`).join(' ');
  return (
    [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
      `<rect x="${L}" y="10" width="${(x(Math.min(warmupS, tMax)) - L).toFixed(1)}" height="${H - B - 10}" fill="#eee"/>`,
      `<text x="${L + 4}" y="24" fill="#777">warm-up</text>`,
      `<line x1="${L}" y1="${H - B}" x2="${W - 10}" y2="${H - B}" stroke="#000"/><line x1="${L}" y1="10" x2="${L}" y2="${H - B}" stroke="#000"/>`,
      `<text x="${L - 4}" y="${y(lo) + 4}" text-anchor="end">${lo}</text><text x="${L - 4}" y="${y(hi) + 4}" text-anchor="end">${hi}</text>`,
      `<text x="${L}" y="${H - B + 14}">0</text><text x="${W - 10}" y="${H - B + 14}" text-anchor="end">${tMax} s</text>`,
      `<text x="12" y="${(H - B) / 2}" transform="rotate(-90 12 ${(H - B) / 2})" text-anchor="middle">server RSS (MiB)</text>`,
      `<polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="${path}"/>`,
      '</svg>',
    ].join('\n') + '\n'
  );
}
