/**
 * What SparQ's step 1 sees on the retrieval model's needle (docs/retrieval-model.md, "Why 4 pairs"):
 * one case, SparQ at one ratio, and for every decode step of the answer
 *   layer 1   alpha of each previous-token head, and the components i1 it read
 *   layer 2   the match query's slot norms (the design: sigma each), how many of i1 fall in each
 *             slot, the head sharing the KV head (|q|_1: a nonzero one would move i1), and the
 *             rank of the position the step copies by the approximate score (q[i1] . K[:, i1]) and
 *             by the exact one, against the other needles' and the filler's best approximate scores
 *   pnpm exec tsx bench/needle-step1.ts [--task multikey] [--length 4096] [--depth 0.1] [--target 0.0625]
 * The case is the sweep's: depth index i uses seed 1 + i, as `sparq eval --task needle` draws it.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  Engine,
  SparqTrace,
  f16ToF32,
  loadBackends,
  type KVCache,
  type SparqOptions,
  type SparqParams,
  type Tensor,
} from '@sparq/core';
import {
  Session,
  argmax,
  buildModel,
  configForTarget,
  fillerTokens,
  needleCase,
  needleModelContext,
  readTokenizerFile,
  retrievalModel,
  type NeedleTask,
} from '@sparq/llm';
import '@sparq/native';
import { sharedPath } from '../packages/cli/src/shared-path.ts';

const { values } = parseArgs({
  options: {
    task: { type: 'string', default: 'multikey' },
    length: { type: 'string', default: '4096' },
    depth: { type: 'string', default: '0.1' },
    target: { type: 'string', default: String(1 / 16) },
  },
});
const task = values.task as NeedleTask;
const length = Number(values.length);
const depth = Number(values.depth);
const target = Number(values.target);
const D = 128;
const SLOT = 16; // m: code dims per slot of the 4-gram model
const FIRST_SLOT = 64; // the match slots fill head dims 64..127

const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native');
if (!engine) throw new Error('bench/needle-step1.ts needs the native backend (pnpm build:native)');
const tokenizer = readTokenizerFile(sharedPath('models/tok512.bin'));
const model = buildModel(
  engine,
  retrievalModel({ ngram: 4, ctx: needleModelContext(length), vocabSize: tokenizer.vocabSize }).loaded,
);
const filler = fillerTokens(tokenizer, readFileSync(sharedPath('data/tinystories_val.txt'), 'utf8'), length);
const c = needleCase(tokenizer, filler, task, length, depth, 1 + Math.round(depth * 10), 4);
const steps = c.answerTokens.length;
const config = configForTarget(
  'sparq',
  target,
  Array.from({ length: steps - 1 }, (_, i) => length + 1 + i),
  D,
);

/** Keeps each layer's last SparQ call: its query, cache, parameters and trace. */
class Recorder extends Engine {
  caches: readonly KVCache[] = [];
  calls: { q: Tensor<'f32'>; cache: KVCache; params: SparqParams; trace: SparqTrace }[] = [];
  override sparqDecode(
    out: Tensor<'f32'>,
    q: Tensor<'f32'>,
    cache: KVCache,
    params: SparqParams,
    options?: SparqOptions,
  ): void {
    const trace = new SparqTrace(1, q.shape[1], cache.nKvHeads, params.r, params.k);
    super.sparqDecode(out, q, cache, params, { ...options, trace });
    this.calls[this.caches.indexOf(cache)] = { q, cache, params, trace };
  }
}

const recorder = new Recorder(engine.backend);
const session = new Session(recorder, model, {
  capacity: c.prompt.length + steps,
  maxPrefill: 512,
  attention: config,
  kvDType: 'f16',
  kvLayout: 'k-twice',
});
recorder.caches = session.caches;
const text = [...c.prompt, argmax(session.prefill(c.prompt))];
const others = c.distractors.map((x) => x.needle);
console.log(
  `${task} ${length} depth ${depth}: answer ${c.answer}, distractors ${c.distractors.map((x) => x.value).join(' ') || '-'}; SparQ r ${config.r} k ${config.k} l ${config.l}`,
);

for (let step = 1; step < steps; step++) {
  text.push(argmax(session.decode(text[text.length - 1])));
  const copy = c.answerPositions[step];
  const prev = recorder.calls[0];
  const { q, cache, params, trace } = recorder.calls[1];
  const S = cache.nValid(0);
  const head = (h: number) => Array.from(q.data.subarray(q.offset + h * D, q.offset + (h + 1) * D));
  const match = head(0);
  const i1 = Array.from(trace.i1.subarray(0, params.r));
  const key = (j: number, i: number) => f16ToF32(cache.k[cache.kRowOffset(0, 0, j) + i]);
  const approx = new Float64Array(S);
  const exact = new Float64Array(S);
  for (let j = 0; j < S; j++) {
    for (const i of i1) approx[j] += match[i] * key(j, i);
    for (let i = 0; i < D; i++) exact[j] += match[i] * key(j, i);
  }
  const rank = (score: Float64Array) =>
    score.filter((x, j) => x > score[copy] || (x === score[copy] && j < copy)).length;
  const inside = (j: number, spans: readonly [number, number][]) => spans.some(([a, b]) => j >= a && j < b);
  let needles = -Infinity;
  let rest = -Infinity;
  for (let j = 0; j < S; j++) {
    if (inside(j, others)) needles = Math.max(needles, approx[j]);
    else if (!inside(j, [c.needle])) rest = Math.max(rest, approx[j]);
  }
  const slots = [0, 1, 2, 3].map((o) => i1.filter((i) => Math.floor((i - FIRST_SLOT) / SLOT) === o).length);
  const norms = [0, 1, 2, 3].map((o) =>
    Math.hypot(...match.slice(FIRST_SLOT + SLOT * o, FIRST_SLOT + SLOT * (o + 1))).toFixed(1),
  );
  console.log(
    `step ${step} (copies position ${copy}, ${text[text.length - 1] === c.prompt[copy] ? 'right' : 'wrong'} token):`,
  );
  console.log(
    `  layer 1: alpha ${Array.from(prev.trace.alpha.subarray(0, prev.q.shape[1]), (a) => a.toFixed(3)).join(' ')}; i1 ${Array.from(prev.trace.i1.subarray(0, prev.params.r)).join(',')}`,
  );
  console.log(
    `  layer 2: slot norms ${norms.join(' ')}; i1 per slot ${slots.join(' ')}; head 1 |q|_1 ${head(1)
      .reduce((a, x) => a + Math.abs(x), 0)
      .toFixed(1)}`,
  );
  console.log(
    `  copied position: approximate score ${approx[copy].toFixed(0)} rank ${rank(approx)} of ${S} (k ${params.k}), exact ${exact[copy].toFixed(0)} rank ${rank(exact)}; best approximate: other needles ${needles.toFixed(0)}, filler ${rest.toFixed(0)}`,
  );
}
console.log(`output ${JSON.stringify(tokenizer.decode(text.slice(c.prompt.length)))}`);
