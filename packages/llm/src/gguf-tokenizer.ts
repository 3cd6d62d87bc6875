/**
 * The tokenizer in GGUF metadata (tokenizer.ggml.*), both ways, with
 * llama.cpp's keys and its defaults for keys a file leaves out (vocab.ts).
 * A vocab-only file (these keys, no tensors) is enough for a Tokenizer.
 */
import { gguf, type GGUFValue } from './gguf-format.ts';
import { GGUFKeys } from './gguf-keys.ts';
import type { GGUFFile } from './gguf-read.ts';
import { preTokenizer } from './pre-tokenize.ts';
import { Tokenizer } from './tokenizer.ts';
import { TOKEN_TYPE, vocabDefaults, type Vocab } from './vocab.ts';

/** Special-token id keys and the Vocab field each fills. */
const ID_KEYS = {
  bos: 'tokenizer.ggml.bos_token_id',
  eos: 'tokenizer.ggml.eos_token_id',
  eot: 'tokenizer.ggml.eot_token_id',
  eom: 'tokenizer.ggml.eom_token_id',
  unk: 'tokenizer.ggml.unknown_token_id',
  pad: 'tokenizer.ggml.padding_token_id',
} as const;

const FLAG_KEYS = {
  addBos: 'tokenizer.ggml.add_bos_token',
  addEos: 'tokenizer.ggml.add_eos_token',
  addSpacePrefix: 'tokenizer.ggml.add_space_prefix',
} as const;

/** The tokenizer's metadata, in llama.cpp's keys. */
export function tokenizerMetadata(t: Tokenizer): [string, GGUFValue][] {
  const v = t.vocab;
  const m: [string, GGUFValue][] = [
    ['tokenizer.ggml.model', gguf.string(v.model)],
    ['tokenizer.ggml.tokens', gguf.array({ itemType: 'string', values: v.tokens })],
    ['tokenizer.ggml.token_type', gguf.array({ itemType: 'i32', values: v.types })],
  ];
  if (v.model === 'llama') m.push(['tokenizer.ggml.scores', gguf.array({ itemType: 'f32', values: v.scores })]);
  else
    m.push(
      ['tokenizer.ggml.pre', gguf.string(v.pre)],
      ['tokenizer.ggml.merges', gguf.array({ itemType: 'string', values: v.merges })],
    );
  for (const [field, key] of Object.entries(ID_KEYS)) {
    const id = v[field as keyof typeof ID_KEYS];
    if (id >= 0) m.push([key, gguf.u32(id)]);
  }
  for (const [field, key] of Object.entries(FLAG_KEYS)) m.push([key, gguf.bool(v[field as keyof typeof FLAG_KEYS])]);
  return m;
}

/** The vocab stored in a GGUF file's metadata, or null when it has none. */
export function vocabFromGGUF(f: GGUFFile, file: string): Vocab | null {
  const keys: GGUFKeys = new GGUFKeys(f, file);
  const tokensValue = keys.get('tokenizer.ggml.tokens');
  if (tokensValue === undefined) return null;
  const model = keys.string('tokenizer.ggml.model');
  if (model !== 'llama' && model !== 'gpt2') {
    keys.fail(
      'tokenizer.ggml.model',
      `${model === undefined ? 'missing' : `"${model}"`}, supported: "llama" (SentencePiece BPE), "gpt2" (byte-level BPE)`,
    );
  }
  const tokens = stringArray(keys, 'tokenizer.ggml.tokens');
  const n = tokens.length;
  const numbers = (key: string, itemType: 'f32' | 'i32') => {
    const v = keys.get(key);
    if (v === undefined) return null;
    if (v.type !== 'array' || v.value.itemType !== itemType || v.value.values.length !== n)
      keys.fail(key, `expected ${n} ${itemType} values, one per token`);
    return v.value.values;
  };
  const scores = (numbers('tokenizer.ggml.scores', 'f32') as Float32Array | null) ?? new Float32Array(n);
  const types =
    (numbers('tokenizer.ggml.token_type', 'i32') as Int32Array | null) ?? new Int32Array(n).fill(TOKEN_TYPE.normal);

  let pre = '';
  let merges: string[] = [];
  if (model === 'gpt2') {
    pre =
      keys.string('tokenizer.ggml.pre') ??
      keys.fail('tokenizer.ggml.pre', 'missing: a gpt2 tokenizer needs its pre-tokenizer');
    try {
      preTokenizer(pre);
    } catch (error) {
      keys.fail('tokenizer.ggml.pre', (error as Error).message);
    }
    if (keys.get('tokenizer.ggml.merges') === undefined)
      keys.fail('tokenizer.ggml.merges', 'missing: a gpt2 tokenizer needs its merges');
    merges = stringArray(keys, 'tokenizer.ggml.merges');
  }

  const v: Vocab = { model, pre, tokens, types, scores, merges, ...vocabDefaults(model) };
  for (const [field, key] of Object.entries(ID_KEYS)) {
    const f = field as keyof typeof ID_KEYS;
    // A default outside the vocab means "none", as in llama.cpp; a stored id must be in range.
    if (keys.get(key) === undefined) {
      if (v[f] >= n) v[f] = -1;
      continue;
    }
    const id = keys.int(key);
    if (id < 0 || id >= n) keys.fail(key, `${id}, expected a token id in [0, ${n - 1}]`);
    v[f] = id;
  }
  for (const [field, key] of Object.entries(FLAG_KEYS)) {
    const flag = keys.get(key);
    if (flag === undefined) continue;
    if (flag.type !== 'bool') keys.fail(key, `a ${flag.type}, expected a bool`);
    v[field as keyof typeof FLAG_KEYS] = flag.value;
  }
  // SentencePiece's whitespace collapsing changes the ids and is not implemented: refuse rather than ignore it.
  const collapse = keys.get('tokenizer.ggml.remove_extra_whitespaces');
  if (collapse?.value === true)
    keys.fail('tokenizer.ggml.remove_extra_whitespaces', 'true is not supported (only false)');
  // llama.cpp's Llama 3 pre-tokenizer always adds BOS unless the file says otherwise (the defaults above are per model).
  if (['llama-bpe', 'llama3', 'llama-v3'].includes(pre) && keys.get(FLAG_KEYS.addBos) === undefined) v.addBos = true;
  return v;
}

/** The tokenizer stored in a GGUF file's metadata, or null when it has none. */
export function tokenizerFromGGUF(f: GGUFFile, file: string): Tokenizer | null {
  const v = vocabFromGGUF(f, file);
  return v && new Tokenizer(v);
}

function stringArray(keys: GGUFKeys, key: string): string[] {
  const v = keys.get(key);
  if (v === undefined || v.type !== 'array' || v.value.itemType !== 'string')
    return keys.fail(key, 'expected an array of strings');
  return v.value.values as string[];
}
