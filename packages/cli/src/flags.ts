/**
 * Flag parsing for the llm commands (generate, convert): node's parseArgs
 * with its errors turned into UsageError, and checked conversions of values.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './command.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses `argv` against `options` (no positionals); bad flags become UsageError. */
export function parseFlags<O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** `raw` if it is one of `allowed`, `fallback` if absent, else a UsageError listing the choices. */
export function choice<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[], fallback: T): T {
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw new UsageError(`--${flag} ${raw}, expected one of ${allowed.join(', ')}`);
  return raw as T;
}

/** `raw` as a number passing `ok`, `fallback` if absent, else a UsageError saying what was expected. */
export function number(flag: string, raw: string | undefined, fallback: number, ok: (n: number) => boolean, expected: string): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !ok(n)) throw new UsageError(`--${flag} ${raw}, expected ${expected}`);
  return n;
}

/** A predicate for integers in [min, max]. */
export const isInt = (min: number, max = Number.MAX_SAFE_INTEGER) => (n: number) => Number.isInteger(n) && n >= min && n <= max;
