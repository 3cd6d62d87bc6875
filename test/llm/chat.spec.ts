/**
 * Chat: the template rendered by @huggingface/jinja as Hugging Face renders it,
 * multi-turn conversations that prefill only each new turn and leave the KV
 * cache exactly as one prefill of the whole conversation would, and
 * `sparq chat` on piped stdin.
 */
import {
  Chat,
  ChatTemplate,
  Session,
  argmax,
  createChat,
  openModel,
  stops,
  buildModel,
  defaultAttention,
  findTokenizer,
  readModelFile,
} from '@sparq/llm';
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { engines } from '../support/backends.ts';
import { IM_END, IM_START, writeFamilyModel, type FamilySpec } from './family-fixture.ts';

/** ChatML, as Qwen's templates write it (without tools). */
const CHATML =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const spec: FamilySpec = {
  name: 'chat',
  arch: 'qwen2',
  dim: 128,
  nHeads: 4,
  nKvHeads: 2,
  hiddenDim: 256,
  nLayers: 2,
  seqLen: 256,
  ropeTheta: 1e6,
  attnBias: true,
  tied: true,
  type: 'f32',
  seed: 7,
  chatTemplate: CHATML,
};
const engine = engines.find((e) => e.name === 'native') ?? engines[0];
const path = writeFamilyModel(engine, spec);
afterAll(() => rmSync(dirname(path), { recursive: true, force: true }));

function open() {
  const file = readModelFile(path, engine);
  const { tokenizer } = findTokenizer(file);
  const model = buildModel(engine, file.loaded);
  return { model, tokenizer, template: new ChatTemplate(CHATML, tokenizer) };
}

describe('chat template', () => {
  it('renders ChatML as Hugging Face does, with and without the generation prompt', () => {
    const { template } = open();
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ] as const;
    expect(template.render(messages, true)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(template.render(messages, false)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n',
    );
  });
});

describe('Chat', () => {
  it('prefills only each new turn, and its cache is one prefill of the whole conversation', () => {
    const { model, tokenizer, template } = open();
    const attention = defaultAttention('dense', model.config.headDim, 256);
    const chat = new Chat(engine, model, tokenizer, template, {
      attention,
      temperature: 0,
      topp: 0.9,
      seed: 1,
      system: 'Be brief.',
      maxReplyTokens: 6,
    });
    const first = chat.send('Hello there');
    // Turn 1: BOS (the vocab adds it; ChatML does not write it), then the rendered conversation.
    const turn1 = [
      tokenizer.bosId,
      ...tokenizer.encode(template.render(chat.messages.slice(0, 2), true), { addSpecial: false, parseSpecial: true }),
    ];
    expect(turn1).toContain(IM_START);
    expect(first.prefilled).toBe(turn1.length);
    const afterFirst = chat.session.pos;
    const second = chat.send('And again');
    chat.messages.pop(); // the conversation up to the second user turn, as turn 2 rendered it
    expect(second.reprefilled).toBe(false);
    // Turn 2 prefills the rest of reply 1's turn (the token that ended it, or its text when cut short) and the new user turn only.
    const cachedReply1 = first.stop === 'eog' ? first.tokens : first.tokens.slice(0, -1);
    const cachedText = template.render(chat.messages.slice(0, 2), true) + tokenizer.detokenize(cachedReply1, true);
    const rendered = template.render(chat.messages, true);
    expect(rendered.startsWith(cachedText)).toBe(true);
    expect(rendered.endsWith('<|im_end|>\n<|im_start|>user\nAnd again<|im_end|>\n<|im_start|>assistant\n')).toBe(true);
    const turn2 = tokenizer.encode(rendered.slice(cachedText.length), { addSpecial: false, parseSpecial: true });
    expect(turn2.filter((t) => t === IM_START)).toHaveLength(2);
    expect(afterFirst).toBe(turn1.length + cachedReply1.length);
    expect(second.prefilled).toBe(turn2.length);

    // The same tokens in one fresh prefill give the same greedy reply.
    const fresh = new Session(engine, model, { capacity: 256, maxPrefill: 256, attention });
    let logits = fresh.prefill([...turn1, ...cachedReply1, ...turn2]);
    const replay: number[] = [];
    for (let i = 0; i < second.tokens.length; i++) {
      replay.push(argmax(logits));
      logits = fresh.decode(replay[i]);
    }
    expect(replay).toEqual(second.tokens);
    expect(chat.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('a template that rewrites earlier turns prefills the whole conversation again', () => {
    const { model, tokenizer } = open();
    // Drops every assistant message but the last: earlier replies vanish from the rendering.
    const forgetful = new ChatTemplate(
      CHATML.replace(
        '{% for message in messages %}',
        "{% for message in messages %}{% if message['role'] != 'assistant' %}",
      ).replace('{% endfor %}', '{% endif %}{% endfor %}'),
      tokenizer,
    );
    const chat = new Chat(engine, model, tokenizer, forgetful, {
      attention: defaultAttention('dense', model.config.headDim, 256),
      temperature: 0,
      topp: 0.9,
      seed: 1,
      maxReplyTokens: 3,
    });
    chat.send('one');
    const second = chat.send('two');
    expect(second.reprefilled).toBe(true);
    expect(chat.session.pos).toBe(second.prefilled + second.tokens.length - (second.stop === 'eog' ? 0 : 1));
  });

  it('a turn longer than the context left is a clear error, and the conversation is unchanged', () => {
    const { model, tokenizer, template } = open();
    const chat = new Chat(engine, model, tokenizer, template, {
      attention: defaultAttention('dense', model.config.headDim, 32),
      context: 32,
      temperature: 0,
      topp: 0.9,
      seed: 1,
    });
    expect(() => chat.send('x'.repeat(200))).toThrow(/context has 32 positions left \(of 32\)/);
    expect(chat.messages).toEqual([]);
    expect(
      () =>
        new Chat(engine, model, tokenizer, template, {
          attention: defaultAttention('dense', model.config.headDim, 32),
          context: 257,
          temperature: 0,
          topp: 0.9,
          seed: 1,
        }),
    ).toThrow(/context 257, expected an integer in \[1, 256\] \(the model's trained context\)/);
  });
});

describe('createChat (library API on a LanguageModel)', () => {
  it("uses the file's chat template and the model's settings", () => {
    const lm = openModel(engine, path);
    const chat = createChat(lm, path, { temperature: 0, maxReplyTokens: 3, context: 64, system: 'Be brief.' });
    const reply = chat.send('Hi');
    expect(reply.prefilled).toBeGreaterThan(10);
    expect(chat.session.caches[0].capacity).toBe(64);
    expect(chat.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant']);
  });
});

describe('stop rules', () => {
  it("GGUF models stop on end-of-generation tokens, not BOS; llama2.c's rule stops on BOS too", () => {
    const { tokenizer } = open();
    expect(stops(tokenizer, tokenizer.eosId, 'eog')).toBe(true);
    expect(stops(tokenizer, IM_END, 'eog')).toBe(true);
    expect(stops(tokenizer, tokenizer.bosId, 'eog')).toBe(false);
    expect(stops(tokenizer, tokenizer.bosId, 'bos')).toBe(true);
    expect(stops(tokenizer, tokenizer.eosId, 'bos')).toBe(true);
    expect(stops(tokenizer, 300, 'bos')).toBe(false);
    expect(stops(tokenizer, 300, 'eog')).toBe(false);
  });
});

describe('sparq chat', () => {
  it('reads turns from piped stdin, prints one reply line each, prefills only the new turn', () => {
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(root, 'packages/cli/src/main.ts'),
        'chat',
        '--model',
        path,
        '--system',
        'Be brief.',
        '--temperature',
        '0',
        '--max-tokens',
        '4',
        '--attention',
        'sparq',
      ],
      {
        cwd: root,
        input: 'Hello\n\nAnd again\n',
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toHaveLength(3); // two replies, each ended by a newline
    const prefills = [...r.stderr.matchAll(/\[turn (\d): prefill (\d+) tokens, /g)].map((m) => Number(m[2]));
    expect(prefills).toHaveLength(2);
    expect(prefills[1]).toBeLessThan(prefills[0]);
    expect(r.stderr).toMatch(/attention sparq r=\d+ k=\d+ l=\d+/);
  });

  it('refuses a context past the trained one, naming it', () => {
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', join(root, 'packages/cli/src/main.ts'), 'chat', '--model', path, '--ctx', '100000'],
      { cwd: root, input: '', encoding: 'utf8', timeout: 60_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--ctx 100000, expected an integer in [1, 256] (the model's trained context)");
  });
});
