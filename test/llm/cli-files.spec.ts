/**
 * `sparq convert --type` and `sparq inspect` as a user runs them (spawned),
 * on a generated model: a K-quant conversion read back by inspect (text and
 * JSON), and a conversion that fails leaving nothing behind.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { randomLlama, writeRandomGGUF } from '@sparq/llm';
import { referenceEngine } from '../support/backends.ts';
import { runSparq as sparq } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'sparq-cli-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sparq convert --type and sparq inspect', () => {
  const source = writeRandomGGUF(referenceEngine, randomLlama({ nLayers: 1, seed: 3 }), 'f32', join(dir, 'f32.gguf'));

  it('converts every matrix to the type asked (Q4_K, by the reference quantizer where the backend lacks it), and inspect lists it (text and JSON)', () => {
    const out = join(dir, 'q4_k.gguf');
    const c = sparq('convert', '--model', source, '--out', out, '--type', 'q4_k');
    expect(c.stderr).toContain('wrote');
    expect(c.code).toBe(0);
    const text = sparq('inspect', out);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/GGUF v3, \d+ metadata keys, 12 tensors, alignment 32/);
    expect(text.stdout).toMatch(/general\.file_type\s+u32\s+14/);
    expect(text.stdout).toMatch(/tokenizer\.ggml\.tokens\s+array\s+\[string x 288\] "<unk>", "<s>", "<\/s>", "<0x00>"/);
    // blk.0.attn_q.weight: 256 x 256 Q4_K = 256 blocks of 144 bytes.
    expect(text.stdout).toMatch(/blk\.0\.attn_q\.weight\s+Q4_K\s+\[256, 256\]\s+36864\s+\d+/);
    expect(text.stdout).toMatch(/blk\.0\.attn_norm\.weight\s+F32\s+\[256\]\s+1024/);
    const json = JSON.parse(sparq('inspect', out, '--json').stdout);
    expect(json.version).toBe(3);
    expect(json.metadata['llama.block_count']).toEqual({ type: 'u32', value: 1 });
    expect(json.metadata['tokenizer.ggml.tokens'].value.length).toBe(288);
    const types = new Set(json.tensors.map((t: { type: string; ne: number[] }) => `${t.ne.length}:${t.type}`));
    expect([...types].sort()).toEqual(['1:F32', '2:Q4_K']);
  });

  it('fails with exit 1 and leaves nothing behind when the output cannot be written; bad usage exits 2', () => {
    const out = join(dir, 'missing-dir', 'x.gguf');
    const c = sparq('convert', '--model', source, '--out', out, '--type', 'f16');
    expect(c.code).toBe(1);
    expect(c.stderr).toContain(`the folder ${dirname(out)} does not exist`);
    expect(existsSync(dirname(out))).toBe(false);
    expect(readdirSync(dir).filter((f) => f.includes('partial'))).toEqual([]);
    const bad = sparq('convert', '--model', source, '--out', join(dir, 'y.gguf'), '--type', 'q9_9');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      '--type q9_9, expected one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs',
    );
    expect(sparq('inspect').code).toBe(2);
    const notModel = sparq('inspect', source.replace('f32.gguf', 'nothing.gguf'));
    expect(notModel.code).toBe(1);
  });
});
