/**
 * `sparq serve` on stories260K with the official `openai` client as the client under test:
 * completions and chat, whole and streamed; OpenAI error objects and status codes; 8 concurrent
 * greedy requests each get exactly the text the library gives that prompt alone (both backends);
 * the prompt cache; faults (a client leaving mid-stream, slow, malformed and oversized bodies,
 * bad HTTP, a full queue, a prompt past the context), each followed by /health and a served
 * request; and the command itself: --port 0 prints the URL, SIGINT finishes the running request.
 */
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { openModel, type AttentionConfig, type LanguageModel } from '@sparq/llm';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAIN_TEMPLATE } from '../../packages/cli/src/commands/serve.ts';
import { Scheduler, type SchedulerCounters } from '../../packages/cli/src/serve/scheduler.ts';
import {
  KEEP_ALIVE_MS,
  startServer,
  type RunningServer,
  type ServeOptions,
} from '../../packages/cli/src/serve/server.ts';
import { ChatTemplate, stopRuleOf } from '@sparq/llm';
import { engines, forEachBackend } from '../support/backends.ts';
import { ROOT, files, storiesMissing } from '../llm/support.ts';
import type { Engine } from '@sparq/core';

const CONTEXT = 256;
const PROMPTS = [
  'Once upon a time',
  'Lily had a big red ball',
  'The sun was hot and',
  'Tom and his dog went to the park',
  'One day, a little bird',
  'The cat sat on',
  'Mom said',
  'There was a tree',
];

function options(lm: LanguageModel, extra: Partial<ServeOptions> = {}): ServeOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    parallel: 8,
    context: CONTEXT,
    queue: 16,
    prefillChunk: 4,
    timeoutMs: 120_000,
    // Long enough that a loaded machine's 150 ms gaps between body pieces stay inside it.
    bodyTimeoutMs: 2_000,
    maxBodyBytes: 20_000,
    kvDType: lm.kv,
    kvLayout: 'single-k',
    stopRule: stopRuleOf(lm.model.format),
    ...extra,
  };
}

async function serve(
  engine: Engine,
  extra: Partial<ServeOptions> = {},
): Promise<{ lm: LanguageModel; server: RunningServer; client: OpenAI }> {
  const lm = openModel(engine, files.model.path, { tokenizer: files.tok512.path });
  const server = await startServer(
    { lm, template: new ChatTemplate(PLAIN_TEMPLATE, lm.tokenizer), context: CONTEXT, name: 'stories' },
    options(lm, extra),
  );
  // Timeouts well past a quiet run's seconds: on a loaded machine the reference backend is slow, and
  // a timeout here would fail a test that checks something else.
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
  return { lm, server, client };
}

type Serving = Awaited<ReturnType<typeof serve>>;

/** A server for the enclosing describe block (started before its tests, drained after); read it through the getter. */
function useServer(engine: () => Engine, extra: Partial<ServeOptions> = {}): () => Serving {
  let s: Serving | undefined;
  beforeAll(async () => {
    s = await serve(engine(), extra);
  });
  afterAll(async () => s && (await s.server.drain()));
  return () => s!;
}

const reference = () => engines.find((e) => e.name === 'reference')!;

/** What the library generates for `prompt` alone: greedy, `maxTokens` tokens. */
async function alone(lm: LanguageModel, prompt: string, maxTokens: number): Promise<string> {
  return (
    await lm
      .createSession({ contextSize: CONTEXT })
      .generate(lm.tokenize(prompt), { temperature: 0, maxTokens })
      .collect()
  ).text;
}

/**
 * Submits a greedy job of at most `maxTokens` tokens to `scheduler` (onText called per text piece);
 * resolves with the scheduler's counters as they were when the job ended (in the step that ended it).
 */
function greedyJob(
  scheduler: Scheduler,
  prompt: number[],
  maxTokens: number,
  onText: (text: string) => void = () => {},
  attention: AttentionConfig = scheduler.lm.resolveAttention(CONTEXT),
): Promise<SchedulerCounters> {
  const spec = { prompt, maxTokens, temperature: 0, topP: 1, seed: 1, stop: [], ignoreEos: false, attention };
  return new Promise((resolve, reject) => {
    scheduler.submit(spec, { onText, onDone: () => resolve({ ...scheduler.counters }), onError: reject });
  });
}

/** /health's body and status, then a served completion: the server is well after a fault. */
async function stillServes(server: RunningServer, client: OpenAI, lm: LanguageModel): Promise<void> {
  const health = await fetch(`${server.url}/health`);
  expect(health.status).toBe(200);
  expect(((await health.json()) as { status: string }).status).toBe('ok');
  const r = await client.completions.create({
    model: 'stories',
    prompt: 'The cat sat on',
    max_tokens: 12,
    temperature: 0,
  });
  expect(r.choices[0].text).toBe(await alone(lm, 'The cat sat on', 12));
}

/** Resolves when /health shows no busy slot and an empty queue (a freed slot is freed before the next step). */
async function idle(server: RunningServer): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const h = (await (await fetch(`${server.url}/health`)).json()) as { slots_processing: number; queue: number };
    if (h.slots_processing === 0 && h.queue === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the server did not become idle');
}

/** A raw HTTP exchange: writes `send` pieces `gapMs` apart and returns the status line and body. */
function raw(url: string, pieces: string[], gapMs = 0): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let got = '';
    // Hang up once a whole response has arrived (its Content-Length), or after 30 s.
    socket.on('data', (d) => {
      got += d.toString();
      const split = got.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(got.slice(0, split));
      if (split >= 0 && length && Buffer.byteLength(got.slice(split + 4)) >= Number(length[1])) socket.end();
    });
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    let i = 0;
    const next = () => {
      if (i < pieces.length && !socket.destroyed) socket.write(pieces[i++]);
      if (i < pieces.length) setTimeout(next, gapMs);
    };
    next();
    setTimeout(() => socket.end(), 30_000).unref();
  });
}

describe(`sparq serve on stories260K${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  if (storiesMissing) return void it.skip('needs stories260K', () => {});

  forEachBackend('sparq serve', (engine) => {
    const server = useServer(() => engine);
    let s: Serving;
    beforeAll(() => void (s = server()));

    it('8 concurrent greedy requests each get exactly the text they get alone', async () => {
      const expected = await Promise.all(PROMPTS.map((p) => alone(s.lm, p, 32)));
      const got = await Promise.all(
        PROMPTS.map((prompt) =>
          s.client.completions.create({ model: 'stories', prompt, max_tokens: 32, temperature: 0 }),
        ),
      );
      expect(got.map((r) => r.choices[0].text)).toEqual(expected);
      // They ran as one batch: more rows than steps.
      const metrics = await (await fetch(`${s.server.url}/metrics`)).text();
      const value = (name: string) => Number(new RegExp(`^sparq_${name} (\\S+)$`, 'm').exec(metrics)![1]);
      expect(value('decode_rows_total') / value('decode_steps_total')).toBeGreaterThan(2);
    });

    it('completions and chat, whole and streamed, agree', async () => {
      const whole = await s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[1],
        max_tokens: 20,
        temperature: 0,
      });
      expect(whole.object).toBe('text_completion');
      expect(whole.usage).toMatchObject({ completion_tokens: 20, prompt_tokens: s.lm.tokenize(PROMPTS[1]).length });
      expect(whole.choices[0].finish_reason).toBe('length');
      let streamed = '';
      for await (const chunk of await s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[1],
        max_tokens: 20,
        temperature: 0,
        stream: true,
      }))
        streamed += chunk.choices[0]?.text ?? '';
      expect(streamed).toBe(whole.choices[0].text);

      const messages = [{ role: 'user' as const, content: 'Lily and Tom played with a ball.' }];
      const chat = await s.client.chat.completions.create({
        model: 'stories',
        messages,
        max_tokens: 16,
        temperature: 0,
      });
      expect(chat.object).toBe('chat.completion');
      expect(chat.choices[0].message.role).toBe('assistant');
      // The plain template renders the one message as its text: the completion of that text.
      expect(chat.choices[0].message.content).toBe(await alone(s.lm, 'Lily and Tom played with a ball.', 16));
      let deltas = '';
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of await s.client.chat.completions.create({
        model: 'stories',
        messages,
        max_tokens: 16,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      })) {
        deltas += chunk.choices[0]?.delta.content ?? '';
        usage ??= chunk.usage ?? undefined;
      }
      expect(deltas).toBe(chat.choices[0].message.content);
      expect(usage?.completion_tokens).toBe(16);
      const models = await s.client.models.list();
      expect(models.data.map((m) => m.id)).toEqual(['stories']);
    });

    it("answers bad requests with OpenAI's error objects and status codes, naming the field", async () => {
      const bad = async (body: Record<string, unknown>) => {
        try {
          await s.client.completions.create({ model: 'stories', prompt: 'x', ...body } as never);
        } catch (error) {
          return error as InstanceType<typeof OpenAI.APIError>;
        }
        throw new Error(`accepted ${JSON.stringify(body)}`);
      };
      const e1 = await bad({ max_tokens: -3 });
      expect([e1.status, e1.type, e1.param]).toEqual([400, 'invalid_request_error', 'max_tokens']);
      expect((await bad({ temperature: 'hot' })).param).toBe('temperature');
      expect((await bad({ attention: 'h2o' })).param).toBe('attention');
      expect((await bad({ attention: 'sparq', r: 99 })).message).toMatch(/r 99, expected an integer in \[1, 8\]/);
      expect((await bad({ n: 2 })).param).toBe('n');
      const long = await bad({ prompt: 'the cat sat on the mat and '.repeat(40) });
      expect([long.status, long.code, long.param]).toEqual([400, 'context_length_exceeded', 'prompt']);
      expect(long.message).toMatch(new RegExp(`the prompt is \\d+ tokens, the context holds ${CONTEXT}`));
      const room = await bad({ max_tokens: CONTEXT });
      expect(room.message).toMatch(
        new RegExp(
          `max_tokens ${CONTEXT} with a prompt of \\d+ tokens needs \\d+ positions, the context holds ${CONTEXT}`,
        ),
      );
      const chat = await s.client.chat.completions
        .create({ model: 'stories', messages: [{ role: 'robot', content: 'x' }] } as never)
        .catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect((chat as InstanceType<typeof OpenAI.APIError>).param).toBe('messages[0].role');
      const missing = await fetch(`${s.server.url}/v1/nothing`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
      await stillServes(s.server, s.client, s.lm);
    });

    it("per request: SparQ with r = head dim and k >= context gives dense's text; a seed repeats a sampled text", async () => {
      const dense = await s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[4],
        max_tokens: 24,
        temperature: 0,
      });
      const full = await s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[4],
        max_tokens: 24,
        temperature: 0,
        attention: 'sparq',
        r: 8,
        k: CONTEXT,
        l: 0,
      } as never);
      expect(full.choices[0].text).toBe(dense.choices[0].text);
      const sampled = () =>
        s.client.completions.create({
          model: 'stories',
          prompt: PROMPTS[5],
          max_tokens: 24,
          temperature: 0.9,
          top_p: 0.95,
          seed: 1234,
        });
      const [a, b] = await Promise.all([sampled(), sampled()]);
      expect(a.choices[0].text).toBe(b.choices[0].text);
    });

    it('reuses a cached prompt prefix and gives the same text', async () => {
      const prompt = 'Once upon a time, there was a little girl named Lily. She loved';
      const first = await s.client.completions.create({ model: 'stories', prompt, max_tokens: 10, temperature: 0 });
      const second = await s.client.completions.create({ model: 'stories', prompt, max_tokens: 10, temperature: 0 });
      const n = s.lm.tokenize(prompt).length;
      expect(
        (second.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details?.cached_tokens,
      ).toBe(n - 1);
      expect(second.choices[0].text).toBe(first.choices[0].text);
      // A chat's next turn starts with the previous turn: that much comes from the cache.
      const turn1 = [{ role: 'user' as const, content: 'Tom found a shiny stone in the garden near the old tree.' }];
      const reply = await s.client.chat.completions.create({
        model: 'stories',
        messages: turn1,
        max_tokens: 12,
        temperature: 0,
      });
      const turn2 = [
        ...turn1,
        { role: 'assistant' as const, content: reply.choices[0].message.content! },
        { role: 'user' as const, content: 'What did he do?' },
      ];
      const next = await s.client.chat.completions.create({
        model: 'stories',
        messages: turn2,
        max_tokens: 4,
        temperature: 0,
      });
      expect(next.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(reply.usage!.prompt_tokens - 1);
    });

    it('a client that leaves mid-stream frees its slot at once', async () => {
      const controller = new AbortController();
      const stream = await s.client.completions.create(
        { model: 'stories', prompt: PROMPTS[0], max_tokens: 200, temperature: 0, stream: true },
        { signal: controller.signal },
      );
      let pieces = 0;
      try {
        for await (const chunk of stream) {
          void chunk;
          if (++pieces === 3) controller.abort();
        }
      } catch {
        // The client's abort may surface as an error or as the end of the stream.
      }
      expect(pieces).toBeLessThan(20);
      await idle(s.server);
      const metrics = await (await fetch(`${s.server.url}/metrics`)).text();
      expect(metrics).toMatch(/^sparq_client_disconnects_total [1-9]/m);
      await stillServes(s.server, s.client, s.lm);
    });

    it('slow, malformed, oversized and broken bodies get 408, 400, 413 and 400; huge headers 431', async () => {
      const url = s.server.url;
      const slow = await raw(
        url,
        [
          'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"prompt":',
          '"x"',
        ],
        50,
      );
      expect(slow).toMatch(/^HTTP\/1.1 408/);
      expect(slow).toContain('body_timeout');
      const json = await fetch(`${url}/v1/completions`, { method: 'POST', body: '{"prompt": "x",' });
      expect(json.status).toBe(400);
      expect(((await json.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
      const notObject = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: '[1,2]' });
      expect(notObject.status).toBe(400);
      const big = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'x'.repeat(30_000) }),
      });
      expect(big.status).toBe(413);
      const garbage = await raw(url, ['NOT HTTP AT ALL\r\n\r\n']);
      expect(garbage).toMatch(/^HTTP\/1.1 400/);
      // Headers over Node's 16 KiB: 431.
      const huge = await raw(url, [`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(20_000)}\r\n\r\n`]);
      expect(huge).toMatch(/^HTTP\/1.1 431/);
      await stillServes(s.server, s.client, s.lm);
    });
  });

  it('a long prompt is prefilled in chunks between the decode steps of a running stream', async () => {
    const lm = openModel(reference(), files.model.path, { tokenizer: files.tok512.path });
    const chunk = 4;
    const scheduler = new Scheduler(lm, { ...options(lm), parallel: 2, prefillChunk: chunk });
    const order: string[] = [];
    // A greedy job whose text pieces go into `order` under `name`.
    const run = (name: string, prompt: number[], maxTokens: number) =>
      greedyJob(scheduler, prompt, maxTokens, () => order.push(name));
    const first = lm.tokenize('Once upon a time');
    const short = run('short', first, 120);
    // Once the short stream decodes, a prompt of 60 tokens arrives: 15 chunks.
    while (!order.includes('short')) await new Promise((resolve) => setImmediate(resolve));
    const prompt = lm
      .tokenize('the cat sat on the mat and the dog ran in the park with the ball. '.repeat(4))
      .slice(0, 60);
    await Promise.all([short, run('long', prompt, 4)]);
    // Each step forwards one chunk of the long prompt and one decode step of the short stream: before
    // the long prompt's first text (after its 15th chunk), the short stream got text 14 more times
    // (a few steps give a token no text of its own: part of a UTF-8 character, or a leading space).
    const shortBefore = order.slice(0, order.indexOf('long')).filter((name) => name === 'short').length;
    expect(shortBefore).toBeGreaterThanOrEqual(1 + prompt.length / chunk - 1 - 3);
    expect(scheduler.counters.promptTokens).toBe(first.length + prompt.length);
  });

  it('requests that arrive together are prefilled in the same step: 4 prompts of 8 tokens within a budget of 64', async () => {
    const lm = openModel(reference(), files.model.path, { tokenizer: files.tok512.path });
    const scheduler = new Scheduler(lm, { ...options(lm), parallel: 4, prefillChunk: 64 });
    const prompts = PROMPTS.slice(0, 4).map((p) => lm.tokenize(`${p} and then some more`).slice(0, 8));
    expect(prompts.map((p) => p.length)).toEqual([8, 8, 8, 8]);
    // One token each: a job ends in the step that forwarded the last of its prompt.
    const ended = await Promise.all(prompts.map((p) => greedyJob(scheduler, p, 1)));
    expect(ended.map((c) => [c.steps, c.promptTokens])).toEqual(ended.map(() => [1, 32]));
    expect(scheduler.counters).toMatchObject({ steps: 1, decodeSteps: 0, decodeRows: 0, generatedTokens: 4 });
  });

  it('the prompt budget is per step, for all slots, from a start that moves: a long prompt cannot hold back a short one', async () => {
    const lm = openModel(reference(), files.model.path, { tokenizer: files.tok512.path });
    const scheduler = new Scheduler(lm, { ...options(lm), parallel: 2, prefillChunk: 4 });
    const text = 'the cat sat on the mat and the dog ran in the park with the ball. '.repeat(4);
    const long = lm.tokenize(text).slice(0, 40);
    const short = lm.tokenize(text).slice(0, 4);
    // Queued together, the long prompt first (slot 0): step 1 forwards 4 of its tokens, step 2 starts
    // at slot 1 and forwards the short prompt, whose job then ends; the long one needs 10 steps.
    const [longEnd, shortEnd] = await Promise.all([greedyJob(scheduler, long, 1), greedyJob(scheduler, short, 1)]);
    expect([shortEnd.steps, shortEnd.promptTokens]).toEqual([2, 8]);
    expect([longEnd.steps, longEnd.promptTokens]).toEqual([11, 44]);
  });

  it('a step that throws fails the jobs of every slot in it; the next job runs as alone', async () => {
    const lm = openModel(reference(), files.model.path, { tokenizer: files.tok512.path });
    const scheduler = new Scheduler(lm, { ...options(lm), parallel: 3, prefillChunk: 16 });
    const tokens = lm.tokenize('the cat sat on the mat and the dog ran in the park with the ball. '.repeat(4));
    // Step 1 forwards the three prompts' first 16 tokens (5, 5, 6); step 2 the first decode rows of
    // the first two jobs and 16 more of the third's prompt. The second job's SparQ r is past head_dim,
    // so sparqDecode refuses its decode row in step 2, which fails all three jobs.
    const r = lm.config.headDim + 1;
    const bad = { ...lm.resolveAttention(CONTEXT), method: 'sparq' as const, r, k: 8, l: 2 };
    const jobs = [
      greedyJob(scheduler, tokens.slice(0, 5), 8),
      greedyJob(scheduler, tokens.slice(5, 10), 8, () => {}, bad),
      greedyJob(scheduler, tokens.slice(0, 40), 8),
    ];
    for (const job of jobs) await expect(job).rejects.toThrow(`sparqDecode: r ${r}, expected`);
    expect(scheduler.counters).toMatchObject({ steps: 1, failedSteps: 1, promptTokens: 16 });
    let text = '';
    await greedyJob(scheduler, lm.tokenize(PROMPTS[0]), 12, (piece) => (text += piece));
    expect(text).toBe(await alone(lm, PROMPTS[0], 12));
  });

  describe('what a demanding OpenAI client expects', () => {
    // Prefill in chunks of 64: the context-long prompt below takes 4 steps, not 63.
    const server = useServer(reference, { prefillChunk: 64 });

    it('a stop string that spans two tokens ends the text before it, streamed and whole', async () => {
      const s = server();
      const request = { model: 'stories', prompt: PROMPTS[0], max_tokens: 40, temperature: 0 };
      // Without a stop string, each streamed chunk is one token's text.
      const pieces: string[] = [];
      for await (const chunk of await s.client.completions.create({ ...request, stream: true }))
        if (chunk.choices[0]?.text) pieces.push(chunk.choices[0].text);
      const full = pieces.join('');
      expect(full).toBe(await alone(s.lm, PROMPTS[0], 40));
      // The stop string: the end of one token's text and the start of the next one's.
      const j = pieces.findIndex((p, i) => i > 2 && p.length >= 3 && pieces[i + 1]?.length >= 3);
      const stop = pieces[j].slice(-2) + pieces[j + 1].slice(0, 2);
      const expected = full.slice(0, full.indexOf(stop));
      let streamed = '';
      let finish: string | null = null;
      for await (const chunk of await s.client.completions.create({
        ...request,
        stop: ['never there', stop],
        stream: true,
      })) {
        streamed += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect([streamed, finish]).toEqual([expected, 'stop']);
      const whole = await s.client.completions.create({ ...request, stop });
      expect([whole.choices[0].text, whole.choices[0].finish_reason]).toEqual([expected, 'stop']);
    });

    it('fields that would change the output are refused by name unless they change nothing', async () => {
      const s = server();
      const refused = async (body: Record<string, unknown>) => {
        const e = (await s.client.chat.completions
          .create({ model: 'stories', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, ...body } as never)
          .catch((error: unknown) => error)) as InstanceType<typeof OpenAI.APIError>;
        return [e.status, e.param];
      };
      expect(await refused({ presence_penalty: 0.5 })).toEqual([400, 'presence_penalty']);
      expect(await refused({ frequency_penalty: -1 })).toEqual([400, 'frequency_penalty']);
      expect(await refused({ logprobs: true, top_logprobs: 2 })).toEqual([400, 'logprobs']);
      expect(await refused({ response_format: { type: 'json_object' } })).toEqual([400, 'response_format']);
      expect(await refused({ tools: [{ type: 'function', function: { name: 'f' } }] })).toEqual([400, 'tools']);
      // What clients send by default is accepted.
      const inert = {
        presence_penalty: 0,
        frequency_penalty: 0,
        logprobs: false,
        tools: [],
        response_format: { type: 'text' },
        logit_bias: {},
      };
      const ok = await s.client.chat.completions.create({
        model: 'stories',
        messages: [{ role: 'user', content: 'Tom and his dog' }],
        max_tokens: 6,
        temperature: 0,
        ...inert,
      } as never);
      expect((ok as OpenAI.ChatCompletion).choices[0].message.content).toBe(await alone(s.lm, 'Tom and his dog', 6));
    });

    it('without max_tokens a completion runs to the end of the context', async () => {
      const s = server();
      const prompt = s.lm.tokenize('the cat sat on the mat and '.repeat(30)).slice(0, CONTEXT - 5);
      const r = await s.client.completions.create({ model: 'stories', prompt, temperature: 0 });
      // A stop token may come first; else exactly the context's room.
      if (r.choices[0].finish_reason === 'length') expect(r.usage!.completion_tokens).toBe(CONTEXT - prompt.length);
      expect(r.usage!.prompt_tokens + r.usage!.completion_tokens).toBeLessThanOrEqual(CONTEXT);
    });

    it('a seed repeats its sampled text, seed 0 and negative seeds included; another seed gives another text', async () => {
      const s = server();
      const sampled = (seed: number) =>
        s.client.completions
          .create({ model: 'stories', prompt: PROMPTS[6], max_tokens: 32, temperature: 1, seed })
          .then((r) => r.choices[0].text);
      const [zero1, zero2, a, b, minus1, minus2] = await Promise.all([0, 0, 7, 8, -7, -7].map((seed) => sampled(seed)));
      expect(zero2).toBe(zero1);
      expect(minus2).toBe(minus1);
      expect(new Set([zero1, a, b, minus1]).size).toBe(4);
      const e = (await s.client.completions
        .create({ model: 'stories', prompt: 'x', seed: 0.5 })
        .catch((error: unknown) => error)) as InstanceType<typeof OpenAI.APIError>;
      expect([e.status, e.param]).toEqual([400, 'seed']);
    });

    it('ignore_eos: generation goes on past the end-of-text token, to max_tokens', async () => {
      const s = server();
      // 'The cat sat on': its greedy story ends (end of text) before 200 tokens.
      const request = { model: 'stories', prompt: 'The cat sat on', max_tokens: 200, temperature: 0 };
      const [ends, on] = await Promise.all([
        s.client.completions.create(request),
        s.client.completions.create({ ...request, ignore_eos: true } as never),
      ]);
      expect(ends.choices[0].finish_reason).toBe('stop');
      expect([on.choices[0].finish_reason, on.usage!.completion_tokens]).toEqual(['length', 200]);
      expect(on.choices[0].text.startsWith(ends.choices[0].text)).toBe(true);
      const e = (await s.client.completions
        .create({ model: 'stories', prompt: 'x', ignore_eos: 'yes' } as never)
        .catch((error: unknown) => error)) as InstanceType<typeof OpenAI.APIError>;
      expect([e.status, e.param]).toEqual([400, 'ignore_eos']);
    });

    it('stream_options.include_usage: one last chunk with the usage, the counts of the same request whole', async () => {
      const s = server();
      const request = { model: 'stories', prompt: PROMPTS[7], max_tokens: 12, temperature: 0 };
      const whole = await s.client.completions.create(request);
      const usages: OpenAI.CompletionUsage[] = [];
      let afterUsage = 0;
      let nulls = 0;
      let chunks = 0;
      for await (const chunk of await s.client.completions.create({
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      })) {
        if (usages.length > 0) afterUsage++;
        if (chunk.usage) usages.push(chunk.usage);
        else nulls += chunk.usage === null ? 1 : 0;
        chunks++;
      }
      // OpenAI's chunks before the usage one carry usage: null.
      expect(nulls).toBe(chunks - 1);
      expect(usages).toHaveLength(1);
      expect(afterUsage).toBe(0);
      expect({ ...usages[0], prompt_tokens_details: undefined }).toEqual({
        ...whole.usage,
        prompt_tokens_details: undefined,
      });
      let plain = 0;
      for await (const chunk of await s.client.completions.create({ ...request, stream: true }))
        if (chunk.usage !== undefined) plain++;
      expect(plain).toBe(0);
    });
  });

  it('a drain finishes a request whose body was still arriving', async () => {
    const s = await serve(reference());
    const body = JSON.stringify({ prompt: PROMPTS[2], max_tokens: 6, temperature: 0 });
    const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    // The first half of the body, then the drain begins, then the rest (within the body timeout).
    const answer = raw(s.server.url, [head + body.slice(0, 20), body.slice(20)], 150);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const drained = s.server.drain();
    const got = await answer;
    await drained;
    expect(got).toMatch(/^HTTP\/1.1 200/);
    expect(
      (JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)) as { choices: { text: string }[] }).choices[0].text,
    ).toBe(await alone(s.lm, PROMPTS[2], 6));
  });

  it('keeps an idle connection open longer than a load balancer does (Keep-Alive: timeout=65)', async () => {
    const s = await serve(reference());
    const response = await fetch(`${s.server.url}/health`);
    await response.json();
    expect(response.headers.get('keep-alive')).toBe(`timeout=${KEEP_ALIVE_MS / 1000}`);
    expect(KEEP_ALIVE_MS).toBeGreaterThan(60_000);
    await s.server.drain();
  });

  it('a request that arrives on a kept-alive connection while a step blocks the event loop past the keep-alive timeout is served', async () => {
    const s = await serve(reference());
    s.server.server.keepAliveTimeout = 200;
    const { hostname, port } = new URL(s.server.url);
    const socket = connect(Number(port), hostname);
    let got = '';
    socket.on('data', (d) => (got += d.toString()));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    const health = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
    socket.write(health);
    while (!got.includes('"status"')) await new Promise((resolve) => setTimeout(resolve, 5));
    // The connection is idle, its keep-alive timer running. The next request is written, then the
    // event loop is held (as a long forward step holds it) until the timer is overdue.
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.write(health);
    const until = performance.now() + 300;
    while (performance.now() < until);
    for (let i = 0; i < 100 && got.split('HTTP/1.1 200').length < 3 && !socket.destroyed; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(got.split('HTTP/1.1 200').length - 1).toBe(2);
    socket.end();
    await closed;
    await s.server.drain();
  });

  describe('a full queue', () => {
    const server = useServer(reference, { parallel: 1, queue: 1 });

    it('gets 429 with Retry-After; the running and queued requests finish', async () => {
      const s = server();
      const running = s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[2],
        max_tokens: 100,
        temperature: 0,
      });
      const queued = s.client.completions.create({
        model: 'stories',
        prompt: PROMPTS[3],
        max_tokens: 8,
        temperature: 0,
      });
      for (let i = 0; i < 100; i++) {
        const h = (await (await fetch(`${s.server.url}/health`)).json()) as { queue: number };
        if (h.queue === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const refused = await fetch(`${s.server.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'x', max_tokens: 2 }),
      });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('queue_full');
      expect((await running).choices[0].text).toBe(await alone(s.lm, PROMPTS[2], 100));
      expect((await queued).choices[0].text).toBe(await alone(s.lm, PROMPTS[3], 8));
      await stillServes(s.server, s.client, s.lm);
    });
  });

  describe('a request timeout', () => {
    const server = useServer(reference, { parallel: 1, timeoutMs: 150 });

    it('gets 504 and frees the slot; the server answers /health and serves the next request', async () => {
      const s = server();
      const t0 = performance.now();
      const late = await fetch(`${s.server.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: PROMPTS[0], max_tokens: CONTEXT - 8, temperature: 0 }),
      });
      expect(late.status).toBe(504);
      expect(((await late.json()) as { error: { code: string } }).error.code).toBe('timeout');
      expect(performance.now() - t0).toBeLessThan(2000);
      await idle(s.server);
      expect((await fetch(`${s.server.url}/health`)).status).toBe(200);
      const next = await s.client.completions.create({
        model: 'stories',
        prompt: 'Mom said',
        max_tokens: 1,
        temperature: 0,
      });
      expect(next.choices[0].text).toBe(await alone(s.lm, 'Mom said', 1));
    });
  });

  it('the command: --port 0 prints the URL; SIGINT finishes the running requests, whole and streamed, and exits 0', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'packages/cli/src/main.ts'),
        'serve',
        '--model',
        files.model.path,
        '--tokenizer',
        files.tok512.path,
        '--port',
        '0',
        '--parallel',
        '2',
        '--ctx',
        '256',
      ],
      { cwd: ROOT, env: { ...process.env, SPARQ_BACKEND: 'reference' } },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const body = JSON.stringify({ prompt: PROMPTS[0], max_tokens: 150, temperature: 0 });
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        `${url}/v1/completions`,
        { method: 'POST', headers: { 'Content-Type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    // A streamed request beside it, read through the official client.
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
    const streamed = (async () => {
      let text = '';
      let finish: string | null = null;
      for await (const chunk of await client.completions.create({
        model: 'stories',
        prompt: PROMPTS[1],
        max_tokens: 120,
        temperature: 0,
        stream: true,
      })) {
        text += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { text, finish };
    })();
    // Once both run, interrupt: they still complete, new requests are refused, then exit 0.
    // (Waiting by the clock, not by a count of polls: a loaded machine admits them late.)
    const admitBy = Date.now() + 60_000;
    let processing = 0;
    while (processing < 2 && Date.now() < admitBy) {
      const h = (await (await fetch(`${url}/health`)).json()) as { slots_processing: number };
      processing = h.slots_processing;
      if (processing < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(processing, 'both requests running before SIGINT').toBe(2);
    child.kill('SIGINT');
    // Once it says it is draining (a loaded machine may take a while to run the handler).
    while (!stderr.includes('SIGINT: finishing') && Date.now() < admitBy)
      await new Promise((resolve) => setTimeout(resolve, 5));
    // The listener is closed (connection refused) or, on a kept-alive connection, 503.
    const late = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'x', max_tokens: 1 }),
    }).then(
      (r) => r.status,
      () => 'refused',
    );
    expect([503, 'refused']).toContain(late);
    const done = await answer;
    expect(done.status).toBe(200);
    expect((JSON.parse(done.text) as { choices: { finish_reason: string }[] }).choices[0].finish_reason).toBe('length');
    const lm = openModel(reference(), files.model.path, { tokenizer: files.tok512.path });
    expect(await streamed).toEqual({ text: await alone(lm, PROMPTS[1], 120), finish: 'length' });
    expect(await exited).toBe(0);
    expect(stderr).toContain('sparq serve: stopped');
  }, 150_000);
});
