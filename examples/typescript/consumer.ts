// A TypeScript consumer (moduleResolution NodeNext, strict): the types that
// ship with sparq. `tsc --noEmit -p examples/typescript` checks it.
import {
  KVCache,
  Tensor,
  loadModel,
  selectBackend,
  type FinishReason,
  type GenerationOptions,
  type LanguageModel,
} from 'sparq';
// The runtime's internals are subpaths of the same package (docs/api.md).
import { shapeSize } from 'sparq/core';
import { mulberry32 } from 'sparq/llm';

export async function story(path: string, signal?: AbortSignal): Promise<{ text: string; finish: FinishReason }> {
  const model: LanguageModel = await loadModel(path, { attention: { method: 'sparq' }, kv: 'f16' });
  const options: GenerationOptions = {
    maxTokens: 100,
    temperature: 0.8,
    topP: 0.9,
    seed: 1,
    stop: ['The end'],
    signal,
    onProgress: ({ done, total }) => void [done, total],
  };
  const generation = model.createSession({ contextSize: 256 }).generate('Once upon a time', options);
  let text = '';
  for await (const piece of generation) text += piece;
  return { text, finish: generation.result!.finishReason };
}

export async function rawDecode(): Promise<Float32Array> {
  const engine = await selectBackend({ backend: 'reference' });
  const cache = new KVCache({ nKvHeads: 1, headDim: 8, capacity: 16 });
  engine.kvAppend(cache, 0, Tensor.zeros('f32', [4, 1, 8]), Tensor.zeros('f32', [4, 1, 8]));
  const out = Tensor.zeros('f32', [1, 2, 8]);
  engine.sparqDecode(out, Tensor.zeros('f32', [1, 2, 8]), cache, { r: 2, k: 2, l: 1, reallocate: true });
  return out.data;
}

/** Random f32 values of `shape`, seeded, from the runtime's test generator. */
export function randomTensor(shape: number[], seed: number): Tensor {
  const random = mulberry32(seed);
  return Tensor.f32(shape, Float32Array.from({ length: shapeSize(shape) }, random));
}
