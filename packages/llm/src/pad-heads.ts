/**
 * A llama model with every attention head zero-padded from headDim to `to` components, computing
 * the same function: ggml's q8_0 / q4_0 rows need head dims that are multiples of 32, and
 * stories260K's are 8. The accuracy benches (bench/kt-accuracy.ts, bench/kv-accuracy.ts) run it in
 * sparq (through buildModel) and in llama.cpp (written as GGUF), so both engines run the same
 * padded weights.
 *
 *   wq (nHeads * from, dim)   -> (nHeads * to, dim)    head h's rows at h * to, times sqrt(to / from)
 *   wk, wv (nKv * from, dim)  -> (nKv * to, dim)       head h's rows at h * to
 *   wo (dim, nHeads * from)   -> (dim, nHeads * to)    head h's columns at h * to
 *   the rest zero.
 *
 * Why it is the same function:
 * - q and k have zeros past component `from` of each head, so q . k is unchanged; the attention
 *   temperature becomes 1/sqrt(to), which the sqrt(to / from) on q cancels.
 * - RoPE pair p turns at theta^(-2p / headDim) in both engines (llama.cpp requires rotating the
 *   whole head of a llama). theta' = theta^(to / from) gives pair p < from / 2 its old frequency,
 *   theta'^(-2p / to) = theta^(-2p / from); the pairs past it rotate zeros.
 * - V's zero components give zero outputs, which wo's zero columns ignore.
 */
import { SparqRangeError, Tensor } from '@sparq/core';
import type { LoadedModel } from './llama2c.ts';

/** The tensors of `loaded` (a llama, f32 matrices) with every head padded to `to` components. */
export function padHeads(loaded: LoadedModel, to: number): LoadedModel {
  const c = loaded.config;
  const from = c.headDim;
  if (!Number.isInteger(to) || to < from || to % 2 !== 0)
    throw new SparqRangeError(`padHeads: to ${to}, expected an even integer >= the head dim ${from}`);
  if (c.arch !== 'llama' || c.attnBias || c.ropeFreqs || c.ropeScaling.type !== 'none')
    throw new SparqRangeError(
      `padHeads: a ${c.arch} model${c.attnBias ? ' with attention biases' : ''}${c.ropeFreqs ? ' with rope_freqs' : ''}, rope scaling ${c.ropeScaling.type}; expected a llama without biases or RoPE scaling`,
    );
  const rows = (w: Tensor, heads: number, scale: number): Tensor<'f32'> => {
    const x = w as Tensor<'f32'>;
    const [, cols] = x.shape;
    const out = Tensor.zeros('f32', [heads * to, cols]);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < from; i++) {
        for (let j = 0; j < cols; j++)
          out.data[(h * to + i) * cols + j] = scale * x.data[x.offset + (h * from + i) * cols + j];
      }
    }
    return out;
  };
  const columns = (w: Tensor, heads: number): Tensor<'f32'> => {
    const x = w as Tensor<'f32'>;
    const [n] = x.shape;
    const out = Tensor.zeros('f32', [n, heads * to]);
    for (let r = 0; r < n; r++) {
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < from; i++)
          out.data[(r * heads + h) * to + i] = x.data[x.offset + (r * heads + h) * from + i];
    }
    return out;
  };
  const tensors = new Map(loaded.tensors);
  for (const [name, t] of loaded.tensors) {
    if (t.dtype !== 'f32' && /attn_(q|k|v|output)\.weight$/.test(name))
      throw new SparqRangeError(`padHeads: ${name} is ${t.dtype}, expected f32`);
    if (name.endsWith('attn_q.weight')) tensors.set(name, rows(t, c.nHeads, Math.sqrt(to / from)));
    else if (name.endsWith('attn_k.weight') || name.endsWith('attn_v.weight'))
      tensors.set(name, rows(t, c.nKvHeads, 1));
    else if (name.endsWith('attn_output.weight')) tensors.set(name, columns(t, c.nHeads));
  }
  const config = {
    ...c,
    headDim: to,
    qDim: c.nHeads * to,
    kvDim: c.nKvHeads * to,
    ropeTheta: Math.pow(c.ropeTheta, to / from),
  };
  return { config, tensors, format: `${loaded.format}, heads zero-padded ${from} -> ${to}` };
}
