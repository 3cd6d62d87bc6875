/**
 * The hyperparameters of a Llama-architecture model (llama2.c's Config plus
 * what GGUF adds: norm epsilon and RoPE base), and the sanity checks both
 * loaders apply before sizing anything from them.
 */

export interface ModelConfig {
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
  /** dim / nHeads. */
  headDim: number;
  /** nKvHeads * headDim: width of k and v. */
  kvDim: number;
  /** RMSNorm epsilon (llama2.c: 1e-5). */
  normEps: number;
  /** RoPE base (llama2.c: 10000). */
  ropeTheta: number;
  /** True when the classifier is the token embedding (tied weights). */
  sharedClassifier: boolean;
}

/** Largest value accepted for any dimension: beyond it sizes stop being exact JS integers. */
export const MAX_DIM = 1 << 24;

/** The hyperparameters as read from a file, before the derived fields. */
export type ConfigFields = Pick<ModelConfig, 'dim' | 'hiddenDim' | 'nLayers' | 'nHeads' | 'nKvHeads' | 'vocabSize' | 'seqLen'>;

/**
 * Derives headDim and kvDim after checking the fields fit together;
 * `fail(field, what)` raises the loader's FormatError for the named field.
 */
export function makeConfig(fields: ConfigFields, extra: Pick<ModelConfig, 'normEps' | 'ropeTheta' | 'sharedClassifier'>, fail: (field: keyof ConfigFields | 'normEps' | 'ropeTheta', what: string) => never): ModelConfig {
  // Every dimension a positive integer below MAX_DIM.
  for (const [name, value] of Object.entries(fields) as [keyof ConfigFields, number][]) {
    if (!Number.isInteger(value) || value < 1 || value > MAX_DIM) fail(name, `${value}, expected an integer in [1, ${MAX_DIM}]`);
  }
  const { dim, nHeads, nKvHeads } = fields;
  if (dim % nHeads !== 0) fail('nHeads', `${nHeads} does not divide dim ${dim}`);
  if (nKvHeads > nHeads || nHeads % nKvHeads !== 0) fail('nKvHeads', `${nKvHeads} does not divide nHeads ${nHeads}`);
  const headDim = dim / nHeads;
  if (headDim % 2 !== 0) fail('nHeads', `head size ${headDim} (dim ${dim} / ${nHeads} heads) is odd; RoPE rotates pairs`);
  if (!(extra.normEps > 0 && extra.normEps < 1)) fail('normEps', `${extra.normEps}, expected a value in (0, 1)`);
  if (!(extra.ropeTheta > 1 && Number.isFinite(extra.ropeTheta))) fail('ropeTheta', `${extra.ropeTheta}, expected a finite value > 1`);
  return { ...fields, ...extra, headDim, kvDim: nKvHeads * headDim };
}

/** Human-readable one-liner for summaries. */
export function describeConfig(c: ModelConfig): string {
  return `dim ${c.dim}, hidden ${c.hiddenDim}, ${c.nLayers} layers, ${c.nHeads} heads (${c.nKvHeads} KV, head dim ${c.headDim}), vocab ${c.vocabSize}, seq_len ${c.seqLen}`;
}
