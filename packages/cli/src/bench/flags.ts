/**
 * The flags of `sparq bench`, checked and resolved against --quick's and the
 * full run's defaults. Every bad value is a UsageError naming the flag.
 */
import { kvLabel, type KVLayout, type KVTypeChoice } from '@sparq/core';
import { parseKvFlag } from '@sparq/llm/options';
import { MODEL_SHAPES, SHAPE_NAMES, SHAPE_WEIGHTS, type ShapeName, type ShapeWeights } from '@sparq/llm';
import { UsageError } from '../command.ts';
import { DEFAULT_SHAPE_DIR } from './bench-model.ts';
import { asUsage, isInt, number } from '../flags.ts';

export const BENCH_FLAGS = {
  model: { type: 'string' },
  out: { type: 'string' },
  quick: { type: 'boolean' },
  threads: { type: 'string' },
  backend: { type: 'string' },
  seq: { type: 'string' },
  'e2e-seq': { type: 'string' },
  kv: { type: 'string' },
  layout: { type: 'string' },
  heads: { type: 'string' },
  decode: { type: 'string' },
  reps: { type: 'string' },
  time: { type: 'string' },
  'no-llama-cpp': { type: 'boolean' },
  'no-kernels': { type: 'boolean' },
  'no-e2e': { type: 'boolean' },
  json: { type: 'boolean' },
  shape: { type: 'string' },
  layers: { type: 'string' },
  weights: { type: 'string' },
  'shape-dir': { type: 'string' },
  'e2e-kv': { type: 'string' },
  groups: { type: 'string' },
  'llama-flash': { type: 'string' },
} as const;

type Values = {
  [K in keyof typeof BENCH_FLAGS]?: (typeof BENCH_FLAGS)[K]['type'] extends 'boolean' ? boolean : string;
};

/** The smallest S: SparQ's k = S/16 must keep at least one position. */
export const MIN_SEQ = 16;
/** Head dim of the kernel sweep (the shape; the end-to-end part uses the model's). */
export const SWEEP_HEAD_DIM = 128;

export interface BenchSettings {
  quick: boolean;
  out: string;
  model: string | undefined;
  /** --shape: a random-weight file of a real model's shape, `layers` of its layers (default SHAPE_LAYERS), in `dir`. */
  shape: { name: ShapeName; layers: number; weights: ShapeWeights; dir: string } | null;
  /** null: every native thread count from the pool's default (resolved once the addon is loaded). */
  threads: number[] | null;
  backends: ('native' | 'reference')[] | null;
  seqs: number[];
  e2eSeqs: number[];
  kv: KVTypeChoice[];
  /** KV types of the end-to-end part: each runs in sparq and in llama.cpp. */
  e2eKv: KVTypeChoice[];
  /** GQA group sizes of the kernel sweep: query heads per KV head. */
  groups: number[];
  layouts: KVLayout[];
  heads: number;
  decodeSteps: number;
  reps: number;
  timeMs: number;
  llamaCpp: boolean;
  /** llama.cpp's flash attention settings to run (the faster counts, per metric); default both. */
  llamaFlash: boolean[];
  kernels: boolean;
  e2e: boolean;
  json: boolean;
}

/** A comma-separated list: each item checked by `parse` (which throws UsageError), no repeats. */
function list<T>(flag: string, raw: string | undefined, fallback: T[], parse: (item: string) => T): T[] {
  if (raw === undefined) return fallback;
  const items = raw.split(',').map((s) => s.trim());
  if (items.some((s) => s === ''))
    throw new UsageError(`--${flag} ${raw}: an empty item; expected a comma-separated list`);
  const values = items.map(parse);
  if (new Set(values).size !== values.length) throw new UsageError(`--${flag} ${raw}: an item is repeated`);
  return values;
}

const intItem = (flag: string, min: number, max: number) => (s: string) =>
  number(flag, s, 0, isInt(min, max), `integers in [${min}, ${max}]`);
/** A list of KV types, each entry TYPE or K/V (options.ts's parseKvFlag); repeated entries refused by their spelling. */
function kvList(flag: string, raw: string | undefined, fallback: KVTypeChoice[]): KVTypeChoice[] {
  const labels = list(flag, raw, fallback.map(kvLabel), (item) =>
    kvLabel(asUsage(() => parseKvFlag(`--${flag}`, item))),
  );
  return labels.map((label) => parseKvFlag(`--${flag}`, label));
}

function oneOf<T extends string>(flag: string, allowed: readonly T[]) {
  return (s: string): T => {
    if (!(allowed as readonly string[]).includes(s))
      throw new UsageError(`--${flag} ${s}, expected one of ${allowed.join(', ')}`);
    return s as T;
  };
}

/** Layers of a --shape slice by default: the 2 of 32 (prefill of long contexts stays minutes, not hours). */
export const SHAPE_LAYERS = 2;

function shapeSettings(values: Values): BenchSettings['shape'] {
  if (values.shape === undefined) {
    for (const flag of ['layers', 'weights', 'shape-dir'] as const)
      if (values[flag] !== undefined) throw new UsageError(`--${flag} needs --shape`);
    return null;
  }
  if (values.model !== undefined)
    throw new UsageError('--shape and --model: give one (--shape writes its own model file)');
  const name = oneOf('shape', SHAPE_NAMES)(values.shape);
  const max = MODEL_SHAPES[name].nLayers;
  return {
    name,
    layers: number(
      'layers',
      values.layers,
      Math.min(SHAPE_LAYERS, max),
      isInt(1, max),
      `an integer in [1, ${max}] (${name} has ${max} layers)`,
    ),
    weights: values.weights === undefined ? 'q4_k_m' : oneOf('weights', SHAPE_WEIGHTS)(values.weights),
    dir: values['shape-dir'] ?? DEFAULT_SHAPE_DIR,
  };
}

export function benchSettings(values: Values): BenchSettings {
  const quick = !!values.quick;
  const MAX_SEQ = 1 << 20;
  const backends =
    values.backend === 'all'
      ? (['native', 'reference'] as const).slice()
      : values.backend === undefined
        ? null
        : list('backend', values.backend, [], oneOf('backend', ['native', 'reference'] as const));
  const e2e = !values['no-e2e'];
  const kernels = !values['no-kernels'];
  if (!e2e && !kernels) throw new UsageError('--no-kernels and --no-e2e: nothing left to run');
  return {
    quick,
    out: values.out ?? 'sparq-bench',
    model: values.model,
    shape: shapeSettings(values),
    threads:
      values.threads === undefined
        ? quick
          ? [1]
          : null
        : list('threads', values.threads, [], intItem('threads', 1, 256)),
    backends,
    seqs: list(
      'seq',
      values.seq,
      quick ? [256, 512] : [1024, 2048, 4096, 8192, 16384, 32768],
      intItem('seq', MIN_SEQ, MAX_SEQ),
    ),
    e2eSeqs: list(
      'e2e-seq',
      values['e2e-seq'],
      quick ? [64, 128] : [512, 1024, 2048, 4096],
      intItem('e2e-seq', MIN_SEQ, MAX_SEQ),
    ),
    kv: kvList('kv', values.kv, quick ? ['f32'] : ['f16', 'f32']),
    e2eKv: kvList('e2e-kv', values['e2e-kv'], quick ? ['f32'] : ['f16']),
    groups: list('groups', values.groups, quick ? [1] : [1, 4, 8], intItem('groups', 1, 64)),
    layouts: list('layout', values.layout, ['k-twice'], oneOf<KVLayout>('layout', ['k-twice', 'single-k'])),
    heads: number('heads', values.heads, quick ? 2 : 16, isInt(1, 1024), 'an integer in [1, 1024]'),
    decodeSteps: number('decode', values.decode, quick ? 4 : 16, isInt(1, 4096), 'an integer in [1, 4096]'),
    reps: number('reps', values.reps, 1, isInt(1, 100), 'an integer in [1, 100]'),
    timeMs: number('time', values.time, quick ? 30 : 500, isInt(1, 600_000), 'milliseconds, an integer in [1, 600000]'),
    llamaCpp: !values['no-llama-cpp'],
    llamaFlash: { on: [true], off: [false], both: [true, false] }[
      oneOf('llama-flash', ['on', 'off', 'both'] as const)(values['llama-flash'] ?? 'both')
    ],
    kernels,
    e2e,
    json: !!values.json,
  };
}
