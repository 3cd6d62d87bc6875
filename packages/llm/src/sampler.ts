/**
 * Sampling the next token from logits, as llama2.c's run.c does it, so a seed
 * gives the same draws: greedy argmax at temperature 0; otherwise logits /
 * temperature, softmax, one coin from the xorshift64* generator, and either
 * the full distribution or top-p (nucleus) sampling. Sums are kept in f32
 * (Math.fround) like run.c's floats. Known difference: run.c's qsort is not
 * stable; top-p here orders equal probabilities by lower id.
 */
import { DEFAULT_TOP_P, renamed } from './options.ts';

/** llama2.c's xorshift64* generator: random_u32 and random_f32. */
export class XorShiftRng {
  private state: bigint;

  constructor(seed: bigint | number) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }

  /** The next 32 random bits. */
  u32(): number {
    let s = this.state;
    s ^= s >> 12n;
    s = BigInt.asUintN(64, s ^ (s << 25n));
    s ^= s >> 27n;
    this.state = s;
    return Number(BigInt.asUintN(64, s * 0x2545f4914f6cdd1dn) >> 32n);
  }

  /** A float in [0, 1): the top 24 bits of u32 / 2^24. */
  f32(): number {
    return (this.u32() >>> 8) / 16777216;
  }
}

/** The Sampler's temperature, nucleus threshold and seed. */
export interface SamplerOptions {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus threshold; <= 0 or >= 1 samples the full distribution; default DEFAULT_TOP_P (0.9). */
  topP?: number;
  /** @deprecated The older name of topP. */
  topp?: number;
  seed: bigint | number;
}

/** run.c's sampler: greedy at temperature 0, else softmax sampling (with top-p) from a seeded xorshift64* generator. */
export class Sampler {
  private readonly rng: XorShiftRng;
  private readonly temperature: number;
  private readonly topp: number;
  /** (vocab) candidate ids for top-p, allocated once. */
  private readonly order: Int32Array;

  constructor(vocabSize: number, options: SamplerOptions) {
    this.temperature = Math.fround(options.temperature);
    this.topp = Math.fround(renamed('Sampler', 'topP', options.topP, 'topp', options.topp) ?? DEFAULT_TOP_P);
    this.rng = new XorShiftRng(options.seed);
    this.order = new Int32Array(vocabSize);
  }

  /** The next token; modifies `logits` in place (divided by temperature, then probabilities). */
  sample(logits: Float32Array): number {
    if (this.temperature === 0) return argmax(logits);
    for (let i = 0; i < logits.length; i++) logits[i] = logits[i] / this.temperature;
    softmax(logits);
    const coin = this.rng.f32();
    if (this.topp <= 0 || this.topp >= 1) return sampleMult(logits, coin);
    return this.sampleTopp(logits, coin);
  }

  /** Top-p: the smallest set of most likely tokens whose probability exceeds topp, then sample within it. */
  private sampleTopp(probs: Float32Array, coin: number): number {
    const f = Math.fround;
    const n = probs.length;
    // Tokens below this cannot be in the nucleus: drop them before sorting (run.c's shortcut).
    const cutoff = f(f(1 - this.topp) / (n - 1));
    let n0 = 0;
    for (let i = 0; i < n; i++) if (probs[i] >= cutoff) this.order[n0++] = i;
    const cand = this.order.subarray(0, n0);
    cand.sort((a, b) => probs[b] - probs[a] || a - b);
    // Truncate where the cumulative probability first exceeds topp.
    let cumulative = 0;
    let last = n0 - 1;
    for (let i = 0; i < n0; i++) {
      cumulative = f(cumulative + probs[cand[i]]);
      if (cumulative > this.topp) {
        last = i;
        break;
      }
    }
    // Sample from the truncated list, scaled by its mass.
    const r = f(coin * cumulative);
    let cdf = 0;
    for (let i = 0; i <= last; i++) {
      cdf = f(cdf + probs[cand[i]]);
      if (r < cdf) return cand[i];
    }
    return cand[last];
  }
}

/** Index of the largest value, the first on ties. */
export function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** In-place softmax in f32: subtract the max (for numerical stability), exp, normalise. */
function softmax(x: Float32Array): void {
  const f = Math.fround;
  let max = x[0];
  for (let i = 1; i < x.length; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    x[i] = Math.exp(f(x[i] - max));
    sum = f(sum + x[i]);
  }
  for (let i = 0; i < x.length; i++) x[i] = x[i] / sum;
}

/** Inverse-CDF draw from probabilities with coin in [0, 1). */
function sampleMult(probs: Float32Array, coin: number): number {
  let cdf = 0;
  for (let i = 0; i < probs.length; i++) {
    cdf = Math.fround(cdf + probs[i]);
    if (coin < cdf) return i;
  }
  return probs.length - 1;
}
