/**
 * Weights as untrusted input: `checkTensors` (the CLI's --check-tensors)
 * finds a NaN or infinity in any weight or quantization scale at load, and
 * `namingTensor` puts the tensor's name on an error a conversion throws.
 */
import {
  BLOCK_LAYOUT,
  NonFiniteError,
  SparqRangeError,
  Tensor,
  isBlockDType,
  type BlockDType,
  type Engine,
} from '@sparq/core';
import { toF32 } from './gguf-llama.ts';
import type { LoadedModel } from './llama2c.ts';

/** Elements dequantized at a time while checking a block tensor (bounds the scratch memory). */
const CHECK_CHUNK = 1 << 20;

/**
 * Throws NonFiniteError naming the first tensor holding a NaN or infinity,
 * with its row and column. Block types are dequantized row by row: a scale
 * (or minimum) that is NaN or infinite makes its block's values non-finite,
 * so this checks every scale as well as every plain value.
 */
export function checkTensors(engine: Engine, loaded: LoadedModel): void {
  for (const [name, t] of loaded.tensors) {
    const cols = t.shape[t.rank - 1];
    const rows = t.size / cols;
    const rowsPerChunk = Math.max(1, Math.floor(CHECK_CHUNK / cols));
    const flat = t.reshape(rows, cols);
    for (let r0 = 0; r0 < rows; r0 += rowsPerChunk) {
      const part = flat.slice(0, r0, Math.min(rows, r0 + rowsPerChunk));
      const values = isBlockDType(t.dtype) ? dequantized(engine, part as Tensor<BlockDType>) : toF32(part);
      const i = firstNonFinite(values.data, values.offset, values.size);
      if (i >= 0) {
        const row = r0 + Math.floor(i / cols);
        const col = i % cols;
        const where = isBlockDType(t.dtype)
          ? ` (in the block of columns ${col - (col % BLOCK_LAYOUT[t.dtype].elements)}.., its scale or values)`
          : '';
        throw new NonFiniteError(
          `tensor "${name}" (${t.dtype}, shape [${t.shape.join(', ')}]): element [${row}, ${col}] is ${values.data[values.offset + i]}${where}, expected finite weights`,
        );
      }
    }
  }
}

function dequantized(engine: Engine, t: Tensor<BlockDType>): Tensor<'f32'> {
  const out = Tensor.zeros('f32', t.shape);
  engine.dequantize(out, t);
  return out;
}

/** Index of the first NaN or infinity in data[offset, offset + count), or -1. */
function firstNonFinite(data: Float32Array, offset: number, count: number): number {
  for (let i = 0; i < count; i++) {
    const v = data[offset + i];
    if (v - v !== 0) return i;
  }
  return -1;
}

/** Runs `convert`, putting `tensor "name": ` before the message of a value error it throws (same class). */
export function namingTensor<T>(name: string, convert: () => T): T {
  try {
    return convert();
  } catch (error) {
    if (error instanceof NonFiniteError) throw new NonFiniteError(`tensor "${name}": ${error.message}`);
    if (error instanceof SparqRangeError) throw new SparqRangeError(`tensor "${name}": ${error.message}`);
    throw error;
  }
}
