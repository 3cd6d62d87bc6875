/**
 * Flag parsing for the commands: node's parseArgs with its errors turned into
 * UsageError, and checked conversions of values. Numbers are decimal only
 * (no 0x10, no 1e8 for a count), integers within their named range, and a
 * negative number after a flag is taken as its value (so `--seq -5` says
 * what range --seq wants, not that the option is ambiguous).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { SparqRangeError } from '@sparq/core';
import { checkChoice, type NumberCheck as OptionCheck } from '@sparq/llm/options';
import { UsageError } from './command.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses `argv` against `options` (no positionals); bad flags become UsageError. */
export function parseFlags<O extends Options>(argv: string[], options: O) {
  return parseFlagsAndFiles(argv, options, false).values;
}

/** As parseFlags, with positional arguments (file names) allowed when `positionals` is true. */
export function parseFlagsAndFiles<O extends Options>(argv: string[], options: O, positionals: boolean) {
  try {
    return parseArgs({ args: negativeValues(argv, options), options, strict: true, allowPositionals: positionals });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** `--flag -5` as `--flag=-5` for string-valued flags, so a negative number is a value parseArgs passes on. */
function negativeValues(argv: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const next = argv[i + 1];
    const name = arg.startsWith('--')
      ? arg.slice(2)
      : Object.keys(options).find((k) => options[k].short !== undefined && arg === `-${options[k].short}`);
    if (name !== undefined && options[name]?.type === 'string' && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** `raw` if it is one of `allowed`, `fallback` if absent, else a UsageError listing the choices (the library's checkChoice, in flag names). */
export function choice<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[], fallback: T): T {
  if (raw === undefined) return fallback;
  return asUsage(() => checkChoice(`--${flag}`, raw, allowed));
}

/** `run`'s result; a SparqRangeError it throws (a library check) becomes a UsageError with the same message. */
export function asUsage<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof SparqRangeError) throw new UsageError(error.message);
    throw error;
  }
}

/** A check of a flag's number; an integer check (isInt) also requires the value be written as a decimal integer. */
type NumberCheck = ((n: number) => boolean) & { integer?: boolean };

/** Plain decimal notation: 12, -3, 0.5, .5, 1e-3 (no hex, no Infinity, no spaces). */
const DECIMAL = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
const DECIMAL_INTEGER = /^[-+]?\d+$/;

/**
 * `raw` as a number passing the check, `fallback` if absent, else a UsageError
 * saying what was expected. The check is a function and its `expected` words,
 * or one of the library's (options.ts's CHECKS), so a flag and the library
 * option of the same meaning accept the same values and say the same.
 */
export function number(
  flag: string,
  raw: string | undefined,
  fallback: number,
  check: NumberCheck | OptionCheck,
  expected?: string,
): number {
  if (raw === undefined) return fallback;
  const { ok, integer, words } =
    typeof check === 'function'
      ? { ok: check, integer: check.integer, words: expected }
      : { ok: check.ok, integer: check.integer, words: check.expected };
  const n = Number(raw);
  if (!(integer ? DECIMAL_INTEGER : DECIMAL).test(raw) || !ok(n))
    throw new UsageError(`--${flag} ${raw}, expected ${words}`);
  return n;
}

/** A check for integers in [min, max], written in decimal. */
export const isInt = (min: number, max = Number.MAX_SAFE_INTEGER): NumberCheck =>
  Object.assign((n: number) => Number.isSafeInteger(n) && n >= min && n <= max, { integer: true });
