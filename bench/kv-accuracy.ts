/**
 * f16 against f32 KV cache: how much the logits move (issue 13: f16 KV as the default where
 * accuracy allows). For each attention method, the f32 run decodes greedily from BOS; the f16
 * run is fed the same tokens (teacher forcing) and its logits are compared step by step, then
 * it decodes greedily on its own and the first step where its tokens differ is reported.
 *   pnpm exec tsx bench/kv-accuracy.ts [model.bin] [steps]
 * Default model: ../shared/models/stories260K.bin, 200 steps.
 */
import { loadBackends, type AttentionMethod } from '@sparq/core';
import '@sparq/native';
import { Session, defaultAttention, openModel } from '@sparq/llm';

const path = process.argv[2] ?? new URL('../../shared/models/stories260K.bin', import.meta.url).pathname;
const steps = Number(process.argv[3] ?? 200);
const { available } = await loadBackends();
const engine = available.find((e) => e.name === 'native') ?? available[0];
const lm = openModel(engine, path);
const c = lm.model.config;
const context = Math.min(c.seqLen, steps + 1);
const BOS = 1;

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Greedy decode from BOS, or teacher-forced on `forced`; the logits of every step. */
function run(method: AttentionMethod, dtype: 'f32' | 'f16', forced?: number[]): { tokens: number[]; logits: Float32Array[] } {
  const session = new Session(engine, lm.model, { capacity: context, maxPrefill: 1, attention: defaultAttention(method, c.headDim, context), kvDType: dtype });
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let l = session.prefill([BOS]);
  for (let i = 0; i < steps; i++) {
    logits.push(l.slice());
    const next = forced ? forced[i] : argmax(l);
    tokens.push(next);
    if (i + 1 < steps) l = session.decode(next);
  }
  return { tokens, logits };
}

console.log(`# f16 vs f32 KV: ${path.split('/').pop()}, ${steps} greedy steps, backend ${engine.name}; dim ${c.dim}, head dim ${c.headDim}, ${c.nLayers} layers`);
console.log('method  max|dlogit|  mean|dlogit|  logit range  argmax agree (forced)  free-run tokens equal');
for (const method of ['dense', 'sparq'] as const) {
  const a = run(method, 'f32');
  const b = run(method, 'f16', a.tokens);
  const free = run(method, 'f16');
  let max = 0, sum = 0, count = 0, agree = 0, lo = Infinity, hi = -Infinity;
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
