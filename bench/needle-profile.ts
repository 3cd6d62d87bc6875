/**
 * Where one needle case's time goes: wall and CPU time of each engine op (outermost calls only),
 * split into the shared prefill and each configuration's decode, for `sparq eval --task needle`'s
 * runner on one case.
 *   pnpm exec tsx bench/needle-profile.ts [--task passkey] [--length 4096] [--depth 0.5] [--kv f16]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Engine, loadBackends, type KVDType } from '@sparq/core';
import {
  NEEDLE_TARGETS,
  Session,
  buildModel,
  fillerTokens,
  needleCase,
  needleConfigs,
  needleModelContext,
  readTokenizerFile,
  retrievalModel,
  runNeedleCase,
  type NeedleTask,
} from '@sparq/llm';
import '@sparq/native';
import { sharedPath } from '../packages/cli/src/shared-path.ts';

const { values } = parseArgs({
  options: {
    task: { type: 'string', default: 'passkey' },
    length: { type: 'string', default: '4096' },
    depth: { type: 'string', default: '0.5' },
    kv: { type: 'string', default: 'f16' },
  },
});
const length = Number(values.length);
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native');
if (!engine) throw new Error('bench/needle-profile.ts needs the native backend (pnpm build:native)');
const tokenizer = readTokenizerFile(sharedPath('models/tok512.bin'));
const model = buildModel(
  engine,
  retrievalModel({ ngram: 4, ctx: needleModelContext(length), vocabSize: tokenizer.vocabSize }).loaded,
);
const filler = fillerTokens(tokenizer, readFileSync(sharedPath('data/tinystories_val.txt'), 'utf8'), length);

// Phase: 'prefill' until the first setAttention, then the configuration's label.
let phase = 'setup';
const table = new Map<string, { wall: number; cpu: number; calls: number }>();
let depth = 0;
function timed<T>(key: string, run: () => T): T {
  if (depth > 0 && !key.endsWith('(step)')) return run();
  depth++;
  const w = performance.now();
  const c = process.cpuUsage();
  try {
    return run();
  } finally {
    const dc = process.cpuUsage(c);
    const e = table.get(key) ?? { wall: 0, cpu: 0, calls: 0 };
    e.wall += performance.now() - w;
    e.cpu += (dc.user + dc.system) / 1000;
    e.calls++;
    table.set(key, e);
    depth--;
  }
}
for (const name of Object.getOwnPropertyNames(Engine.prototype)) {
  const desc = Object.getOwnPropertyDescriptor(Engine.prototype, name);
  if (name === 'constructor' || !desc || typeof desc.value !== 'function' || name === 'op' || name === 'has') continue;
  const fn = desc.value as (...a: unknown[]) => unknown;
  (Engine.prototype as unknown as Record<string, unknown>)[name] = function (this: Engine, ...a: unknown[]) {
    return timed(`${phase}: ${name}`, () => fn.apply(this, a));
  };
}
const prefill = Session.prototype.prefill;
Session.prototype.prefill = function (this: Session, ...a: Parameters<typeof prefill>) {
  phase = 'prefill';
  const w = performance.now();
  const c = process.cpuUsage();
  const out = prefill.apply(this, a);
  const dc = process.cpuUsage(c);
  table.set('prefill (all)', { wall: performance.now() - w, cpu: (dc.user + dc.system) / 1000, calls: 1 });
  return out;
};
const decode = Session.prototype.decode;
Session.prototype.decode = function (this: Session, ...a: Parameters<typeof decode>) {
  return timed(`${phase} (step)`, () => decode.apply(this, a));
};
const setAttention = Session.prototype.setAttention;
Session.prototype.setAttention = function (this: Session, ...a: Parameters<typeof setAttention>) {
  phase = `decode ${a[0].method}`;
  return setAttention.apply(this, a);
};

const c = needleCase(tokenizer, filler, values.task as NeedleTask, length, Number(values.depth), 1 + 5, 4);
const configs = needleConfigs(
  ['sparq', 'h2o', 'lminf', 'oracle'],
  NEEDLE_TARGETS,
  length,
  c.answerTokens.length - 1,
  128,
);
const w0 = performance.now();
const c0 = process.cpuUsage();
const outcomes = runNeedleCase({ engine, model, kvDType: values.kv as KVDType }, tokenizer, c, configs);
const dc = process.cpuUsage(c0);
const wall = (performance.now() - w0) / 1000;
console.log(
  `${values.task} ${length} depth ${values.depth} kv ${values.kv}: ${wall.toFixed(2)} s wall, ${((dc.user + dc.system) / 1e6).toFixed(2)} s CPU; ` +
    `exact ${outcomes.filter((o) => o.exact).length}/${outcomes.length}`,
);
const rows = [...table.entries()].sort((a, b) => b[1].cpu - a[1].cpu);
for (const [key, e] of rows)
  if (e.cpu > 20 || e.wall > 20)
    console.log(
      `${key.padEnd(40)} ${(e.wall / 1000).toFixed(2).padStart(8)} s wall ${(e.cpu / 1000).toFixed(2).padStart(8)} s CPU ${String(e.calls).padStart(6)} calls`,
    );
