/**
 * Error classes. Messages follow one pattern, `op: what, got X, expected Y`, so
 * a user can fix the call from the message alone. Every backend throws the same
 * class for the same bad input because validation runs in core, before dispatch.
 */

/** Base of every error the engine throws on purpose. */
export class SparqError extends Error {
  override name = 'SparqError';
}

/** Tensor shapes do not fit together; the message names both shapes. */
export class ShapeError extends SparqError {
  override name = 'ShapeError';
}

/** A tensor has the wrong element type. */
export class DTypeError extends SparqError {
  override name = 'DTypeError';
}

/**
 * A size, count or position is outside its valid interval, or not an integer.
 * Extends the built-in RangeError's meaning; the message gives the interval.
 */
export class SparqRangeError extends SparqError {
  override name = 'RangeError';
}

/** The input holds NaN or infinity where a finite value is required (quantization). */
export class NonFiniteError extends SparqError {
  override name = 'NonFiniteError';
}

/** Appending to a KV cache would pass its capacity; the cache is left unchanged. */
export class CapacityError extends SparqError {
  override name = 'CapacityError';
}

/**
 * The backend does not implement this op, or not for this dtype (declared absent, never faked).
 * With a dtype, the message lists the dtypes the backend does handle.
 */
export class UnsupportedOpError extends SparqError {
  override name = 'UnsupportedOpError';
  readonly op: string;
  readonly backend: string;
  readonly dtype: string | undefined;

  constructor(op: string, backend: string, dtype?: string, supported: readonly string[] = []) {
    super(
      dtype === undefined
        ? `${op}: not implemented by backend '${backend}'`
        : `${op}: dtype ${dtype} is not implemented by backend '${backend}' (it has ${supported.join(', ') || 'none'})`,
    );
    this.op = op;
    this.backend = backend;
    this.dtype = dtype;
  }
}

/** A backend could not be loaded or initialised; `reason` says why. */
export class BackendUnavailableError extends SparqError {
  override name = 'BackendUnavailableError';
}

/** A file (model, tokenizer, vectors) is malformed; the message names the field and byte offset. */
export class FormatError extends SparqError {
  override name = 'FormatError';
}

/** Formats a shape as `[2, 3]` for messages. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}
