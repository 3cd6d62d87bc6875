/**
 * The environment variables the native addon reads when it loads, checked
 * first: a bad value is an error naming the variable and what it takes,
 * never silently ignored (and never a thread pool of 100,000 threads).
 *   SPARQ_THREADS        worker threads, a decimal integer in [1, MAX_THREADS]
 *   SPARQ_SPIN_US        how long idle pool threads busy-wait before they sleep, in
 *                        microseconds, a decimal integer in [0, MAX_SPIN_US] (default 500)
 *   SPARQ_NATIVE_KERNEL  narrow the SIMD path: scalar | avx2 | avx512 (x86-64), scalar | neon
 *                        (arm64); a path this CPU cannot run is an error too (checkKernelRequest),
 *                        not a silent fall back to a narrower one
 */
import { SparqRangeError } from '@sparq/core';

/** The most threads the pool takes (the addon's attnSetThreads limit too). */
export const MAX_THREADS = 256;
/** The longest busy wait SPARQ_SPIN_US takes (the addon's kMaxSpinMicros, threads.cc). */
export const MAX_SPIN_US = 100_000;
export const KERNEL_NAMES = ['scalar', 'avx2', 'avx512', 'neon'] as const;

/** Throws SparqRangeError naming the first variable whose value is not one the addon takes. */
export function checkNativeEnvironment(env: Record<string, string | undefined> = process.env): void {
  checkDecimal(env, 'SPARQ_THREADS', 1, MAX_THREADS);
  checkDecimal(env, 'SPARQ_SPIN_US', 0, MAX_SPIN_US);
  const kernel = env.SPARQ_NATIVE_KERNEL;
  if (kernel !== undefined && !(KERNEL_NAMES as readonly string[]).includes(kernel)) {
    throw new SparqRangeError(`SPARQ_NATIVE_KERNEL=${kernel}, expected one of ${KERNEL_NAMES.join(', ')}`);
  }
}

/** Variable `name`, when set, must be a decimal integer in [lo, hi] (the addon's env_integer, threads.cc). */
function checkDecimal(env: Record<string, string | undefined>, name: string, lo: number, hi: number): void {
  const value = env[name];
  if (value !== undefined && !(/^\d+$/.test(value) && Number(value) >= lo && Number(value) <= hi)) {
    throw new SparqRangeError(`${name}=${value}, expected a decimal integer in [${lo}, ${hi}]`);
  }
}

/**
 * Throws SparqRangeError when SPARQ_NATIVE_KERNEL asks for a path that is not
 * among `supported` (the addon's kernelPaths().supported, narrowest first):
 * the addon would otherwise run a narrower path without a word.
 */
export function checkKernelRequest(
  supported: readonly string[],
  env: Record<string, string | undefined> = process.env,
): void {
  const kernel = env.SPARQ_NATIVE_KERNEL;
  if (kernel === undefined || supported.includes(kernel)) return;
  throw new SparqRangeError(
    `SPARQ_NATIVE_KERNEL=${kernel}: this CPU does not run the ${kernel} path, expected one of ${supported.join(', ')}`,
  );
}
