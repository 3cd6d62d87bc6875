/**
 * Loads the compiled addon (build/sparq_native.node). When it is missing, the
 * reason the build script left in build/UNAVAILABLE.txt becomes the error, so
 * `sparq backends` and the test report say why native is not in use.
 */
import { BackendUnavailableError } from '@sparq/core';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const buildDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'build');

export interface NativeInfo {
  kernel: string;
  hardwareThreads: number;
  features: Record<string, boolean>;
}

/** The raw addon: info(), the kernel-path switch, and one function per bound op (see the bind_*.cc files). */
export interface NativeAddon {
  info(): NativeInfo;
  /** Tests and benchmarks only: every op runs 'scalar' | 'avx2' | 'avx512' from now on; null restores the default. Returns the path in use. */
  forceKernelPath(name: string | null): string;
  /** The paths this CPU runs, narrowest first, and the one in use. */
  kernelPaths(): { supported: string[]; current: string };
  [fn: string]: (...args: never[]) => unknown;
}

/** Loads the addon from `dir` (default: this package's build/), or throws BackendUnavailableError with the build's reason. */
export function loadAddon(dir: string = buildDir): NativeAddon {
  const path = join(dir, 'sparq_native.node');
  if (!existsSync(path)) {
    const reasonFile = join(dir, 'UNAVAILABLE.txt');
    const reason = existsSync(reasonFile) ? readFileSync(reasonFile, 'utf8').trim().split('\n')[0] : 'the addon has not been built (run `pnpm build:native`)';
    throw new BackendUnavailableError(`native addon not built: ${reason}`);
  }
  try {
    return createRequire(import.meta.url)(path) as NativeAddon;
  } catch (error) {
    throw new BackendUnavailableError(`native addon failed to load from ${path}`, { cause: error });
  }
}
