/**
 * The environment variables the native addon reads when it loads, checked
 * first: a bad value is an error naming the variable and what it takes,
 * never silently ignored (and never a thread pool of 100,000 threads).
 *   SPARQ_THREADS        worker threads, a decimal integer in [1, MAX_THREADS]
 *   SPARQ_SPIN_US        how long idle pool threads busy-wait before they sleep, in
 *                        microseconds, a decimal integer in [0, MAX_SPIN_US] (default 500)
 *   SPARQ_NATIVE_KERNEL  narrow the SIMD path: scalar | avx2 | avx512
 */
import { SparqRangeError } from '@sparq/core';

/** The most threads the pool takes (the addon's attnSetThreads limit too). */
export const MAX_THREADS = 256;
/** The longest busy wait SPARQ_SPIN_US takes (the addon's kMaxSpinMicros, threads.cc). */
export const MAX_SPIN_US = 100_000;
export const KERNEL_NAMES = ['scalar', 'avx2', 'avx512'] as const;

/** Throws SparqRangeError naming the first variable whose value is not one the addon takes. */
export function checkNativeEnvironment(env: Record<string, string | undefined> = process.env): void {
  const threads = env.SPARQ_THREADS;
  if (threads !== undefined && !(/^\d+$/.test(threads) && Number(threads) >= 1 && Number(threads) <= MAX_THREADS)) {
    throw new SparqRangeError(`SPARQ_THREADS=${threads}, expected a decimal integer in [1, ${MAX_THREADS}]`);
  }
  const spin = env.SPARQ_SPIN_US;
  if (spin !== undefined && !(/^\d+$/.test(spin) && Number(spin) <= MAX_SPIN_US)) {
    throw new SparqRangeError(`SPARQ_SPIN_US=${spin}, expected a decimal integer in [0, ${MAX_SPIN_US}]`);
  }
  const kernel = env.SPARQ_NATIVE_KERNEL;
  if (kernel !== undefined && !(KERNEL_NAMES as readonly string[]).includes(kernel)) {
    throw new SparqRangeError(`SPARQ_NATIVE_KERNEL=${kernel}, expected one of ${KERNEL_NAMES.join(', ')}`);
  }
}
