/**
 * A loaded model (llama2.c or GGUF) as GGUF tensors of one type for the
 * matrices: F32, F16, BF16, or any ggml block type the engine quantizes
 * (byte-exact with ggml's reference quantizers); F32 for 1-D norms as
 * llama.cpp keeps them. A matrix whose rows are not whole blocks of the type
 * (32 elements, 256 for K-quants and IQ4_XS) stays F32 (noted). With a shared
 * classifier no output.weight is written: llama.cpp then uses token_embd.
 */
import {
  BLOCK_DTYPES,
  BLOCK_LAYOUT,
  SparqRangeError,
  Tensor,
  f32ToBf16,
  f32ToF16,
  isBlockDType,
  type BlockDType,
  type Engine,
} from '@sparq/core';
import { toF32 } from './gguf-llama.ts';
import type { GGUFTensorEntry } from './gguf-write.ts';
import type { LoadedModel } from './llama2c.ts';
import { namingTensor } from './tensor-check.ts';
import { expectedTensors } from './tensor-names.ts';

/** The smallest |x| that f16 rounding (to nearest even) turns into infinity: 65504 + half a step of 32. */
const F16_ROUNDS_TO_INF = 65520;

/** A tensor type `writeGGUFFile` and `sparq convert` can write. */
export type GGUFFileType = 'f32' | 'f16' | 'bf16' | BlockDType;
/** Every GGUFFileType. */
export const GGUF_FILE_TYPES: readonly GGUFFileType[] = ['f32', 'f16', 'bf16', ...BLOCK_DTYPES];

/** `t` converted to `type` (a new tensor unless it already is that type). */
export function convertTensor(engine: Engine, t: Tensor, type: GGUFFileType): Tensor {
  if (t.dtype === type) return t;
  const f32 = toF32(t, engine);
  if (type === 'f32') return f32;
  if (type === 'f16' || type === 'bf16') {
    const out = Tensor.zeros(type, f32.shape);
    const round = type === 'f16' ? f32ToF16 : f32ToBf16;
    for (let i = 0; i < out.size; i++) {
      const v = f32.data[f32.offset + i];
      // Past 65520 an f32 rounds to f16 infinity (bf16 has f32's range).
      if (type === 'f16' && !(Math.abs(v) < F16_ROUNDS_TO_INF))
        throw new SparqRangeError(
          `convert: element ${i} is ${v}, expected a finite |x| < ${F16_ROUNDS_TO_INF} to fit f16`,
        );
      out.data[i] = round(v);
    }
    return out;
  }
  const out = Tensor.zeros(type, f32.shape);
  engine.quantize(out, f32);
  return out;
}

/** Every tensor of the model, in llama.cpp's order, converted; `progress` hears each name. */
export function ggufTensors(
  engine: Engine,
  loaded: LoadedModel,
  type: GGUFFileType,
  progress?: (done: number, total: number, name: string, dtype: string) => void,
): { tensors: GGUFTensorEntry[]; notes: string[] } {
  const list = expectedTensors(loaded.config);
  const notes: string[] = [];
  const tensors = list.map(({ name }, i) => {
    const t = loaded.tensors.get(name)!;
    let want: GGUFFileType = t.rank === 1 ? 'f32' : type;
    // Block types need whole blocks along each row.
    const cols = t.shape[t.rank - 1];
    if (isBlockDType(want) && cols % BLOCK_LAYOUT[want].elements !== 0) {
      notes.push(
        `${name} kept F32: ${cols} columns are not whole ${BLOCK_LAYOUT[want].elements}-element ${want} blocks`,
      );
      want = 'f32';
    }
    const tensor = namingTensor(name, () => convertTensor(engine, t, want));
    progress?.(i + 1, list.length, name, tensor.dtype);
    return { name, tensor };
  });
  return { tensors, notes };
}
