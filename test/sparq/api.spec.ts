/**
 * The public API of `sparq` as docs/api.md describes it: the top level gives
 * the curated names and nothing else, `sparq/llm` and `sparq/core` give the
 * rest, and every entry point a user calls rejects a mistyped option with the
 * same message, naming the entry point, the key and the choices, before any
 * work (the CLI says the same of its flags).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as sparq from 'sparq';
import * as core from 'sparq/core';
import * as llm from 'sparq/llm';
import { afterAll, describe, expect, it } from 'vitest';
import { referenceEngine } from '../support/backends.ts';
import { ROOT, runSparq } from '../llm/support.ts';

const {
  Chat,
  ChatTemplate,
  LanguageModel,
  SparqRangeError,
  TextSession,
  buildModel,
  createChat,
  defaultAttention,
  generate,
  loadModel,
  openModel,
} = sparq;

/** The names docs/api.md lists under "The names", in backticks, one group per bold heading. */
function documentedNames(): string[] {
  const text = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
  const section = text.slice(text.indexOf('## The names'), text.indexOf('## What moved'));
  return [...section.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]);
}

describe('the top level is the curated set of docs/api.md', () => {
  it('every value sparq exports is listed there, and every listed name that is a value is exported', () => {
    const listed = new Set(documentedNames());
    const values = Object.keys(sparq);
    expect(values.filter((name) => !listed.has(name))).toEqual([]);
    const fromPackages = new Set([...Object.keys(core), ...Object.keys(llm), ...values]);
    // A listed name that is a value somewhere must be a value of the top level (types have no runtime name).
    expect([...listed].filter((name) => fromPackages.has(name) && !values.includes(name))).toEqual([]);
    expect(values.length).toBeLessThan(100);
  });

  it('what left the top level is in sparq/llm and sparq/core, with both backends registered', async () => {
    for (const name of ['validateSparq', 'allocAligned', 'storageView']) {
      expect(name in sparq).toBe(false);
      expect(core).toHaveProperty(name);
    }
    for (const name of [
      'randomLlama',
      'writeRandomGGUF',
      'runSweep',
      'checkModelOptions',
      'checkKeys',
      'findTokenizer',
    ])
      expect(llm).toHaveProperty(name);
    expect('randomLlama' in sparq).toBe(false);
    await core.loadBackends();
    expect(
      core
        .backendReport()
        .map((b) => b.name)
        .sort(),
    ).toEqual(['native', 'reference']);
    expect(llm.Tokenizer).toBe(sparq.Tokenizer);
  });
});

describe('a mistyped option is the same error at every entry point', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sparq-api-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const small = llm.randomLlama({ dim: 32, hiddenDim: 64, nLayers: 1, nHeads: 4, nKvHeads: 2, seqLen: 32, seed: 5 });
  const path = llm.writeRandomGGUF(referenceEngine, small, 'f32', join(dir, 'small.gguf'));
  const model = buildModel(referenceEngine, small.loaded);
  const lm = new LanguageModel(referenceEngine, model, small.tokenizer);
  const attention = defaultAttention('dense', small.loaded.config.headDim, 32);
  const template = new ChatTemplate("{% for m in messages %}{{ m['content'] }}{% endfor %}", small.tokenizer);
  const session = lm.createSession({ contextSize: 16 });

  /**
   * Each entry point, called with `extra` added to valid options; `kv`: whether it takes a KV type
   * (session.generate does not: its session has the cache).
   */
  const entries: { where: string; kv: boolean; call: (extra: object) => unknown }[] = [
    { where: 'loadModel', kv: true, call: (extra) => loadModel(path, { backend: 'reference', ...extra }) },
    { where: 'openModel', kv: true, call: (extra) => openModel(referenceEngine, path, { ...extra }) },
    { where: 'createSession', kv: true, call: (extra) => lm.createSession({ contextSize: 16, ...extra }) },
    {
      where: 'TextSession',
      kv: true,
      call: (extra) =>
        new TextSession(referenceEngine, model, small.tokenizer, { contextSize: 16, attention, ...extra }),
    },
    { where: 'generate', kv: false, call: (extra) => session.generate('a', { maxTokens: 1, ...extra }) },
    {
      where: 'generate',
      kv: true,
      call: (extra) =>
        generate(referenceEngine, model, small.tokenizer, 'a', {
          steps: 4,
          temperature: 0,
          seed: 1,
          attention,
          ...extra,
        }),
    },
    {
      where: 'Chat',
      kv: true,
      call: (extra) =>
        new Chat(referenceEngine, model, small.tokenizer, template, { attention, contextSize: 16, ...extra }),
    },
    { where: 'createChat', kv: true, call: (extra) => createChat(lm, path, { template: '{{ 1 }}', ...extra }) },
  ];
  const entry = (where: string) => entries.find((e) => e.where === where)!;

  /** What `call` threw (awaited when it returns a promise); fails the test when it returned. */
  async function thrown(call: () => unknown): Promise<Error> {
    try {
      await call();
    } catch (error) {
      return error as Error;
    }
    throw new Error('expected an error, none was thrown');
  }

  it("an unknown key: '<entry>: unknown option 'kvDtype', expected one of ...' (a SparqRangeError)", async () => {
    for (const { where, call } of entries) {
      const error = await thrown(() => call({ kvDtype: 'f32' }));
      expect(error, where).toBeInstanceOf(SparqRangeError);
      expect(error.message).toMatch(
        new RegExp(`^${where}: unknown option 'kvDtype', expected one of [a-zA-Z]+(, [a-zA-Z]+)+$`),
      );
    }
  });

  it('a KV type outside the choices: the CLI words, with the entry point for the flag', async () => {
    const cli = runSparq('generate', '--model', path, '--kv', 'q8').stderr;
    expect(cli).toContain('--kv q8, expected one of f32, f16, q8_0, q4_0, or K/V of them');
    const split = runSparq('generate', '--model', path, '--kv', 'q8_0/q8').stderr;
    expect(split).toContain('--kv q8_0/q8: the V type q8, expected one of f32, f16, q8_0, q4_0');
    for (const { where, call } of entries.filter((e) => e.kv)) {
      const error = await thrown(() => call({ kv: 'q8' }));
      expect(error, where).toBeInstanceOf(SparqRangeError);
      expect(error.message).toBe(`${where}: kv q8, expected one of f32, f16, q8_0, q4_0, or { k, v } of them`);
      const side = await thrown(() => call({ kv: { k: 'q8', v: 'f16' } }));
      expect(side.message).toBe(`${where}: kv.k q8, expected one of f32, f16, q8_0, q4_0, or { k, v } of them`);
    }
  });

  it('a sampling value out of range: generate and Chat say so at once, not at the first token', async () => {
    expect((await thrown(() => entry('generate').call({ temperature: -1 }))).message).toBe(
      'generate: temperature -1, expected a finite number >= 0',
    );
    expect((await thrown(() => entry('Chat').call({ temperature: -1 }))).message).toBe(
      'Chat: temperature -1, expected a finite number >= 0',
    );
    expect((await thrown(() => entry('Chat').call({ topP: NaN }))).message).toBe(
      'Chat: topP NaN, expected a finite number (0..1)',
    );
  });
});
