/**
 * The OpenAI API as `sparq serve` speaks it: request bodies checked field by field into a job, and
 * the response objects (whole and streamed chunks) and error objects.
 *
 * Accepted fields: model (any string; the server serves one model), messages (chat) or prompt
 * (completions: a string or an array of token ids), max_tokens / max_completion_tokens,
 * temperature (0..2, 0 = greedy, default 1), top_p (0..1, default 1), seed, stop (a string or up
 * to 4), stream, stream_options.include_usage, n (1 only); sparq's own: attention (dense, sparq,
 * oracle, lminf), r, k, l, ignore_eos (as llama.cpp's and vLLM's servers: for fixed-length
 * benchmarks). Fields that would change the output and that the server does not implement (n > 1,
 * logprobs, tools, penalties, ...: UNSUPPORTED) are refused unless they hold the value that
 * changes nothing; other fields are ignored.
 */
import { SparqRangeError } from '@sparq/core';
import { chatTokens, type AttentionConfig, type ChatMessage, type ChatTemplate, type LanguageModel } from '@sparq/llm';
import type { JobResult, JobSpec } from './scheduler.ts';

/** An OpenAI error: its HTTP status and error object. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
  constructor(
    status: number,
    message: string,
    options: { type?: string; param?: string | null; code?: string | null } = {},
  ) {
    super(message);
    this.status = status;
    this.type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    this.param = options.param ?? null;
    this.code = options.code ?? null;
  }

  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

const invalid = (param: string, message: string) => new ApiError(400, `${param}: ${message}`, { param });

export type Endpoint = 'chat' | 'completions';

export interface ParsedRequest {
  spec: JobSpec;
  stream: boolean;
  includeUsage: boolean;
  /** The model name the client asked for, echoed back. */
  model: string;
}

/** The server's model: the language model, its chat template, context size and name. */
export interface Served {
  lm: LanguageModel;
  template: ChatTemplate;
  context: number;
  name: string;
}

/** Decode attention methods a request may ask for (h2o's evictions cannot share a prompt cache). */
const REQUEST_METHODS = ['dense', 'sparq', 'oracle', 'lminf'] as const;
const ROLES = ['system', 'developer', 'user', 'assistant'] as const;

/**
 * Fields that change the output and that sparq serve does not implement, each with the values that
 * change nothing (what clients send by default): any other value is refused with a 400 naming the field.
 */
const UNSUPPORTED: [string, (v: unknown) => boolean][] = [
  ['logprobs', (v) => v === false],
  ['top_logprobs', (v) => v === 0],
  ['tools', (v) => Array.isArray(v) && v.length === 0],
  ['functions', (v) => Array.isArray(v) && v.length === 0],
  ['tool_choice', (v) => v === 'none'],
  ['response_format', (v) => (v as { type?: unknown })?.type === 'text'],
  ['logit_bias', (v) => typeof v === 'object' && Object.keys(v as object).length === 0],
  ['presence_penalty', (v) => v === 0],
  ['frequency_penalty', (v) => v === 0],
  ['suffix', (v) => v === ''],
  ['echo', (v) => v === false],
  ['best_of', (v) => v === 1],
];

/**
 * The sampler's state for seed 0: its xorshift generator would stay at 0 for ever, so seed 0 takes
 * 2^53, a state no request's seed gives (|seed| < 2^53; a negative seed s is the 64-bit state
 * 2^64 + s, as OpenAI's API takes any integer): seed 0 repeats like any other.
 */
const ZERO_SEED = 2 ** 53;

/** Checks a request body (parsed JSON) for `endpoint` and turns it into a job. */
export function parseRequest(endpoint: Endpoint, body: unknown, served: Served): ParsedRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new ApiError(400, 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  const model = optional<string>(b, 'model', 'a string', (v) => typeof v === 'string') ?? served.name;
  for (const [field, inert] of UNSUPPORTED) {
    const v = b[field];
    if (v !== undefined && v !== null && !inert(v))
      throw invalid(
        field,
        `${JSON.stringify(v)?.slice(0, 80)} is not supported by sparq serve (it would change the output; leave it out)`,
      );
  }
  const n = optional(b, 'n', 'an integer', Number.isInteger);
  if (n !== undefined && n !== 1) throw invalid('n', `${n}, only 1 is supported (send one request per completion)`);
  const prompt = endpoint === 'chat' ? chatPrompt(b, served) : completionPrompt(b, served);
  const room = served.context - prompt.length;
  if (room < 0) {
    throw new ApiError(
      400,
      `the prompt is ${prompt.length} tokens, the context holds ${served.context} (sparq serve --ctx)`,
      { param: endpoint === 'chat' ? 'messages' : 'prompt', code: 'context_length_exceeded' },
    );
  }
  const maxField =
    b.max_completion_tokens !== undefined && b.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = optional(b, maxField, 'an integer >= 1', (v) => Number.isSafeInteger(v) && (v as number) >= 1);
  if (maxTokens !== undefined && maxTokens > room) {
    throw new ApiError(
      400,
      `${maxField} ${maxTokens} with a prompt of ${prompt.length} tokens needs ${prompt.length + maxTokens} positions, the context holds ${served.context}`,
      { param: maxField, code: 'context_length_exceeded' },
    );
  }
  const temperature =
    optional(b, 'temperature', 'a number in [0, 2]', (v) => typeof v === 'number' && v >= 0 && v <= 2) ?? 1;
  const topP = optional(b, 'top_p', 'a number in (0, 1]', (v) => typeof v === 'number' && v > 0 && v <= 1) ?? 1;
  const seed = optional(
    b,
    'seed',
    `an integer in [-${Number.MAX_SAFE_INTEGER}, ${Number.MAX_SAFE_INTEGER}]`,
    Number.isSafeInteger,
  );
  const stream = optional<boolean>(b, 'stream', 'true or false', (v) => typeof v === 'boolean') ?? false;
  const options = optional(b, 'stream_options', 'an object', (v) => typeof v === 'object' && !Array.isArray(v)) as
    Record<string, unknown> | undefined;
  const includeUsage = options?.include_usage === true;
  const ignoreEos = optional<boolean>(b, 'ignore_eos', 'true or false', (v) => typeof v === 'boolean') ?? false;
  return {
    spec: {
      prompt,
      maxTokens: maxTokens ?? Math.max(1, room),
      temperature,
      topP,
      seed: seed === undefined ? 1 + Math.floor(Math.random() * (2 ** 53 - 1)) : seed === 0 ? ZERO_SEED : seed,
      stop: stopStrings(b.stop),
      ignoreEos,
      attention: attention(b, served),
    },
    stream,
    includeUsage,
    model,
  };
}

/** b[field] when present and not null, checked by `ok`; undefined when absent. */
function optional<T = number>(
  b: Record<string, unknown>,
  field: string,
  expected: string,
  ok: (v: unknown) => boolean,
): T | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (!ok(v)) throw invalid(field, `${JSON.stringify(v)}, expected ${expected}`);
  return v as T;
}

function stopStrings(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return v ? [v] : [];
  if (Array.isArray(v) && v.length <= 4 && v.every((s) => typeof s === 'string')) return v.filter((s) => s.length > 0);
  throw invalid('stop', `${JSON.stringify(v)}, expected a string or an array of at most 4 strings`);
}

/** The chat messages rendered by the model's template, as tokens. */
function chatPrompt(b: Record<string, unknown>, served: Served): number[] {
  if (b.prompt !== undefined) throw invalid('prompt', 'is a /v1/completions field; chat takes messages');
  const raw = b.messages;
  if (!Array.isArray(raw) || raw.length === 0)
    throw invalid('messages', 'expected a non-empty array of { role, content }');
  const messages: ChatMessage[] = raw.map((m, i) => {
    if (m === null || typeof m !== 'object') throw invalid(`messages[${i}]`, 'expected an object { role, content }');
    const { role, content } = m as Record<string, unknown>;
    if (!ROLES.includes(role as never))
      throw invalid(`messages[${i}].role`, `${JSON.stringify(role)}, expected one of ${ROLES.join(', ')}`);
    return {
      role: role === 'developer' ? 'system' : (role as ChatMessage['role']),
      content: messageText(content, `messages[${i}].content`),
    };
  });
  let text: string;
  try {
    text = served.template.render(messages, true);
  } catch (error) {
    throw invalid('messages', `the model's chat template refused them: ${(error as Error).message}`);
  }
  return chatTokens(served.lm.tokenizer, text, true);
}

/** A message's text: a string, or an array of { type: 'text', text } parts. */
function messageText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part, j) => {
        if (
          part &&
          typeof part === 'object' &&
          (part as Record<string, unknown>).type === 'text' &&
          typeof (part as Record<string, unknown>).text === 'string'
        )
          return (part as { text: string }).text;
        throw invalid(`${param}[${j}]`, 'expected a text part { type: "text", text } (sparq serve reads text only)');
      })
      .join('');
  }
  throw invalid(param, `${JSON.stringify(content)}, expected a string or an array of text parts`);
}

/** A completion prompt: text (with BOS as the vocab adds it) or token ids as given. */
function completionPrompt(b: Record<string, unknown>, served: Served): number[] {
  if (b.messages !== undefined) throw invalid('messages', 'is a /v1/chat/completions field; completions take prompt');
  const p = b.prompt;
  const vocab = served.lm.config.vocabSize;
  if (typeof p === 'string') {
    const tokens = served.lm.tokenize(p);
    if (tokens.length === 0) throw invalid('prompt', 'has no tokens');
    return tokens;
  }
  if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t))) {
    const bad = (p as number[]).findIndex((t) => t < 0 || t >= vocab);
    if (bad >= 0) throw invalid(`prompt[${bad}]`, `token ${p[bad]}, expected an integer in [0, ${vocab - 1}]`);
    return [...(p as number[])];
  }
  if (Array.isArray(p) && p.length === 1 && typeof p[0] === 'string') return completionPrompt({ prompt: p[0] }, served);
  throw invalid(
    'prompt',
    `${JSON.stringify(p)?.slice(0, 80)}, expected a string or a non-empty array of token ids (one prompt per request)`,
  );
}

/** The request's decode attention: the server's, with the request's attention, r, k, l over it. */
function attention(b: Record<string, unknown>, served: Served): AttentionConfig {
  const method = optional<string>(b, 'attention', `one of ${REQUEST_METHODS.join(', ')}`, (v) =>
    REQUEST_METHODS.includes(v as never),
  );
  const settings: Partial<AttentionConfig> = method ? { method: method as AttentionConfig['method'] } : {};
  for (const field of ['r', 'k', 'l'] as const) {
    const v = optional(b, field, 'an integer', Number.isSafeInteger);
    if (v !== undefined) settings[field] = v;
  }
  try {
    return served.lm.resolveAttention(served.context, settings);
  } catch (error) {
    if (!(error instanceof SparqRangeError)) throw error;
    // resolveAttention names the field as attention.<name>: the request's field is <name>.
    const field = /attention\.(\w+)/.exec(error.message)?.[1] ?? 'attention';
    throw invalid(field === 'method' ? 'attention' : field, error.message);
  }
}

const now = () => Math.floor(Date.now() / 1000);

function usage(r: JobResult) {
  return {
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: r.promptTokens + r.completionTokens,
    prompt_tokens_details: { cached_tokens: r.cachedTokens },
  };
}

/** The whole response of a request that was not streamed. */
export function completionBody(endpoint: Endpoint, id: string, model: string, text: string, r: JobResult) {
  const choice =
    endpoint === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: r.finishReason }
      : { index: 0, text, logprobs: null, finish_reason: r.finishReason };
  return {
    id,
    object: endpoint === 'chat' ? 'chat.completion' : 'text_completion',
    created: now(),
    model,
    choices: [choice],
    usage: usage(r),
  };
}

/**
 * One streamed chunk: a text piece (and, for chat, the role first), the finish reason, or the usage.
 * With `stream_options.include_usage` every chunk before the usage one carries `usage: null`, as
 * OpenAI's do (clients tell the last chunk by a non-null usage).
 */
export function chunkBody(
  endpoint: Endpoint,
  id: string,
  model: string,
  part: { text?: string; role?: boolean; finish?: JobResult['finishReason']; usage?: JobResult },
  includeUsage = false,
) {
  const finish = part.finish ?? null;
  const choices =
    part.usage !== undefined
      ? []
      : endpoint === 'chat'
        ? [
            {
              index: 0,
              delta: part.finish ? {} : { ...(part.role ? { role: 'assistant' } : {}), content: part.text ?? '' },
              logprobs: null,
              finish_reason: finish,
            },
          ]
        : [{ index: 0, text: part.text ?? '', logprobs: null, finish_reason: finish }];
  return {
    id,
    object: endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: now(),
    model,
    choices,
    ...(part.usage ? { usage: usage(part.usage) } : includeUsage ? { usage: null } : {}),
  };
}
