/**
 * The hyperparameters of a Llama-family model (llama2.c's Config plus what
 * GGUF adds: the architecture, norm epsilon, RoPE base and scaling, an
 * explicit head size, q/k/v biases), and the sanity checks both loaders apply
 * before sizing anything from them.
 */
import type { Architecture } from './family.ts';
import { NO_ROPE_SCALING, describeRopeScaling, type RopeScaling } from './rope-scaling.ts';

/** A model's hyperparameters as its file gives them (dimensions, heads, vocabulary, context, RoPE). */
export interface ModelConfig {
  /** The family (GGUF general.architecture; llama2.c checkpoints are 'llama'). */
  arch: Architecture;
  /** Transformer width (embedding size). */
  dim: number;
  /** FFN inner size (w1, w3 rows; w2 columns). */
  hiddenDim: number;
  nLayers: number;
  /** Query heads. */
  nHeads: number;
  /** Key/value heads (GQA: nHeads a multiple of nKvHeads). */
  nKvHeads: number;
  vocabSize: number;
  /** Maximum context the model was trained for. */
  seqLen: number;
  /** Width of one head: dim / nHeads unless the file says otherwise (Qwen 3: attention.key_length). */
  headDim: number;
  /** nHeads * headDim: width of q and of the attention output. */
  qDim: number;
  /** nKvHeads * headDim: width of k and v. */
  kvDim: number;
  /** RMSNorm epsilon (llama2.c: 1e-5). */
  normEps: number;
  /** RoPE base (llama2.c: 10000). */
  ropeTheta: number;
  /** RoPE context extension (llama2.c: none). */
  ropeScaling: RopeScaling;
  /** q, k and v projections add a bias (Qwen 2). */
  attnBias: boolean;
  /** The model has a rope_freqs tensor (per-pair frequency divisors, Llama 3.1+). */
  ropeFreqs: boolean;
  /** True when the classifier is the token embedding (tied weights). */
  sharedClassifier: boolean;
}

/** Largest value accepted for any dimension: beyond it sizes stop being exact JS integers. */
export const MAX_DIM = 1 << 24;

/** The hyperparameters as read from a file, before the derived fields. */
export type ConfigFields = Pick<
  ModelConfig,
  'dim' | 'hiddenDim' | 'nLayers' | 'nHeads' | 'nKvHeads' | 'vocabSize' | 'seqLen'
>;

/** What a loader may add to the fields; the rest default to llama2.c's model. */
export type ConfigExtra = Pick<ModelConfig, 'normEps' | 'ropeTheta' | 'sharedClassifier'> &
  Partial<Pick<ModelConfig, 'arch' | 'ropeScaling' | 'attnBias' | 'ropeFreqs' | 'headDim'>>;

/**
 * Derives headDim, qDim and kvDim after checking the fields fit together;
 * `fail(field, what)` raises the loader's FormatError for the named field.
 */
export function makeConfig(
  fields: ConfigFields,
  extra: ConfigExtra,
  fail: (field: keyof ConfigFields | 'normEps' | 'ropeTheta' | 'headDim', what: string) => never,
): ModelConfig {
  // Every dimension a positive integer below MAX_DIM.
  for (const [name, value] of Object.entries(fields) as [keyof ConfigFields, number][]) {
    if (!Number.isInteger(value) || value < 1 || value > MAX_DIM)
      fail(name, `${value}, expected an integer in [1, ${MAX_DIM}]`);
  }
  const { dim, nHeads, nKvHeads } = fields;
  if (nKvHeads > nHeads || nHeads % nKvHeads !== 0) fail('nKvHeads', `${nKvHeads} does not divide nHeads ${nHeads}`);
  let headDim = extra.headDim;
  if (headDim === undefined) {
    if (dim % nHeads !== 0) fail('nHeads', `${nHeads} does not divide dim ${dim}`);
    headDim = dim / nHeads;
  } else if (!Number.isInteger(headDim) || headDim < 1 || headDim * nHeads > MAX_DIM) {
    fail('headDim', `${headDim}, expected an integer in [1, ${Math.floor(MAX_DIM / nHeads)}]`);
  }
  if (headDim % 2 !== 0)
    fail(extra.headDim === undefined ? 'nHeads' : 'headDim', `head size ${headDim} is odd; RoPE rotates pairs`);
  if (!(extra.normEps > 0 && extra.normEps < 1)) fail('normEps', `${extra.normEps}, expected a value in (0, 1)`);
  if (!(extra.ropeTheta > 1 && Number.isFinite(extra.ropeTheta)))
    fail('ropeTheta', `${extra.ropeTheta}, expected a finite value > 1`);
  return {
    arch: 'llama',
    ropeScaling: NO_ROPE_SCALING,
    attnBias: false,
    ropeFreqs: false,
    ...fields,
    // Fields the loader left undefined keep their defaults.
    ...(Object.fromEntries(Object.entries(extra).filter(([, v]) => v !== undefined)) as ConfigExtra),
    headDim,
    qDim: nHeads * headDim,
    kvDim: nKvHeads * headDim,
  };
}

/** Human-readable one-liner for summaries. */
export function describeConfig(c: ModelConfig): string {
  const rope = c.ropeScaling.type === 'none' ? '' : `, rope ${describeRopeScaling(c.ropeScaling)}`;
  return `${c.arch}: dim ${c.dim}, hidden ${c.hiddenDim}, ${c.nLayers} layers, ${c.nHeads} heads (${c.nKvHeads} KV, head dim ${c.headDim}), vocab ${c.vocabSize}, seq_len ${c.seqLen}${rope}`;
}
