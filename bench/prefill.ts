/**
 * Prefill tokens/s, and with --decode N decode tokens/s, sparq (native) against llama.cpp
 * (node-llama-cpp) on the same GGUF file and the same thread count, runs interleaved:
 *   pnpm bench:prefill [--types q8_0,q4_0,q6_k,q4_k_m,f16,f32] [--threads 1,2] [--tokens 512] [--layers 1] [--decode 0] [--reps 3] [--product int8|dequant] [--cpu]
 *
 * --types takes any GGUF file type, or q4_k_m: a Q4_K_M-like mix (@sparq/llm's q4kmLike: Q6_K for
 * attn_v, ffn_down and the classifier, Q4_K for the other matrices, as llama.cpp's Q4_K_M).
 * The file is a random-weight llama-shaped model written here (dim 2048, FFN 5632, 16 heads of
 * 128, vocab 512 with ../shared/models/tok512.bin as its tokenizer), so the prefill time is the
 * layers' weight products plus a small causal attention and a small classifier. Both engines
 * forward the same `--tokens` random token ids from an empty context in one batch (sparq:
 * Session.prefill with maxPrefill = tokens; llama.cpp: batch size min(512, tokens), through `sparq
 * bench`'s runner, packages/cli/src/bench/llama-cpp.ts, which runs it with flash attention on and off
 * and keeps the faster). Each repetition runs sparq then llama.cpp; the table gives each side's best
 * repetition and their ratio. sparq's weight
 * products take `--product` (ProductPath, default 'int8': 8-bit activations against the block
 * weights' integer codes, as llama.cpp computes them; f16 and f32 weights are f32 products either way).
 *
 * Both engines skip work in the last layer, whose output feeds only the classifier's last row:
 * llama.cpp forwards its FFN for the output row alone (its graph's inp_out_ids), sparq everything
 * past the K and V projections (Session.prefill). With `--layers 1` that layer is the whole
 * model, so the rows time mostly those skips (sparq's K and V products against llama.cpp's Q, K, V
 * and wo); `--layers 2` or more weigh the full layers' products as a deeper model does.
 *
 * --decode N: after each prefill, both engines decode N more of the random tokens one at a time
 * (dense attention; llama.cpp samples each next token greedily from its logits, sparq computes
 * them too) and the table adds decode tokens/s. At a short context decode reads mostly the
 * weights: `--tokens 64 --decode 32 --layers 8` times the weight matvecs of a file several
 * times the L3 (136 MB for Q2_K, 178 MB for Q3_K, 233 MB for Q4_K).
 *
 * --cpu times each side by the process's CPU time (user + system, every thread) instead of the wall
 * clock: steadier on a machine shared with other jobs, but it counts every thread's time, spinning
 * included, so it means tokens per CPU-second; compare with --threads 1.
 */
import { Tensor, loadBackends, type BlockDType, type ProductPath } from '@sparq/core';
import '@sparq/native';
import '@sparq/reference';
import {
  NO_ROPE_SCALING,
  Session,
  buildModel,
  expectedTensors,
  q4kmLike,
  readModelFile,
  readTokenizerFile,
  writeRandomGGUF,
  type GGUFFileType,
  type LoadedModel,
  type ModelConfig,
} from '@sparq/llm';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLlamaCpp } from '../packages/cli/src/bench/llama-cpp.ts';
import { loadAddon } from '../packages/native/lib/addon.ts';
import { attentionAddon } from '../packages/native/lib/attention-ops.ts';

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const types = option('types', 'q8_0,q4_0,q6_k,q4_k_m,f16,f32').split(',') as (GGUFFileType | 'q4_k_m')[];
const threadCounts = option('threads', '1,2').split(',').map(Number);
const TOKENS = Number(option('tokens', '512'));
const LAYERS = Number(option('layers', '1'));
const DECODE = Number(option('decode', '0'));
const REPS = Number(option('reps', '3'));
const PRODUCT = option('product', 'int8') as ProductPath;
if (PRODUCT !== 'int8' && PRODUCT !== 'dequant') throw new Error(`--product ${PRODUCT}, expected int8 or dequant`);
/** Milliseconds of the process's CPU time (--cpu) or of the wall clock. */
const clock = args.includes('--cpu')
  ? () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    }
  : () => performance.now();
const TOKENIZER = join(import.meta.dirname, '..', '..', 'shared', 'models', 'tok512.bin');
if (!existsSync(TOKENIZER)) throw new Error(`bench/prefill.ts needs ${TOKENIZER} (the shared models directory)`);

const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native');
if (!engine) throw new Error('bench/prefill.ts needs the native backend (pnpm build:native)');
const reference = available.find((e) => e.name === 'reference')!;
const threads = attentionAddon(loadAddon());

const config: ModelConfig = {
  dim: 2048,
  hiddenDim: 5632,
  nLayers: LAYERS,
  nHeads: 16,
  nKvHeads: 16,
  vocabSize: 512,
  seqLen: 2 * TOKENS + DECODE,
  headDim: 128,
  kvDim: 2048,
  normEps: 1e-5,
  ropeTheta: 10000,
  sharedClassifier: false,
  arch: 'llama',
  qDim: 2048,
  ropeScaling: NO_ROPE_SCALING,
  attnBias: false,
  ropeFreqs: false,
};

/** A random-weight model: N(0, 0.02)-ish uniform matrices, unit norms. */
function randomModel(): LoadedModel {
  let s = 2024;
  const random = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.07;
  const tensors = new Map<string, Tensor>();
  for (const { name, shape } of expectedTensors(config)) {
    const size = shape.reduce((a, b) => a * b, 1);
    tensors.set(
      name,
      Tensor.f32(
        shape,
        shape.length === 1 ? new Float32Array(size).fill(1) : Float32Array.from({ length: size }, random),
      ),
    );
  }
  return { config, tensors, format: 'random llama-shaped' };
}

const dir = mkdtempSync(join(tmpdir(), 'sparq-prefill-'));
let seed = 7;
const tokens = Array.from(
  { length: TOKENS + DECODE },
  () => 3 + ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % 500),
);
const loaded = randomModel();
const table: Record<string, string>[] = [];
try {
  for (const type of types) {
    const file = join(dir, `llama-${type}.gguf`);
    const tokenizer = readTokenizerFile(TOKENIZER, config.vocabSize);
    const recipe = type === 'q4_k_m' ? q4kmLike : type;
    // Native quantizes the types it has; the reference the others (the K-quants).
    writeRandomGGUF(
      typeof recipe === 'string' && engine.has('quantize', recipe as BlockDType) ? engine : reference,
      { loaded, tokenizer },
      recipe,
      file,
    );
    const model = buildModel(engine, readModelFile(file, engine).loaded);
    const llamaCpp = await openLlamaCpp(file, clock);
    if ('missing' in llamaCpp) throw new Error(`bench/prefill.ts needs llama.cpp: ${llamaCpp.missing}`);
    for (const t of threadCounts) {
      threads.attnSetThreads(t);
      let sparqBest = Infinity;
      let llamaBest = Infinity;
      let sparqStep = Infinity; // ms per decode step
      let llamaStep = Infinity;
      for (let rep = 0; rep < REPS; rep++) {
        const session = new Session(engine, model, {
          capacity: 2 * TOKENS + DECODE,
          maxPrefill: TOKENS,
          attention: { method: 'dense', r: 0, k: 0, l: 0, reallocate: false },
          productPath: PRODUCT,
        });
        const t0 = clock();
        session.prefill(tokens.slice(0, TOKENS));
        sparqBest = Math.min(sparqBest, clock() - t0);
        if (DECODE > 0) {
          const t1 = clock();
          for (let i = 0; i < DECODE; i++) session.decode(tokens[TOKENS + i]);
          sparqStep = Math.min(sparqStep, (clock() - t1) / DECODE);
        }
        // The faster of flash attention on and off, for each of prefill and decode.
        const llama = await llamaCpp.run(tokens, TOKENS, DECODE, t);
        llamaBest = Math.min(llamaBest, llama.prefillMs);
        if (DECODE > 0) llamaStep = Math.min(llamaStep, llama.decodeMs[0]);
      }
      const sparqTps = (1000 * TOKENS) / sparqBest;
      const llamaTps = (1000 * TOKENS) / llamaBest;
      const row: Record<string, string> = {
        type,
        threads: String(t),
        tokens: String(TOKENS),
        'sparq tok/s': sparqTps.toFixed(0),
        'llama.cpp tok/s': llamaTps.toFixed(0),
        'sparq / llama.cpp': (sparqTps / llamaTps).toFixed(2),
      };
      if (DECODE > 0) {
        row['sparq decode tok/s'] = (1000 / sparqStep).toFixed(1);
        row['llama.cpp decode tok/s'] = (1000 / llamaStep).toFixed(1);
        row['decode sparq / llama.cpp'] = (llamaStep / sparqStep).toFixed(2);
      }
      table.push(row);
      console.log(JSON.stringify(table[table.length - 1]));
    }
    await llamaCpp.dispose();
    rmSync(file);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  `native ${loadAddon().info().kernel}, product ${PRODUCT}, ${args.includes('--cpu') ? 'CPU time' : 'wall clock'}; model: ${LAYERS} layer(s), ${DECODE} decode steps after the prompt, dim ${config.dim}, FFN ${config.hiddenDim}, vocab ${config.vocabSize}; best of ${REPS} interleaved runs`,
);
console.table(table);
