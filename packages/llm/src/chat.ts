/**
 * Chat: a conversation rendered with the model's own chat template (GGUF
 * `tokenizer.chat_template`, a Jinja template run by @huggingface/jinja, the
 * same variables Hugging Face's apply_chat_template passes), decoded turn by
 * turn on one Session whose KV cache holds the whole conversation.
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
import { SparqRangeError, type Engine, type ProductPath, type KVDType, type KVLayout } from '@sparq/core';
import { Template } from '@huggingface/jinja';
import type { AttentionConfig } from './attention-method.ts';
import { Session } from './forward.ts';
import { contextSize } from './generation-limits.ts';
import type { GGUFFile } from './gguf-read.ts';
import type { LanguageModel } from './language-model.ts';
import { readModelHeader } from './model-file.ts';
import { Sampler, type SamplerOptions } from './sampler.ts';
import type { Tokenizer } from './tokenizer.ts';
import type { Model } from './weights.ts';

export const CHAT_TEMPLATE_KEY = 'tokenizer.chat_template';

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

export interface ChatOptions extends SamplerOptions {
  attention: AttentionConfig;
  /** Context size (KV positions) for the whole conversation, at most the model's trained context (the default). */
  context?: number;
  /** Most tokens one reply may have (default: until an end-of-generation token or the context is full). */
  maxReplyTokens?: number;
  /** A system message first in the conversation. */
  system?: string;
  kvDType?: KVDType;
  kvLayout?: KVLayout;
  productPath?: ProductPath;
}

export interface ChatReply {
  /** The reply as text (its tokens' pieces; the end-of-generation token not included). */
  text: string;
  /** The reply's tokens, the end-of-generation token not included. */
  tokens: number[];
  /** Tokens forwarded by this turn's prefill (only the new turn's, unless `reprefilled`). */
  prefilled: number;
  /** The template rewrote earlier turns, so the whole conversation was prefilled again. */
  reprefilled: boolean;
  /** Why the reply ended: an end-of-generation token, maxReplyTokens, or a full context. */
  stop: 'eog' | 'length' | 'context';
  prefillMs: number;
  decodeMs: number;
}

export class Chat {
  readonly session: Session;
  readonly messages: ChatMessage[] = [];
  private readonly tokenizer: Tokenizer;
  private readonly template: ChatTemplate;
  private readonly sampler: Sampler;
  private readonly options: ChatOptions;
  /** The text whose tokens are in the cache, in order. */
  private cachedText = '';

  constructor(engine: Engine, model: Model, tokenizer: Tokenizer, template: ChatTemplate, options: ChatOptions) {
    const context = contextSize(model.config.seqLen, options.context);
    this.session = new Session(engine, model, { capacity: context, maxPrefill: Math.min(context, 512), attention: options.attention, kvDType: options.kvDType, kvLayout: options.kvLayout, productPath: options.productPath });
    this.tokenizer = tokenizer;
    this.template = template;
    this.sampler = new Sampler(model.config.vocabSize, options);
    this.options = options;
    if (options.system !== undefined) this.messages.push({ role: 'system', content: options.system });
  }

  /** Adds a user turn and generates the assistant's reply; `onPiece` hears each piece as it is sampled. */
  send(content: string, onPiece?: (bytes: Uint8Array) => void): ChatReply {
    const { session, tokenizer } = this;
    const rendered = this.template.render([...this.messages, { role: 'user', content }], true);
    const reprefilled = !rendered.startsWith(this.cachedText);
    if (reprefilled) {
      session.reset();
      this.cachedText = '';
    }
    const tokens = chatTokens(tokenizer, rendered.slice(this.cachedText.length), session.pos === 0);
    const room = session.caches[0].capacity - session.pos;
    if (tokens.length >= room) throw new SparqRangeError(`chat: this turn is ${tokens.length} tokens and the context has ${room} positions left (of ${session.caches[0].capacity}); start a new chat or use a larger context`);
    this.messages.push({ role: 'user', content });

    const t0 = performance.now();
    let logits = session.prefill(tokens);
    const t1 = performance.now();
    const reply: number[] = [];
    let stop: ChatReply['stop'];
    for (;;) {
      const next = this.sampler.sample(logits);
      if (tokenizer.isEog(next)) {
        stop = 'eog';
        break;
      }
      reply.push(next);
      onPiece?.(tokenizer.tokenToPiece(next, true));
      if (reply.length === this.options.maxReplyTokens) {
        stop = 'length';
        break;
      }
      // The last position stays free for the end-of-turn token the next turn starts with.
      if (session.pos + 1 >= session.caches[0].capacity) {
        stop = 'context';
        break;
      }
      logits = session.decode(next);
    }
    const t2 = performance.now();
    // A reply cut short was sampled but not forwarded: its last token is not in the cache.
    const cachedReply = stop === 'eog' ? reply : reply.slice(0, -1);
    const text = tokenizer.detokenize(reply, true);
    this.cachedText = rendered + tokenizer.detokenize(cachedReply, true);
    this.messages.push({ role: 'assistant', content: text });
    return { text, tokens: reply, prefilled: tokens.length, reprefilled, stop, prefillMs: t1 - t0, decodeMs: t2 - t1 };
  }
}

/**
 * A Chat on a LanguageModel (openModel / loadModel) of the GGUF file at
 * `path`, with that file's chat template unless `template` gives one, and the
 * model's attention, KV type and INT4 path unless the options say otherwise.
 */
export function createChat(lm: LanguageModel, path: string, options: Partial<ChatOptions> & { template?: string } = {}): Chat {
  let source = options.template ?? null;
  if (source === null) {
    const header = readModelHeader(path);
    source = 'gguf' in header ? chatTemplateSource(header.gguf) : null;
  }
  if (source === null) throw new SparqRangeError(`createChat: ${path} has no ${CHAT_TEMPLATE_KEY}; pass options.template`);
  const context = contextSize(lm.config.seqLen, options.context);
  return new Chat(lm.engine, lm.model, lm.tokenizer, new ChatTemplate(source, lm.tokenizer), {
    temperature: 0.8,
    topp: 0.9,
    seed: BigInt(Date.now()),
    kvDType: lm.kv,
    kvLayout: lm.kvLayout,
    productPath: lm.productPath,
    ...options,
    context,
    attention: options.attention ?? lm.resolveAttention(context),
  });
}
