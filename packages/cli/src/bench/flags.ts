/**
 * The flags of `sparq bench`, checked and resolved against --quick's and the
 * full run's defaults. Every bad value is a UsageError naming the flag.
 */
import type { KVDType, KVLayout } from '@sparq/core';
import { UsageError } from '../command.ts';
import { isInt, number } from '../flags.ts';

export const BENCH_FLAGS = {
  model: { type: 'string' }, out: { type: 'string' }, quick: { type: 'boolean' }, threads: { type: 'string' },
  backend: { type: 'string' }, seq: { type: 'string' }, 'e2e-seq': { type: 'string' }, kv: { type: 'string' },
  layout: { type: 'string' }, heads: { type: 'string' }, decode: { type: 'string' }, reps: { type: 'string' },
  time: { type: 'string' }, 'no-llama-cpp': { type: 'boolean' }, 'no-kernels': { type: 'boolean' }, 'no-e2e': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

type Values = { [K in keyof typeof BENCH_FLAGS]?: (typeof BENCH_FLAGS)[K]['type'] extends 'boolean' ? boolean : string };

/** The smallest S: SparQ's k = S/16 must keep at least one position. */
export const MIN_SEQ = 16;
/** Head dim of the kernel sweep (the shape; the end-to-end part uses the model's). */
export const SWEEP_HEAD_DIM = 128;

export interface BenchSettings {
  quick: boolean;
  out: string;
  model: string | undefined;
  /** null: every native thread count from the pool's default (resolved once the addon is loaded). */
  threads: number[] | null;
  backends: ('native' | 'reference')[] | null;
  seqs: number[];
  e2eSeqs: number[];
  kv: KVDType[];
  layouts: KVLayout[];
  heads: number;
  decodeSteps: number;
  reps: number;
  timeMs: number;
  llamaCpp: boolean;
  kernels: boolean;
  e2e: boolean;
  json: boolean;
}

/** A comma-separated list: each item checked by `parse` (which throws UsageError), no repeats. */
function list<T>(flag: string, raw: string | undefined, fallback: T[], parse: (item: string) => T): T[] {
  if (raw === undefined) return fallback;
  const items = raw.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) throw new UsageError(`--${flag} ${raw}: an empty item; expected a comma-separated list`);
  const values = items.map(parse);
  if (new Set(values).size !== values.length) throw new UsageError(`--${flag} ${raw}: an item is repeated`);
  return values;
}

const intItem = (flag: string, min: number, max: number) => (s: string) => number(flag, s, 0, isInt(min, max), `integers in [${min}, ${max}]`);
function oneOf<T extends string>(flag: string, allowed: readonly T[]) {
  return (s: string): T => {
    if (!(allowed as readonly string[]).includes(s)) throw new UsageError(`--${flag} ${s}, expected one of ${allowed.join(', ')}`);
    return s as T;
  };
}

export function benchSettings(values: Values): BenchSettings {
  const quick = !!values.quick;
  const MAX_SEQ = 1 << 20;
  const backends = values.backend === 'all' ? (['native', 'reference'] as const).slice() : values.backend === undefined ? null : list('backend', values.backend, [], oneOf('backend', ['native', 'reference'] as const));
  const e2e = !values['no-e2e'];
  const kernels = !values['no-kernels'];
  if (!e2e && !kernels) throw new UsageError('--no-kernels and --no-e2e: nothing left to run');
  return {
    quick,
    out: values.out ?? 'sparq-bench',
    model: values.model,
    threads: values.threads === undefined ? (quick ? [1] : null) : list('threads', values.threads, [], intItem('threads', 1, 256)),
    backends,
    seqs: list('seq', values.seq, quick ? [256, 512] : [1024, 2048, 4096, 8192, 16384, 32768], intItem('seq', MIN_SEQ, MAX_SEQ)),
    e2eSeqs: list('e2e-seq', values['e2e-seq'], quick ? [64, 128] : [512, 1024, 2048, 4096], intItem('e2e-seq', MIN_SEQ, MAX_SEQ)),
    kv: list('kv', values.kv, quick ? ['f32'] : ['f16', 'f32'], oneOf<KVDType>('kv', ['f32', 'f16'])),
    layouts: list('layout', values.layout, ['k-twice'], oneOf<KVLayout>('layout', ['k-twice', 'single-k'])),
    heads: number('heads', values.heads, quick ? 2 : 16, isInt(1, 1024), 'an integer in [1, 1024]'),
    decodeSteps: number('decode', values.decode, quick ? 4 : 16, isInt(1, 4096), 'an integer in [1, 4096]'),
    reps: number('reps', values.reps, 1, isInt(1, 100), 'an integer in [1, 100]'),
    timeMs: number('time', values.time, quick ? 30 : 500, isInt(1, 600_000), 'milliseconds, an integer in [1, 600000]'),
    llamaCpp: !values['no-llama-cpp'],
    kernels,
    e2e,
    json: !!values.json,
  };
}
