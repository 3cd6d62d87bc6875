/**
 * Large buffers (KV caches, weights) and the operating system's huge pages.
 *
 * Attention and weight products stream hundreds of MB per token. With 4 KiB pages the
 * hardware prefetchers stop at every page boundary and each page costs a TLB entry; with
 * 2 MiB pages one core streams faster. Measured on a 2-core AMD EPYC (Zen 4) VM, one
 * thread: a plain read of 512 MiB went from 26 to 35 GB/s, and native dense decode at
 * S = 32k (f32, 32 heads x d 128) took 18% less CPU time.
 *
 * JavaScript cannot ask for huge pages, so a backend that can (the native addon, through
 * madvise(MADV_HUGEPAGE) on Linux with transparent huge pages in `madvise` or `always`
 * mode) registers an advisor here, and every large buffer of the engine is allocated
 * through allocBuffer, which advises it before anything touches its pages. Without an
 * advisor, or where the OS declines, buffers are ordinary: only speed differs.
 */
import { SparqRangeError } from './errors.ts';

/** Asks the OS to back `buffer` with huge pages; may do nothing. Must not throw. */
export type MemoryAdvisor = (buffer: ArrayBufferLike) => void;

/** Smaller buffers are left alone: a huge page is 2 MiB, and only whole ones inside a buffer can be used. */
export const ADVISE_MIN_BYTES = 4 << 20;

let advisor: MemoryAdvisor | null = null;

/** Installs (or, with null, removes) the advisor allocBuffer calls on large buffers; returns the previous one. */
export function setMemoryAdvisor(fn: MemoryAdvisor | null): MemoryAdvisor | null {
  const previous = advisor;
  advisor = fn;
  return previous;
}

/** A zeroed buffer of `bytes` (a SharedArrayBuffer when `shared`); large ones advised first. `what` names it in errors. */
export function allocBuffer(bytes: number, shared = false, what = 'buffer'): ArrayBufferLike {
  let buffer: ArrayBufferLike;
  try {
    buffer = shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
  } catch {
    // The engine's own RangeError ("Array buffer allocation failed") as the project's, with the size.
    throw new SparqRangeError(`${what}: ${bytes} bytes cannot be allocated`);
  }
  if (advisor && bytes >= ADVISE_MIN_BYTES) advisor(buffer);
  return buffer;
}
