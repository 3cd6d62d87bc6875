/**
 * @sparq/native: the C++ backend. Importing this module registers it as
 * backend 'native' (priority 100); it initialises only if the addon built,
 * otherwise selection falls back to the reference with the reason.
 */
import { registerBackend, type Backend } from '@sparq/core';
import { loadAddon } from './addon.ts';
import { checkKernelRequest, checkNativeEnvironment } from './environment.ts';
import { attentionOps } from './attention-ops.ts';

// Thread count and the read-bandwidth probe, for benchmarks (`sparq bench`, bench/*.ts).
export { loadAddon, type NativeAddon } from './addon.ts';
export { attentionAddon, type AttentionAddon } from './attention-ops.ts';
import { NATIVE_BLOCK_DTYPES, NATIVE_QUANTIZE_DTYPES, basicOps } from './basic-ops.ts';

/** The native backend over the addon in `buildDir` (default: this package's build/). */
export function createNativeBackend(buildDir?: string): Backend {
  checkNativeEnvironment();
  const addon = loadAddon(buildDir);
  checkKernelRequest(addon.kernelPaths().supported);
  return {
    name: 'native',
    blockDTypes: NATIVE_BLOCK_DTYPES,
    quantizeDTypes: NATIVE_QUANTIZE_DTYPES,
    info: () => {
      const info = addon.info();
      const features = Object.entries(info.features)
        .filter(([, on]) => on)
        .map(([name]) => name)
        .join(' ');
      return { name: 'native', kernel: info.kernel, threads: addon.attnThreads(), details: { features } };
    },
    ...basicOps(addon),
    ...attentionOps(addon),
  };
}

export { checkKernelRequest, KERNEL_NAMES, MAX_THREADS } from './environment.ts';

/**
 * checkNativeEnvironment's checks, then (when the addon loads) that the
 * SIMD path SPARQ_NATIVE_KERNEL names runs on this CPU: the CLI calls it
 * first, so a bad setting is an error before any work, not a silent narrower path.
 */
export function checkNativeSettings(env: Record<string, string | undefined> = process.env): void {
  checkNativeEnvironment(env);
  if (env.SPARQ_NATIVE_KERNEL === undefined) return;
  let supported: string[];
  try {
    supported = loadAddon().kernelPaths().supported;
  } catch {
    return; // no addon: no native path runs, and `sparq backends` says why
  }
  checkKernelRequest(supported, env);
}
export { checkNativeEnvironment };

registerBackend('native', () => createNativeBackend(), 100);
