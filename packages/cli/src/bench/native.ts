/**
 * What the benchmark controls on the native backend beyond the Engine: its
 * thread pool (one pool for every op) and the streaming-read probe. Absent
 * (with the reason) when the addon did not build.
 */
import { attentionAddon, loadAddon } from '@sparq/native';

export interface NativeControls {
  /** The SIMD path in use, e.g. 'avx2'. */
  kernel: string;
  /** The pool's size at start (SPARQ_THREADS, else every core). */
  defaultThreads: number;
  setThreads(n: number): void;
  /** Sums x on every pool thread: a streaming read with no stores. */
  readSum(x: Float32Array): number;
}

export function nativeControls(): NativeControls | { missing: string } {
  try {
    const addon = loadAddon();
    const a = attentionAddon(addon);
    return {
      kernel: addon.info().kernel,
      defaultThreads: a.attnThreads(),
      setThreads: (n) => void a.attnSetThreads(n),
      readSum: (x) => a.attnReadSum(x),
    };
  } catch (error) {
    return { missing: (error as Error).message };
  }
}

/** Runs `body` with `n` native threads, restoring the default after it (also on error). */
export async function withThreads<T>(native: NativeControls | null, n: number, body: () => T | Promise<T>): Promise<T> {
  native?.setThreads(n);
  try {
    return await body();
  } finally {
    native?.setThreads(native.defaultThreads);
  }
}
