/**
 * A random model (see randomLlama in @sparq/llm) as a llama2.c checkpoint, for the file tests.
 */
import { tensorBytes, type LoadedModel } from '@sparq/llm';

/** `loaded` as a llama2.c checkpoint (unshared classifier: negative vocab_size), byte for byte as run.c reads it. */
export function llama2cCheckpoint(loaded: LoadedModel): Uint8Array {
  const c = loaded.config;
  const header = new Uint8Array(
    Int32Array.of(c.dim, c.hiddenDim, c.nLayers, c.nHeads, c.nKvHeads, -c.vocabSize, c.seqLen).buffer,
  );
  const get = (name: string) => tensorBytes(loaded.tensors.get(name)!);
  const stacked = (kind: string) => Array.from({ length: c.nLayers }, (_, l) => get(`blk.${l}.${kind}.weight`));
  const kinds = [
    'attn_norm',
    'attn_q',
    'attn_k',
    'attn_v',
    'attn_output',
    'ffn_norm',
    'ffn_gate',
    'ffn_down',
    'ffn_up',
  ];
  const freqCis = new Uint8Array(c.seqLen * c.headDim * 4); // unused by readers
  return new Uint8Array(
    Buffer.concat([
      header,
      get('token_embd.weight'),
      ...kinds.flatMap(stacked),
      get('output_norm.weight'),
      freqCis,
      get('output.weight'),
    ]),
  );
}
