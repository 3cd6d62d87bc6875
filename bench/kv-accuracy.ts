/**
 * What the KV cache's row type costs stories260K (issues 13 and 24; the numbers of
 * docs/kv-cache.md, "Why q4_0 rows double stories260K's perplexity"). Three parts:
 *
 * logits  f16 against f32 rows: for dense and SparQ, the f32 run decodes greedily from BOS, the
 *         f16 run is fed the same tokens (teacher forcing) and its logits are compared step by
 *         step, then it decodes greedily on its own; the first step where its tokens differ.
 * quant   q8_0 / q4_0 rows, `sparq eval`'s dense perplexity protocol (windows of 512). q8_0 and
 *         q4_0 need head dims that are multiples of 32, so the model runs with its heads of 8
 *         zero-padded to 32 (llm's pad-heads.ts: the same function). Besides the real cache types,
 *         K and V rows go through quantize / dequantize round trips separately (stored in an f32
 *         cache: what a q4_0 cache's attention reads, as dequantize decodes it), whole model and
 *         one layer at a time; and two mitigations as evidence, q8_0 K with q4_0 V (llama.cpp's
 *         -ctk q8_0 -ctv q4_0) and q4_0 K rotated by a Walsh-Hadamard transform of the head.
 *         Then, on the first window's f32 run, per layer: the K channels' kurtosis (3 for a
 *         Gaussian) and the ratio of the largest channel RMS to the median one, each type's
 *         relative row error for K and V, and what q4_0 K does to the attention itself (logit
 *         error, and the total variation distance between the attention weights with exact and
 *         q4_0 keys).
 * llama   llama.cpp (node-llama-cpp's prebuilt CPU build, one thread) on the same padded model
 *         written as GGUF (f32 weights): perplexity over the same windows with -ctk / -ctv f32,
 *         f16, q8_0, q4_0 and mixed (flash attention on: llama.cpp needs it for a quantized V).
 *         llama.cpp refuses q8_0 / q4_0 caches on the unpadded model (head dim 8).
 *
 *   pnpm exec tsx bench/kv-accuracy.ts [--part logits|quant|llama] [--windows N] [--steps N] [--model FILE]
 * Default: every part, 4 windows, 200 steps, ../shared/models/stories260K.bin and
 * ../shared/data/tinystories_val.txt.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  Engine,
  KVCache,
  Tensor,
  loadBackends,
  type AttentionMethod,
  type AttentionOptions,
  type BlockDType,
  type KVTypeChoice,
  kvLabel,
} from '@sparq/core';
import '@sparq/native';
import {
  PERPLEXITY_PROTOCOL,
  Session,
  argmax,
  buildModel,
  defaultAttention,
  denseNll,
  encodePieces,
  findTokenizer,
  ggufTensors,
  kurtosis,
  llamaMetadata,
  padHeads,
  readModelFile,
  summarize,
  textPieces,
  tokenNll,
  windowsOf,
  writeGGUFFile,
  type Model,
  type PerplexityProtocol,
} from '@sparq/llm';

const { values } = parseArgs({
  options: {
    part: { type: 'string' },
    windows: { type: 'string' },
    steps: { type: 'string' },
    model: { type: 'string' },
  },
});
const shared = (p: string) => new URL(`../../shared/${p}`, import.meta.url).pathname;
const modelPath = values.model ?? shared('models/stories260K.bin');
const PARTS = ['logits', 'quant', 'llama'];
if (values.part !== undefined && !PARTS.includes(values.part))
  throw new Error(`--part ${values.part}, expected one of ${PARTS.join(', ')}`);
const parts = values.part ? [values.part] : PARTS;
const protocol: PerplexityProtocol = { ...PERPLEXITY_PROTOCOL, windows: Number(values.windows ?? 4) };
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native') ?? available[0];
const file = readModelFile(modelPath, engine);
const model = buildModel(engine, file.loaded);
const { tokenizer } = findTokenizer(file);
const PADDED_HEAD = 32;
const padded = padHeads(file.loaded, PADDED_HEAD);
const pct = (x: number, base: number) => `${x >= base ? '+' : ''}${((100 * (x - base)) / base).toFixed(2)}%`;

// ---- logits: f16 against f32 rows ----

/** Greedy decode from BOS, or teacher-forced on `forced`; the logits of every step. */
function greedy(
  method: AttentionMethod,
  dtype: 'f32' | 'f16',
  steps: number,
  forced?: number[],
): { tokens: number[]; logits: Float32Array[] } {
  const context = Math.min(model.config.seqLen, steps + 1);
  const session = new Session(engine, model, {
    capacity: context,
    maxPrefill: 1,
    attention: defaultAttention(method, model.config.headDim, context),
    kvDType: dtype,
  });
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let l = session.prefill([1]); // BOS
  for (let i = 0; i < steps; i++) {
    logits.push(l.slice());
    const next = forced ? forced[i] : argmax(l);
    tokens.push(next);
    if (i + 1 < steps) l = session.decode(next);
  }
  return { tokens, logits };
}

function logitsPart(): void {
  const steps = Number(values.steps ?? 200);
  const c = model.config;
  console.log(
    `\n# logits: f16 vs f32 KV, ${steps} greedy steps, backend ${engine.name}; dim ${c.dim}, head dim ${c.headDim}, ${c.nLayers} layers`,
  );
  console.log('method  max|dlogit|  mean|dlogit|  logit range  argmax agree (forced)  free-run tokens equal');
  for (const method of ['dense', 'sparq'] as const) {
    const a = greedy(method, 'f32', steps);
    const b = greedy(method, 'f16', steps, a.tokens);
    const free = greedy(method, 'f16', steps);
    let max = 0,
      sum = 0,
      count = 0,
      agree = 0,
      lo = Infinity,
      hi = -Infinity;
    a.logits.forEach((la, i) => {
      const lb = b.logits[i];
      for (let j = 0; j < la.length; j++) {
        const d = Math.abs(la[j] - lb[j]);
        max = Math.max(max, d);
        sum += d;
        count++;
        lo = Math.min(lo, la[j]);
        hi = Math.max(hi, la[j]);
      }
      agree += argmax(la) === argmax(lb) ? 1 : 0;
    });
    const diverge = free.tokens.findIndex((t, i) => t !== a.tokens[i]);
    console.log(
      `${method.padEnd(6)} ${max.toExponential(2).padStart(11)} ${(sum / count).toExponential(2).padStart(13)} ${`${lo.toFixed(1)}..${hi.toFixed(1)}`.padStart(12)} ${`${agree}/${steps}`.padStart(22)} ${(diverge < 0 ? `all ${steps}` : `first differs at step ${diverge}`).padStart(22)}`,
    );
  }
}

// ---- quant: q8_0 / q4_0 rows, K and V apart ----

/** A change to K or V rows before they are stored: (N, nKv, d) -> a new (N, nKv, d). */
type RowMap = (x: Tensor<'f32'>) => Tensor<'f32'>;

/** x through a `type` block and back: what a cache of that type gives attention for x. */
const roundTrip =
  (type: BlockDType): RowMap =>
  (x) => {
    const blocks = Tensor.zeros(type, x.shape);
    engine.quantize(blocks, x);
    const out = Tensor.zeros('f32', x.shape);
    engine.dequantize(out, blocks);
    return out;
  };

/**
 * The orthonormal Walsh-Hadamard transform of every head row of x (length d, a power of two),
 * its own inverse. Rotating q and k alike keeps every q . k and spreads a large channel over
 * all components, so a block's scale no longer follows one outlier. `rotated(map)` stores
 * H map(H k): attention over it is attention over map's rows of the rotated keys.
 */
function hadamard(x: Tensor<'f32'>): Tensor<'f32'> {
  const d = x.shape[x.rank - 1];
  const out = Tensor.f32(x.shape, x.data.subarray(x.offset, x.offset + x.size));
  for (let row = 0; row < out.size; row += d) {
    for (let h = 1; h < d; h *= 2) {
      for (let i = row; i < row + d; i += 2 * h) {
        for (let j = i; j < i + h; j++) {
          const a = out.data[j];
          const b = out.data[j + h];
          out.data[j] = a + b;
          out.data[j + h] = a - b;
        }
      }
    }
    for (let i = row; i < row + d; i++) out.data[i] /= Math.sqrt(d);
  }
  return out;
}
const rotated =
  (map: RowMap): RowMap =>
  (x) =>
    hadamard(map(hadamard(x)));

/**
 * An engine that changes K and V rows of chosen layers before they are stored. Layers are
 * told apart by the order their caches first append in (a session appends layer 0 first).
 */
class RowMapEngine extends Engine {
  private readonly layerOf = new Map<KVCache, number>();
  private readonly nLayers: number;
  private readonly maps: { k?: RowMap; v?: RowMap; layers?: readonly number[] };

  constructor(base: Engine, nLayers: number, maps: { k?: RowMap; v?: RowMap; layers?: readonly number[] }) {
    super(base.backend);
    this.nLayers = nLayers;
    this.maps = maps;
  }

  protected layer(cache: KVCache): number {
    if (!this.layerOf.has(cache)) this.layerOf.set(cache, this.layerOf.size % this.nLayers);
    return this.layerOf.get(cache)!;
  }

  override kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void {
    const l = this.layer(cache);
    const on = this.maps.layers?.includes(l) ?? true;
    super.kvAppend(cache, seq, on && this.maps.k ? this.maps.k(k) : k, on && this.maps.v ? this.maps.v(v) : v);
  }
}

/** Records each layer's q, k and v of the first prefill (f32), for the statistics. */
class RecordingEngine extends RowMapEngine {
  readonly recorded: { q: Tensor<'f32'>; k: Tensor<'f32'>; v: Tensor<'f32'> }[] = [];
  private pending: { k: Tensor<'f32'>; v: Tensor<'f32'> } | null = null;
  private readonly copy = (x: Tensor<'f32'>) => Tensor.f32(x.shape, x.data.subarray(x.offset, x.offset + x.size));

  override kvAppend(cache: KVCache, seq: number, k: Tensor<'f32'>, v: Tensor<'f32'>): void {
    if (this.recorded.length < padded.config.nLayers) this.pending = { k: this.copy(k), v: this.copy(v) };
    super.kvAppend(cache, seq, k, v);
  }

  override attentionPrefill(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    seq: number,
    options?: AttentionOptions,
  ): void {
    if (this.pending) this.recorded.push({ q: this.copy(q), ...this.pending });
    this.pending = null;
    super.attentionPrefill(out, q, cache, seq, options);
  }
}

/** ||a - b|| / ||a|| over whole tensors. */
function relativeError(a: Tensor<'f32'>, b: Tensor<'f32'>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < a.size; i++) {
    num += (a.data[a.offset + i] - b.data[b.offset + i]) ** 2;
    den += a.data[a.offset + i] ** 2;
  }
  return Math.sqrt(num / den);
}

/**
 * Causal attention of q (N, H, d) over keys k and k2 (N, nKv, d), with the real components
 * [0, from) of each head: the mean |logit difference| and the mean total variation distance
 * between the two attention distributions, over every query position and head; and the scale of
 * the exact logits (the mean over queries of their standard deviation over positions).
 */
function attentionChange(
  q: Tensor<'f32'>,
  k: Tensor<'f32'>,
  k2: Tensor<'f32'>,
  from: number,
): { logit: number; tv: number; spread: number } {
  const [N, H, d] = q.shape;
  const nKv = k.shape[1];
  const g = H / nKv;
  const scale = 1 / Math.sqrt(d); // the padded model's temperature (q carries sqrt(d / from))
  let logitSum = 0,
    logitCount = 0,
    tvSum = 0,
    spreadSum = 0;
  const a = new Float64Array(N);
  const b = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    for (let h = 0; h < H; h++) {
      const kv = Math.floor(h / g);
      for (let j = 0; j <= i; j++) {
        let s = 0,
          s2 = 0;
        for (let c = 0; c < from; c++) {
          const qc = q.data[q.offset + (i * H + h) * d + c];
          s += qc * k.data[k.offset + (j * nKv + kv) * d + c];
          s2 += qc * k2.data[k2.offset + (j * nKv + kv) * d + c];
        }
        a[j] = s * scale;
        b[j] = s2 * scale;
        logitSum += Math.abs(a[j] - b[j]);
        logitCount++;
      }
      let mean = 0,
        square = 0;
      for (let j = 0; j <= i; j++) mean += a[j] / (i + 1);
      for (let j = 0; j <= i; j++) square += (a[j] - mean) ** 2 / (i + 1);
      spreadSum += Math.sqrt(square);
      const softmax = (x: Float64Array) => {
        let max = -Infinity;
        for (let j = 0; j <= i; j++) max = Math.max(max, x[j]);
        let sum = 0;
        for (let j = 0; j <= i; j++) sum += x[j] = Math.exp(x[j] - max);
        for (let j = 0; j <= i; j++) x[j] /= sum;
      };
      softmax(a);
      softmax(b);
      let tv = 0;
      for (let j = 0; j <= i; j++) tv += Math.abs(a[j] - b[j]);
      tvSum += tv / 2;
    }
  }
  return { logit: logitSum / logitCount, tv: tvSum / (N * H), spread: spreadSum / (N * H) };
}

function quantPart(tokens: readonly number[]): void {
  const m = buildModel(engine, padded);
  const L = m.config.nLayers;
  const from = file.loaded.config.headDim;
  const ppl = (e: Engine, kvDType: KVTypeChoice = 'f32', of: Model = m) => {
    const nll = denseNll({ engine: e, model: of, kvDType, productPath: 'dequant' }, tokens, protocol);
    return summarize(nll, nll).ppl;
  };
  const original = ppl(engine, 'f32', model);
  const recorder = new RecordingEngine(engine, L, {});
  const base = ppl(recorder);
  const row = (label: string, p: number) =>
    console.log(`${label.padEnd(44)} ${p.toFixed(4).padStart(8)} ${pct(p, base).padStart(9)}`);
  const maps = (k?: RowMap, v?: RowMap, layers?: readonly number[]) => new RowMapEngine(engine, L, { k, v, layers });

  console.log(
    `\n# quant: dense perplexity, heads zero-padded ${from} -> ${PADDED_HEAD}; ${protocol.windows} windows of ${protocol.window}; backend ${engine.name}`,
  );
  console.log(`${'K / V rows'.padEnd(44)} ${'ppl'.padStart(8)} ${'vs f32'.padStart(9)}`);
  row(`original model (head dim ${from}), f32 cache`, original);
  row('padded, f32 cache', base);
  const caches: KVTypeChoice[] = ['f16', 'q8_0', 'q4_0', { k: 'q8_0', v: 'q4_0' }, { k: 'q4_0', v: 'q8_0' }];
  for (const dtype of caches) row(`padded, ${kvLabel(dtype)} cache (K/V)`, ppl(engine, dtype));
  for (const type of ['q8_0', 'q4_0'] as const) {
    row(`${type} K and V (round trips over an f32 cache)`, ppl(maps(roundTrip(type), roundTrip(type))));
    row(`${type} K, f32 V`, ppl(maps(roundTrip(type))));
    row(`f32 K, ${type} V`, ppl(maps(undefined, roundTrip(type))));
  }
  for (let l = 0; l < L; l++) row(`q4_0 K in layer ${l} only`, ppl(maps(roundTrip('q4_0'), undefined, [l])));
  for (let l = 0; l < L; l++) row(`q4_0 V in layer ${l} only`, ppl(maps(undefined, roundTrip('q4_0'), [l])));
  row('q8_0 K, q4_0 V (-ctk q8_0 -ctv q4_0)', ppl(maps(roundTrip('q8_0'), roundTrip('q4_0'))));
  row('q4_0 K Hadamard-rotated, f32 V', ppl(maps(rotated(roundTrip('q4_0')))));
  row('q4_0 K Hadamard-rotated, q4_0 V', ppl(maps(rotated(roundTrip('q4_0')), roundTrip('q4_0'))));

  console.log(
    `\n# quant: the first window's rows and attention, per layer (real components only; RMS over positions and KV heads)`,
  );
  console.log(
    'layer  K kurtosis max/median  K channel RMS max/median  rel. error K q8_0 / q4_0  V q8_0 / q4_0  logit std  |dlogit| q8_0 / q4_0 K  attention TV q8_0 / q4_0 K',
  );
  recorder.recorded.forEach(({ q, k, v }, l) => {
    const [N, nKv, d] = k.shape;
    const kurt: number[] = [];
    const rms: number[] = [];
    for (let h = 0; h < nKv; h++) {
      for (let c = 0; c < from; c++) {
        const xs = Float32Array.from({ length: N }, (_, i) => k.data[k.offset + (i * nKv + h) * d + c]);
        kurt.push(kurtosis(xs, 0, N));
        rms.push(Math.sqrt(xs.reduce((s, x) => s + x * x, 0) / N));
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const errs = (x: Tensor<'f32'>) =>
      (['q8_0', 'q4_0'] as const).map((t) => relativeError(x, roundTrip(t)(x)).toFixed(3)).join(' / ');
    const change = (['q8_0', 'q4_0'] as const).map((t) => attentionChange(q, k, roundTrip(t)(k), from));
    console.log(
      `${String(l).padStart(5)}  ${`${Math.max(...kurt).toFixed(1)} / ${median(kurt).toFixed(1)}`.padStart(22)}  ${(Math.max(...rms) / median(rms)).toFixed(2).padStart(24)}  ${errs(k).padStart(24)}  ${errs(v).padStart(13)}  ${change[0].spread.toFixed(2).padStart(9)}  ${change
        .map((c) => c.logit.toFixed(3))
        .join(' / ')
        .padStart(22)}  ${change
        .map((c) => c.tv.toFixed(3))
        .join(' / ')
        .padStart(26)}`,
    );
  });
}

// ---- llama: llama.cpp on the same padded model ----

async function llamaPart(tokens: readonly number[]): Promise<void> {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const dir = mkdtempSync(join(tmpdir(), 'sparq-kv-accuracy-'));
  const vocab = padded.config.vocabSize;
  /** llama.cpp's perplexity over `protocol`'s windows, each evaluated in one batch, every position scored. */
  const ppl = async (path: string, k: string, v: string, flashAttention: boolean): Promise<number> => {
    const model = await llama.loadModel({ modelPath: path });
    // Twice the window: with a context of exactly one window, node-llama-cpp 3.22.1 crashed the process (SIGSEGV) on a q8_0 cache.
    const context = await model.createContext({
      contextSize: 2 * protocol.window,
      batchSize: protocol.window,
      threads: 1,
      flashAttention,
      experimentalKvCacheKeyType: k as never,
      experimentalKvCacheValueType: v as never,
    });
    try {
      let sum = 0,
        n = 0;
      const sequence = context.getSequence();
      for (const { start, n: length } of windowsOf(tokens.length, protocol)) {
        await sequence.clearHistory(); // each window from position 0, as sparq's protocol runs it
        const outs = await sequence.controlledEvaluate(
          tokens.slice(start, start + length).map((t) => [t, { generateNext: { logits: true } }]) as never,
        );
        for (let pos = 0; pos < length && start + pos + 1 < tokens.length; pos++) {
          const logits = new Float32Array(vocab).fill(-Infinity);
          for (const [token, logit] of outs[pos]!.next.logits!) logits[token as number] = logit;
          sum += tokenNll(logits, 0, vocab, tokens[start + pos + 1]);
          n++;
        }
      }
      return Math.exp(sum / n);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  };
  try {
    const plainPath = join(dir, 'plain.gguf');
    const paddedPath = join(dir, 'padded.gguf');
    writeGGUFFile(
      plainPath,
      llamaMetadata(file.loaded.config, tokenizer),
      ggufTensors(engine, file.loaded, 'f32').tensors,
    );
    writeGGUFFile(paddedPath, llamaMetadata(padded.config, tokenizer), ggufTensors(engine, padded, 'f32').tensors);
    console.log(
      `\n# llama: llama.cpp (node-llama-cpp, prebuilt CPU, 1 thread), perplexity over ${protocol.windows} windows of ${protocol.window}, f32 weights`,
    );
    const base = await ppl(paddedPath, 'F32', 'F32', false);
    const row = (label: string, p: number) =>
      console.log(`${label.padEnd(44)} ${p.toFixed(4).padStart(8)} ${pct(p, base).padStart(9)}`);
    row(
      `original model (head dim ${file.loaded.config.headDim}), -ctk/-ctv f32`,
      await ppl(plainPath, 'F32', 'F32', false),
    );
    row('padded, f32, flash attention off', base);
    for (const [k, v] of [
      ['F32', 'F32'],
      ['F16', 'F16'],
      ['Q8_0', 'Q8_0'],
      ['Q4_0', 'Q4_0'],
      ['Q4_0', 'F16'],
      ['F16', 'Q4_0'],
      ['Q8_0', 'Q4_0'],
      ['Q4_0', 'Q8_0'],
    ]) {
      row(
        `padded, -ctk ${k.toLowerCase()} -ctv ${v.toLowerCase()}, flash attention`,
        await ppl(paddedPath, k, v, true),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const started = performance.now();
const tokens = encodePieces(tokenizer, textPieces(readFileSync(shared('data/tinystories_val.txt'), 'utf8')));
if (parts.includes('logits')) logitsPart();
if (parts.includes('quant')) quantPart(tokens);
if (parts.includes('llama')) await llamaPart(tokens);
console.log(`\n${((performance.now() - started) / 1000).toFixed(0)} s`);
