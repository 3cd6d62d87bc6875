/**
 * Chat: a conversation rendered with the model's own chat template (GGUF
 * `tokenizer.chat_template`, a Jinja template run by @huggingface/jinja, the
 * same variables Hugging Face's apply_chat_template passes), decoded turn by
 * turn on one TextSession whose KV cache holds the whole conversation.
 *
 * Each turn renders the conversation (with the generation prompt) and
 * prefills only the text past what the cache already holds: the cache holds
 * exactly the rendered text of earlier turns plus the replies as generated,
 * and a template renders a conversation as a growing string, so the new
 * turn's text is the suffix. The end-of-turn token that stopped a reply is
 * not in the cache yet; it is the first token of the next turn's suffix, as
 * the template writes it. When a template rewrites earlier turns (trims a
 * reply, drops reasoning), the rendered text no longer extends the cache's
 * and the whole conversation is prefilled again (the reply says so).
 */
import {
  SparqRangeError,
  type Engine,
  type ProductPath,
  type KVTypeChoice,
  type KTDType,
  type KVLayout,
} from '@sparq/core';
import { Template } from '@huggingface/jinja';
import type { AttentionConfig } from './attention-method.ts';
import type { Session } from './forward.ts';
import { CHECKS, checkCacheChoices, checkKeys, checkNumber, checkSeed, contextCheck, renamed } from './options.ts';
import { TextSession } from './text-session.ts';
import type { GGUFFile } from './gguf-read.ts';
import type { LanguageModel } from './language-model.ts';
import { readModelHeader } from './model-file.ts';
import type { Tokenizer } from './tokenizer.ts';
import type { Model } from './weights.ts';

export const CHAT_TEMPLATE_KEY = 'tokenizer.chat_template';

/** One message of a conversation, as the chat template reads it. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** The GGUF's chat template source, or null when the file has none. */
export function chatTemplateSource(f: GGUFFile): string | null {
  const v = f.metadata.get(CHAT_TEMPLATE_KEY);
  return v?.type === 'string' ? v.value : null;
}

/** A parsed chat template with the tokenizer's special tokens as its variables. */
export class ChatTemplate {
  private readonly template: Template;
  private readonly tokenizer: Tokenizer;

  constructor(source: string, tokenizer: Tokenizer) {
    this.template = new Template(source);
    this.tokenizer = tokenizer;
  }

  /** The conversation as text; with `addGenerationPrompt` it ends where the assistant's reply begins. */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
    const t = this.tokenizer;
    const text = (id: number) => (id >= 0 ? Buffer.from(t.tokenToPiece(id, true)).toString('utf8') : '');
    return this.template.render({
      messages,
      add_generation_prompt: addGenerationPrompt,
      bos_token: text(t.bosId),
      eos_token: text(t.eosId),
      unk_token: text(t.vocab.unk),
      pad_token: text(t.vocab.pad),
    });
  }
}

/**
 * Tokens of rendered chat text (special-token text parsed as the tokens); the first tokens of a
 * sequence (`fresh`) start with BOS when the vocab asks for it and the template did not write it.
 */
export function chatTokens(tokenizer: Tokenizer, text: string, fresh: boolean): number[] {
  const tokens = tokenizer.encode(text, { addSpecial: false, parseSpecial: true });
  if (fresh && tokenizer.addBos && tokens[0] !== tokenizer.bosId) tokens.unshift(tokenizer.bosId);
  return tokens;
}

/** A chat's settings; names and defaults are options.ts's. */
export interface ChatOptions {
  attention: AttentionConfig;
  /** Context size (KV positions) for the whole conversation, at most the model's trained context (the default). */
  contextSize?: number;
  /** @deprecated The older name of contextSize. */
  context?: number;
  /** Most tokens one reply may have (default: until an end-of-generation token or the context is full). */
  maxReplyTokens?: number;
  /** A system message first in the conversation. */
  system?: string;
  /** 0 is greedy; default DEFAULT_TEMPERATURE (1). */
  temperature?: number;
  /** Nucleus sampling threshold, default DEFAULT_TOP_P (0.9). */
  topP?: number;
  /** @deprecated The older name of topP. */
  topp?: number;
  /** Sampler seed of the first turn (turn n samples with seed + n); 0 or absent: random. */
  seed?: bigint | number;
  /** KV cache element type, default DEFAULT_KV_DTYPE ('f16'). */
  kv?: KVTypeChoice;
  /** @deprecated The older name of kv. */
  kvDType?: KVTypeChoice;
  /** SparQ's transposed K type, default DEFAULT_SESSION_KT of kv's K type (forward.ts). */
  kt?: KTDType;
  kvLayout?: KVLayout;
  productPath?: ProductPath;
  /** Most prompt tokens forwarded in one step, default DEFAULT_PREFILL_CHUNK (512). */
  prefillChunk?: number;
}

const CHAT_OPTIONS = [
  'attention',
  'contextSize',
  'context',
  'maxReplyTokens',
  'system',
  'temperature',
  'topP',
  'topp',
  'seed',
  'kv',
  'kvDType',
  'kt',
  'kvLayout',
  'productPath',
  'prefillChunk',
];

/** A reply of `Chat.send`: the text, its tokens, why it ended, what was prefilled and the timings. */
export interface ChatReply {
  /** The reply as text (its tokens' pieces; the end-of-generation token not included). */
  text: string;
  /** The reply's tokens, the end-of-generation token not included. */
  tokens: number[];
  /** Tokens forwarded by this turn's prefill (only the new turn's, unless `reprefilled`). */
  prefilled: number;
  /** The template rewrote earlier turns, so the whole conversation was prefilled again. */
  reprefilled: boolean;
  /** Why the reply ended: an end-of-generation token ('eos'), maxReplyTokens ('length'), or a full context ('context'). */
  finishReason: 'eos' | 'length' | 'context';
  /** @deprecated finishReason under its older name and values ('eog' for 'eos'). */
  stop: 'eog' | 'length' | 'context';
  prefillMs: number;
  decodeMs: number;
}

/**
 * A conversation on a TextSession: each turn is one generate() call on it
 * (one generation loop for the whole library). A turn that fails (a prompt
 * that does not fit, a failing step) leaves the conversation as it was: no
 * user message recorded, the cache rolled back by the session.
 */
export class Chat {
  /** The session the turns generate on. */
  readonly text: TextSession;
  readonly messages: ChatMessage[] = [];
  private readonly tokenizer: Tokenizer;
  private readonly template: ChatTemplate;
  private readonly sampling: { temperature?: number; topP?: number; seed?: bigint | number };
  private readonly maxReplyTokens: number;
  /** The text whose tokens are in the cache, in order. */
  private cachedText = '';
  private turns = 0;

  constructor(engine: Engine, model: Model, tokenizer: Tokenizer, template: ChatTemplate, options: ChatOptions) {
    checkKeys('Chat', options, CHAT_OPTIONS);
    const contextSize =
      renamed('Chat', 'contextSize', options.contextSize, 'context', options.context) ?? model.config.seqLen;
    checkNumber(
      `Chat: ${options.contextSize === undefined && options.context !== undefined ? 'context' : 'contextSize'}`,
      contextSize,
      contextCheck(model.config.seqLen),
    );
    this.maxReplyTokens = checkNumber('Chat: maxReplyTokens', options.maxReplyTokens ?? Infinity, CHECKS.maxTokens);
    const kv = renamed('Chat', 'kv', options.kv, 'kvDType', options.kvDType);
    checkCacheChoices('Chat', { ...options, kv });
    if (options.temperature !== undefined) checkNumber('Chat: temperature', options.temperature, CHECKS.temperature);
    const topP = renamed('Chat', 'topP', options.topP, 'topp', options.topp);
    if (topP !== undefined) checkNumber('Chat: topP', topP, CHECKS.topP);
    if (options.seed !== undefined) checkSeed('Chat: seed', options.seed);
    this.text = new TextSession(engine, model, tokenizer, {
      contextSize,
      attention: options.attention,
      kv,
      kt: options.kt,
      kvLayout: options.kvLayout,
      productPath: options.productPath,
      prefillChunk: options.prefillChunk,
      stop: 'eog',
    });
    this.tokenizer = tokenizer;
    this.template = template;
    this.sampling = { temperature: options.temperature, topP, seed: options.seed };
    if (options.system !== undefined) this.messages.push({ role: 'system', content: options.system });
  }

  /** The forward pass under the session (its caches and position). */
  get session(): Session {
    return this.text.forward;
  }

  /** Adds a user turn and generates the assistant's reply; `onPiece` hears each token's bytes as it is sampled. */
  send(content: string, onPiece?: (bytes: Uint8Array) => void): ChatReply {
    const { text: session, tokenizer } = this;
    const rendered = this.template.render([...this.messages, { role: 'user', content }], true);
    const reprefilled = !rendered.startsWith(this.cachedText);
    if (reprefilled) {
      session.reset();
      this.cachedText = '';
    }
    const tokens = chatTokens(tokenizer, rendered.slice(this.cachedText.length), session.position === 0);
    const room = session.contextSize - session.position;
    if (tokens.length >= room)
      throw new SparqRangeError(
        `chat: this turn is ${tokens.length} tokens and the context has ${room} positions left (of ${session.contextSize}); start a new chat or use a larger context`,
      );

    // The last position stays free for the end-of-turn token the next turn starts with.
    const maxTokens = Math.min(this.maxReplyTokens, room - tokens.length);
    const reply: number[] = [];
    const seed =
      this.sampling.seed === undefined || BigInt(this.sampling.seed) === 0n
        ? undefined
        : BigInt(this.sampling.seed) + BigInt(this.turns);
    const generation = session.generate(tokens, {
      ...this.sampling,
      seed,
      maxTokens,
      onToken: (token) => {
        reply.push(token);
        onPiece?.(tokenizer.tokenToPiece(token, true));
      },
    });
    while (generation.step() !== null);
    const result = generation.result!;
    const finishReason =
      result.finishReason === 'eos' ? 'eos' : reply.length === this.maxReplyTokens ? 'length' : 'context';
    // A reply cut short was sampled but not forwarded: its last token is not in the cache, its text is the next turn's.
    if (finishReason !== 'eos') session.dropPending();
    const cachedReply = finishReason === 'eos' ? reply : reply.slice(0, -1);
    const text = tokenizer.detokenize(reply, true);
    this.cachedText = rendered + tokenizer.detokenize(cachedReply, true);
    this.messages.push({ role: 'user', content }, { role: 'assistant', content: text });
    this.turns++;
    return {
      text,
      tokens: reply,
      prefilled: tokens.length,
      reprefilled,
      finishReason,
      stop: finishReason === 'eos' ? 'eog' : finishReason,
      prefillMs: result.prefillMs,
      decodeMs: result.decodeMs,
    };
  }
}

/**
 * A Chat on a LanguageModel (openModel / loadModel) of the GGUF file at
 * `path`, with that file's chat template unless `template` gives one, and the
 * model's attention, KV type and INT4 path unless the options say otherwise.
 */
export function createChat(
  lm: LanguageModel,
  path: string,
  options: Partial<ChatOptions> & { template?: string } = {},
): Chat {
  checkKeys('createChat', options, [...CHAT_OPTIONS, 'template']);
  checkCacheChoices('createChat', options);
  const { template, ...chatOptions } = options;
  let source = template ?? null;
  if (source === null) {
    const header = readModelHeader(path);
    source = 'gguf' in header ? chatTemplateSource(header.gguf) : null;
  }
  if (source === null)
    throw new SparqRangeError(`createChat: ${path} has no ${CHAT_TEMPLATE_KEY}; pass options.template`);
  const contextSize = checkNumber(
    'createChat: contextSize',
    renamed('createChat', 'contextSize', options.contextSize, 'context', options.context) ?? lm.config.seqLen,
    contextCheck(lm.config.seqLen),
  );
  return new Chat(lm.engine, lm.model, lm.tokenizer, new ChatTemplate(source, lm.tokenizer), {
    temperature: 0.8,
    kv: lm.kv,
    kt: lm.kt,
    kvLayout: lm.kvLayout,
    productPath: lm.productPath,
    ...chatOptions,
    context: undefined,
    contextSize,
    attention: options.attention ?? lm.resolveAttention(contextSize),
  });
}
