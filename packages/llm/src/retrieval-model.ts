/**
 * A retrieval model built by hand: a two-layer llama whose weights are set by construction, not
 * trained, so that greedy decoding continues any n-gram that occurred once before with the token
 * that followed it (an induction circuit over n-grams). Given `... The pass key is 71432. ...
 * The pass key is`, it continues ` 71432`. docs/retrieval-model.md derives every weight.
 *
 * Residual stream (dim D, rows of the embedding have norm sqrt(2)):
 *   [0]            1                    a constant, the previous-token heads' query and key
 *   E   = P_0      c(tok[t])            the token's code (m dims, unit norm)
 *   P_o, o=1..n    c(tok[t - o])        written by layer 1's previous-token head o
 *   O              c(copied token)      written by layer 2's match head; the classifier reads it
 *   (zeros up to a multiple of 32)
 *
 * Layer 1: n previous-token heads over 2 KV heads (GQA). Key = the constant, rotated by RoPE in 4
 *   pairs (PREV_PAIRS); the query of head o is the key turned back by o positions, so its score
 *   A^2 sum_i cos(theta_i (s - t + o)) peaks at s = t - o. Value = c(tok[s]); wo puts head o's
 *   output in P_o.
 * Layer 2: one match head (query head 0). Query = c(tok[t - o]) in slot o, key = c(tok[s - 1 - o])
 *   in slot o, for o = 0..n-1: the score counts how many of the n tokens before s match the last
 *   n tokens. Value = c(tok[s]) (the token after the match); wo puts it in O. The slots lie in
 *   the 32 slowest RoPE pairs, which turn by at most MATCH_ANGLE radians over the context.
 * FFN weights are zero; the classifier is c(v) . O, scaled.
 *
 * The token codes: 512 unit vectors in m dims with small mutual coherence (a seeded start,
 * then repulsion steps): a wrong token at one offset adds at most mu of a match to the score.
 */
import { Tensor } from '@sparq/core';
import { makeConfig, type ModelConfig } from './config.ts';
import type { LoadedModel } from './llama2c.ts';
import { mulberry32 } from './random-model.ts';
import { OUTPUT, OUTPUT_NORM, TOKEN_EMBD, layerName } from './tensor-names.ts';

export const RETRIEVAL_HEAD_DIM = 128;
/** RoPE pairs per head; the match uses the slowest half (pairs 32..63), 64 dims. */
const PAIRS = RETRIEVAL_HEAD_DIM / 2;
const MATCH_FIRST_PAIR = PAIRS / 2;
/**
 * Largest angle (radians) a match pair may turn between a key and a query ctx positions later. The
 * match score of the needle shrinks by n (1 - cos) = 0.5% of a token's worth, and a mismatched
 * token's code leaks at most sin(0.05) = 5% of its cross product into the score.
 */
export const MATCH_ANGLE = 0.05;
/** Score margins (after the 1/sqrt(d) scale) of the right position over any other: e^-24 * 128k = 5e-6 of the weight elsewhere. */
export const PREV_MARGIN = 24;
export const MATCH_MARGIN = 24;
/** The classifier's logit of the copied token; any other's is at most mu times it. */
export const COPY_LOGIT = 32;
export const RETRIEVAL_NORM_EPS = Math.fround(1e-5);
export const MIN_NGRAM = 2;
export const MAX_NGRAM = 5;

export interface RetrievalModelOptions {
  /** n: the tokens matched (default 4). */
  ngram?: number;
  /** Context length the RoPE base is chosen for, and the file's context_length (default 131072). */
  ctx?: number;
  vocabSize?: number;
  seed?: number;
}

/** What the construction chose, for the document and the tests. */
export interface RetrievalDesign {
  ngram: number;
  /** Code dims per token. */
  m: number;
  dim: number;
  ropeBase: number;
  /** Largest |c_a . c_b| and largest cross product |c_a x c_b| (pairwise), a != b. */
  coherence: number;
  cross: number;
  /** Previous-token heads: per-pair amplitude and the smallest score gap over the context. */
  prevAmplitude: number;
  prevGap: number;
  /** Match head: the code scale sigma (q and k slots hold sigma * c). */
  matchScale: number;
}

/** RoPE base so that pair 32 (the fastest match pair) turns MATCH_ANGLE over ctx positions: theta_32 = base^(-1/2). */
export function retrievalRopeBase(ctx: number): number {
  return Math.fround((ctx / MATCH_ANGLE) ** 2);
}

/** theta_i = base^(-2i/d) as rope.ts computes it (f32). */
function frequencies(base: number): number[] {
  const f = Math.fround;
  return Array.from({ length: PAIRS }, (_, i) => f(1 / f(Math.pow(f(base), f((2 * i) / RETRIEVAL_HEAD_DIM)))));
}

/**
 * The RoPE pairs the previous-token heads use: 4 pairs, 8 of the head's 128 components. A
 * positional query spread over every pair has most of its |q| in the slow pairs, which turn by
 * almost nothing over the context and so add the same score to every key: dense attention ignores
 * them (softmax is shift-invariant), but they are the components SparQ's step 1 picks, its
 * approximate scores come out flat, alpha falls to k/S and the reallocation replaces the head's
 * output with the mean value (docs/retrieval-model.md measures it). A trained model puts no weight
 * there (a score constant over the keys gets no gradient); its positional heads use the fast pairs,
 * and its queries are heavy-tailed (the paper's premise). These 4 are, of the 4-subsets of pairs
 * 0..23, the one whose smallest gap over 131072 positions is largest (0.051).
 */
export const PREV_PAIRS: readonly number[] = [1, 6, 10, 22];

/**
 * Smallest gap sum_i (1 - cos(theta_i delta)) over PREV_PAIRS and delta = 1..span: how far a
 * previous-token head's score (in units of A^2) drops from its peak at any other position. Fast
 * pairs separate the neighbours, slower ones the distant positions where the fast ones come round again.
 */
export function previousTokenGap(base: number, span: number): number {
  const theta = frequencies(base);
  let gap = Infinity;
  for (let delta = 1; delta <= span; delta++) {
    let g = 0;
    for (const i of PREV_PAIRS) g += 1 - Math.cos(theta[i] * delta);
    gap = Math.min(gap, g);
  }
  return gap;
}

/**
 * count unit vectors in m dims (m even) with small coherence: seeded Gaussian starts, then steps that
 * push each vector away from those it is most aligned with (gradient of sum (c_a . c_b)^4).
 */
export function tokenCodes(count: number, m: number, seed: number): Float64Array[] {
  const random = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const codes = Array.from({ length: count }, () => normalize(Float64Array.from({ length: m }, gauss)));
  const step = new Float64Array(m);
  for (let iter = 0; iter < 20; iter++) {
    for (let a = 0; a < count; a++) {
      step.fill(0);
      const ca = codes[a];
      for (let b = 0; b < count; b++) {
        if (b === a) continue;
        const cb = codes[b];
        let dot = 0;
        for (let j = 0; j < m; j++) dot += ca[j] * cb[j];
        const w = dot * dot * dot;
        for (let j = 0; j < m; j++) step[j] += w * cb[j];
      }
      for (let j = 0; j < m; j++) ca[j] -= 0.05 * step[j];
      normalize(ca);
    }
  }
  return codes;
}

function normalize(x: Float64Array): Float64Array {
  let s = 0;
  for (const v of x) s += v * v;
  const inv = 1 / Math.sqrt(s);
  for (let j = 0; j < x.length; j++) x[j] *= inv;
  return x;
}

/** Largest |c_a . c_b| and |sum over pairs of (c_a0 c_b1 - c_a1 c_b0)| over a != b. */
export function codeCoherence(codes: readonly Float64Array[]): { coherence: number; cross: number } {
  let coherence = 0;
  let cross = 0;
  for (let a = 0; a < codes.length; a++) {
    for (let b = a + 1; b < codes.length; b++) {
      let dot = 0;
      let x = 0;
      for (let j = 0; j < codes[a].length; j += 2) {
        dot += codes[a][j] * codes[b][j] + codes[a][j + 1] * codes[b][j + 1];
        x += codes[a][j] * codes[b][j + 1] - codes[a][j + 1] * codes[b][j];
      }
      coherence = Math.max(coherence, Math.abs(dot));
      cross = Math.max(cross, Math.abs(x));
    }
  }
  return { coherence, cross };
}

/** The model: config and tensors (f32), and the numbers its construction chose. */
export function retrievalModel(options: RetrievalModelOptions = {}): { loaded: LoadedModel; design: RetrievalDesign } {
  const { ngram: n = 4, ctx = 131072, vocabSize = 512, seed = 25 } = options;
  if (!Number.isInteger(n) || n < MIN_NGRAM || n > MAX_NGRAM)
    throw new RangeError(`retrievalModel: ngram ${n}, expected an integer in [${MIN_NGRAM}, ${MAX_NGRAM}]`);
  if (!Number.isInteger(ctx) || ctx < 16 || ctx > 1 << 24)
    throw new RangeError(`retrievalModel: ctx ${ctx}, expected an integer in [16, ${1 << 24}]`);
  const d = RETRIEVAL_HEAD_DIM;
  // m code dims per token: n slots of m dims fill the 64 match dims (m even: whole RoPE pairs).
  const m = 2 * Math.floor(PAIRS / 2 / n);
  const E = 1; // P_o starts at E + o*m
  const P = (o: number) => E + o * m;
  const O = P(n + 1);
  const dim = Math.ceil((O + m) / 32) * 32;
  const nHeads = 2 * Math.ceil(n / 2);
  const nKvHeads = 2;
  const ropeBase = retrievalRopeBase(ctx);
  const config: ModelConfig = makeConfig(
    { dim, hiddenDim: 32, nLayers: 2, nHeads, nKvHeads, vocabSize, seqLen: ctx },
    { normEps: RETRIEVAL_NORM_EPS, ropeTheta: ropeBase, sharedClassifier: false, headDim: d },
    (field, what) => {
      throw new RangeError(`retrievalModel: ${field} ${what}`);
    },
  );
  const codes = tokenCodes(vocabSize, m, seed);
  const { coherence, cross } = codeCoherence(codes);

  const tensors = new Map<string, Tensor>();
  const zeros = (name: string, shape: number[]) => {
    const t = Tensor.zeros('f32', shape);
    tensors.set(name, t);
    return t.data as Float32Array;
  };
  // Embedding: row v = [1, c(v), 0 ...], norm sqrt(2) for every token.
  const embd = zeros(TOKEN_EMBD, [vocabSize, dim]);
  for (let v = 0; v < vocabSize; v++) {
    embd[v * dim] = 1;
    for (let j = 0; j < m; j++) embd[v * dim + E + j] = codes[v][j];
  }
  // RMSNorm with unit weights multiplies x by 1 / sqrt(|x|^2 / D + eps): the projections divide it back out.
  const normScale = (sq: number) => 1 / Math.sqrt(sq / dim + RETRIEVAL_NORM_EPS);
  const u1 = normScale(2); // layer 1 input: const and c(t)
  const u2 = normScale(n + 2); // layer 2 input: const, c(t) and the n codes of P_1..P_n
  for (let l = 0; l < 2; l++) {
    zeros(layerName(l, 'attnNorm'), [dim]).fill(1);
    zeros(layerName(l, 'ffnNorm'), [dim]).fill(1);
    zeros(layerName(l, 'w1'), [32, dim]);
    zeros(layerName(l, 'w2'), [dim, 32]);
    zeros(layerName(l, 'w3'), [32, dim]);
  }

  // Layer 1: previous-token heads. Score = A^2 sum_i cos(theta_i (s - t + o)) / sqrt(d): the
  // smallest drop from the peak over the context is A^2 gap / sqrt(d) = PREV_MARGIN.
  const theta = frequencies(ropeBase);
  const prevGap = previousTokenGap(ropeBase, ctx);
  const A = Math.sqrt((PREV_MARGIN * Math.sqrt(d)) / prevGap);
  {
    const wq = zeros(layerName(0, 'wq'), [nHeads * d, dim]);
    const wk = zeros(layerName(0, 'wk'), [nKvHeads * d, dim]);
    const wv = zeros(layerName(0, 'wv'), [nKvHeads * d, dim]);
    const wo = zeros(layerName(0, 'wo'), [dim, nHeads * d]);
    for (let kvh = 0; kvh < nKvHeads; kvh++) {
      // Key: (A, 0) in each of PREV_PAIRS, from the constant; value: the token's code.
      for (const i of PREV_PAIRS) wk[(kvh * d + 2 * i) * dim] = A / u1;
      for (let j = 0; j < m; j++) wv[(kvh * d + j) * dim + E + j] = 1 / u1;
    }
    for (let h = 0; h < n; h++) {
      const o = h + 1; // head h looks o positions back; it reads KV head floor(h / (nHeads / nKvHeads))
      for (const i of PREV_PAIRS) {
        // R(-o theta_i) (A, 0): the key as it was o positions earlier.
        wq[(h * d + 2 * i) * dim] = (A * Math.cos(o * theta[i])) / u1;
        wq[(h * d + 2 * i + 1) * dim] = (-A * Math.sin(o * theta[i])) / u1;
      }
      for (let j = 0; j < m; j++) wo[(P(o) + j) * nHeads * d + h * d + j] = 1;
    }
  }

  // Layer 2: the match head (query head 0, KV head 0). A full match scores n sigma^2 / sqrt(d) (less
  // n (1 - cos MATCH_ANGLE)); a position with one wrong token at most (n - 1 + mu') sigma^2 / sqrt(d),
  // mu' = coherence + sin(MATCH_ANGLE) cross: sigma^2 sets that difference to MATCH_MARGIN.
  const leak = coherence + Math.sin(MATCH_ANGLE) * cross + n * (1 - Math.cos(MATCH_ANGLE));
  if (leak >= 1)
    throw new RangeError(
      `retrievalModel: token codes in ${m} dims are too coherent (${leak.toFixed(3)} >= 1) for ngram ${n}`,
    );
  const sigma = Math.sqrt((MATCH_MARGIN * Math.sqrt(d)) / (1 - leak));
  {
    const wq = zeros(layerName(1, 'wq'), [nHeads * d, dim]);
    const wk = zeros(layerName(1, 'wk'), [nKvHeads * d, dim]);
    const wv = zeros(layerName(1, 'wv'), [nKvHeads * d, dim]);
    const wo = zeros(layerName(1, 'wo'), [dim, nHeads * d]);
    const slot = (o: number) => 2 * MATCH_FIRST_PAIR + o * m; // head dim of slot o's first component
    for (let o = 0; o < n; o++) {
      for (let j = 0; j < m; j++) {
        wq[(slot(o) + j) * dim + P(o) + j] = sigma / u2; // query: the token o back from t
        wk[(slot(o) + j) * dim + P(o + 1) + j] = sigma / u2; // key: the token o back from s - 1
      }
    }
    for (let j = 0; j < m; j++) {
      wv[j * dim + E + j] = 1 / u2; // value: the token at s, the one after the matched n-gram
      wo[(O + j) * nHeads * d + j] = 1;
    }
  }

  // Classifier: logit(v) = lambda c(v) . x_O after the final norm; the copied token's is COPY_LOGIT.
  zeros(OUTPUT_NORM, [dim]).fill(1);
  const lambda = COPY_LOGIT / normScale(n + 3);
  const out = zeros(OUTPUT, [vocabSize, dim]);
  for (let v = 0; v < vocabSize; v++) for (let j = 0; j < m; j++) out[v * dim + O + j] = lambda * codes[v][j];

  return {
    loaded: { config, tensors, format: `retrieval model (${n}-gram induction, by construction)` },
    design: { ngram: n, m, dim, ropeBase, coherence, cross, prevAmplitude: A, prevGap, matchScale: sigma },
  };
}
