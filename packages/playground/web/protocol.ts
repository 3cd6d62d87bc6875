/**
 * Messages between the page (main.ts) and the engine's worker (worker.ts).
 */
import type { AttentionMethod } from '@sparq/core';

/** A file's name and bytes (fetched from `sparq playground`, or opened by the user). */
export interface NamedBytes {
  name: string;
  bytes: Uint8Array;
}

/** What a run generates with: the CLI's generate flags of the same names. */
export interface RunSettings {
  prompt: string;
  /** Positions including BOS, as the CLI's -n (0: the model's context). */
  n: number;
  temperature: number;
  seed: number;
  method: AttentionMethod;
  r: number;
  k: number;
  l: number;
}

export interface ModelSummary {
  description: string;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  seqLen: number;
}

/** A finished run: one entry per position of the cache. */
export interface RunSummary {
  /** Each position's token as printed after its predecessor (BOS shown as ⟨s⟩). */
  pieces: string[];
  /** Positions whose query is recorded: the ones a lesson can be asked about. */
  inspectable: number[];
  /** Prompt tokens, BOS included. */
  promptTokens: number;
  decodeTokensPerSecond: number;
  generatedTokens: number;
  /** The attention the run used, budgets resolved as the CLI resolves them. */
  attention: { method: AttentionMethod; r: number; k: number; l: number };
}

/** A method's data read for one layer at one step, all KV heads: spec.md §3's formula and the kernel's count. */
export interface MethodReads {
  method: AttentionMethod;
  formula: number;
  counted: number;
}

/**
 * Everything the five views draw for one query position, layer and KV head.
 * The group is the query heads sharing the KV head (g of them); SparQ and the
 * baselines choose positions per group, from scores summed over its heads.
 */
export interface Lesson {
  position: number;
  layer: number;
  head: number;
  /** Query heads of the group, head dim, valid positions (0..S-1). */
  g: number;
  d: number;
  S: number;
  r: number;
  k: number;
  l: number;
  /** (g, d) the group's queries, and (d) sum over the group of |q_i|: what step 1 ranks. */
  q: number[][];
  absQ: number[];
  /** Step 1's components, and each head's temperature tau. */
  i1: number[];
  tau: number[];
  /** (S) group means of the approximate scores ŝ and the true softmax scores s. */
  sHat: number[];
  s: number[];
  /** Positions SparQ attends (ascending), its local window [S - l, S), dense's true top-k. */
  sparq: number[];
  localFrom: number;
  denseTop: number[];
  /** Per head of the group: alpha (ŝ mass of SparQ's positions) and the true s mass of the same positions. */
  alpha: number[];
  mass: number[];
  /** Relative L2 error of the group's output against dense, with and without the mean-value reallocation. */
  errReallocate: number;
  errPlain: number;
  /** Positions each baseline attends at this step, for this KV head. */
  kept: { h2o: number[]; lminf: number[]; oracle: number[] };
  /** Data read at this step in this layer (all KV heads), per method. */
  reads: MethodReads[];
}

export type ToWorker =
  | { type: 'load'; model: NamedBytes; tokenizer: NamedBytes | null }
  | { type: 'generate'; settings: RunSettings }
  | { type: 'inspect'; position: number; layer: number; head: number };

export type FromWorker =
  | { type: 'loaded'; model: ModelSummary; ms: number }
  | { type: 'text'; text: string }
  | { type: 'done'; run: RunSummary }
  | { type: 'lesson'; lesson: Lesson }
  | { type: 'error'; message: string };
