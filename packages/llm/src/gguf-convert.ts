/**
 * A loaded model (llama2.c or GGUF) as GGUF tensors of one type: F32, F16,
 * Q4_0, Q4_1 or Q8_0 for the matrices (ggml blocks quantized by the engine,
 * byte-exact with ggml), F32 for 1-D norms as llama.cpp keeps them. A matrix
 * whose rows are not whole 32-element blocks stays F32 (noted). With a shared
 * classifier no output.weight is written: llama.cpp then uses token_embd.
 */
import { Tensor, f32ToF16, type BlockDType, type Engine } from '@sparq/core';
import { toF32 } from './gguf-llama.ts';
import type { GGUFTensorEntry } from './gguf-write.ts';
import type { LoadedModel } from './llama2c.ts';
import { expectedTensors } from './tensor-names.ts';

export type GGUFFileType = 'f32' | 'f16' | 'q4_0' | 'q4_1' | 'q8_0';
export const GGUF_FILE_TYPES: readonly GGUFFileType[] = ['f32', 'f16', 'q4_0', 'q4_1', 'q8_0'];

/** `t` converted to `type` (a new tensor unless it already is that type). */
export function convertTensor(engine: Engine, t: Tensor, type: GGUFFileType): Tensor {
  if (t.dtype === type) return t;
  const f32 = toF32(t, engine);
  if (type === 'f32') return f32;
  if (type === 'f16') {
    const out = Tensor.zeros('f16', f32.shape);
    for (let i = 0; i < out.size; i++) out.data[i] = f32ToF16(f32.data[f32.offset + i]);
    return out;
  }
  const out = Tensor.zeros(type as BlockDType, f32.shape);
  engine.quantize(out, f32);
  return out;
}

/** Every tensor of the model, in llama.cpp's order, converted; `progress` hears each name. */
export function ggufTensors(engine: Engine, loaded: LoadedModel, type: GGUFFileType, progress?: (done: number, total: number, name: string, dtype: string) => void): { tensors: GGUFTensorEntry[]; notes: string[] } {
  const list = expectedTensors(loaded.config);
  const notes: string[] = [];
  const tensors = list.map(({ name }, i) => {
    const t = loaded.tensors.get(name)!;
    let want = t.rank === 1 ? 'f32' : type;
    // Block types need whole 32-element blocks along each row.
    if (want !== 'f32' && want !== 'f16' && t.shape[t.rank - 1] % 32 !== 0) {
      notes.push(`${name} kept F32: ${t.shape[t.rank - 1]} columns are not whole 32-element blocks`);
      want = 'f32';
    }
    const tensor = convertTensor(engine, t, want as GGUFFileType);
    progress?.(i + 1, list.length, name, tensor.dtype);
    return { name, tensor };
  });
  return { tensors, notes };
}
