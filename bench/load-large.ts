/**
 * Loading a multi-GB GGUF: load time and peak RSS against the file size.
 *
 *   pnpm exec tsx bench/load-large.ts [FILE] [--layers N]
 *
 * Without FILE (or when it does not exist) it first writes one: a llama of
 * dim 4096, hidden 11008, 32 heads, N layers (default 24, about 2.6 GiB), Q4_0
 * blocks of random nibbles with a small finite scale, vocab 512. Then, in a
 * fresh child process, it loads the file (readModelFile + buildModel, matrices
 * kept as stored), decodes 4 tokens, and reports the child's load time and
 * peak RSS (getrusage) next to the file size: with weights read tensor by
 * tensor into their own buffers and never expanded, RSS stays near the size.
 * The load time is shown next to a plain sequential read of the file in the
 * same process just before (which also warms the page cache).
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Tensor, selectBackend } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import {
  Session,
  argmax,
  buildModel,
  defaultAttention,
  expectedTensors,
  llamaMetadata,
  makeConfig,
  readModelFile,
  smallTokenizer,
  writeGGUFFile,
} from '@sparq/llm';
import { seeded } from '../test/conformance/numeric.ts';

const { values, positionals } = parseArgs({
  options: { layers: { type: 'string' }, child: { type: 'boolean' } },
  allowPositionals: true,
});
const path = positionals[0] ?? join(tmpdir(), 'sparq-large-q4_0.gguf');

if (values.child) {
  // The measured process: nothing but the load and a few decode steps.
  const engine = await selectBackend();
  const boundMs = readThrough(path);
  const t0 = performance.now();
  const model = buildModel(engine, readModelFile(path, engine).loaded);
  const loadMs = performance.now() - t0;
  const session = new Session(engine, model, {
    capacity: 8,
    maxPrefill: 1,
    attention: defaultAttention('dense', model.config.headDim, 8),
  });
  let logits = session.prefill([1]);
  const t1 = performance.now();
  for (let i = 0; i < 4; i++) logits = session.decode(argmax(logits));
  const msPerToken = (performance.now() - t1) / 4;
  process.stdout.write(
    JSON.stringify({
      backend: engine.name,
      weights: model.weightType,
      loadMs,
      boundMs,
      msPerToken,
      peakRssBytes: process.resourceUsage().maxRSS * 1024,
      finite: logits.every(Number.isFinite),
    }),
  );
} else {
  if (!existsSync(path)) writeLarge(path, Number(values.layers ?? 24));
  const child = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), path, '--child'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (child.status !== 0) throw new Error(`child failed with status ${child.status}`);
  const r = JSON.parse(child.stdout);
  const size = statSync(path).size;
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
  console.log(`${path}: ${mib(size)} (${r.weights}), backend ${r.backend}`);
  console.log(
    `load ${(r.loadMs / 1000).toFixed(1)} s (reading the file through one 64 MiB buffer just before: ${(r.boundMs / 1000).toFixed(1)} s); peak RSS ${mib(r.peakRssBytes)} = ${(r.peakRssBytes / size).toFixed(3)} x file size; ${r.msPerToken.toFixed(0)} ms/token; logits finite: ${r.finite}`,
  );
}

/** Milliseconds to read the whole file sequentially into one reused 64 MiB buffer: the I/O bound of a load (and a page-cache warm-up). */
function readThrough(file: string): number {
  const t0 = performance.now();
  const fd = openSync(file, 'r');
  const buffer = new Uint8Array(64 << 20);
  for (let at = 0, n = 1; n > 0; at += n) n = readSync(fd, buffer, 0, buffer.length, at);
  closeSync(fd);
  return performance.now() - t0;
}

/** Writes the random Q4_0 model (holding it in memory once while writing). */
function writeLarge(file: string, nLayers: number): void {
  const tokenizer = smallTokenizer(512 - 259);
  const config = makeConfig(
    { dim: 4096, hiddenDim: 11008, nLayers, nHeads: 32, nKvHeads: 32, vocabSize: tokenizer.vocabSize, seqLen: 256 },
    { normEps: Math.fround(1e-5), ropeTheta: 10000, sharedClassifier: false },
    (field, what) => {
      throw new Error(`${field} ${what}`);
    },
  );
  const random = seeded(5);
  const tensors = expectedTensors(config).map(({ name, shape }) => {
    if (shape.length === 1) return { name, tensor: Tensor.f32(shape, new Array(shape[0]).fill(1)) };
    const t = Tensor.zeros('q4_0', shape);
    const bytes = t.data as Uint8Array;
    const words = new Uint32Array(bytes.buffer, 0, bytes.byteLength >>> 2);
    for (let i = 0; i < words.length; i++) words[i] = (random() * 2 ** 32) >>> 0;
    // Each 18-byte block starts with its f16 scale: 0x1c00 = 2^-8, small and finite.
    for (let at = 0; at < bytes.length; at += 18) [bytes[at], bytes[at + 1]] = [0x00, 0x1c];
    return { name, tensor: t };
  });
  const size = writeGGUFFile(file, llamaMetadata(config, tokenizer, { name: 'large-q4_0', fileType: 'q4_0' }), tensors);
  console.log(`wrote ${file}: ${size} bytes`);
}
