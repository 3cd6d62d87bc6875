/**
 * @sparq/native: the C++ backend. Importing this module registers it as
 * backend 'native' (priority 100); it initialises only if the addon built,
 * otherwise selection falls back to the reference with the reason.
 */
import { registerBackend, type Backend } from '@sparq/core';
import { loadAddon } from './addon.ts';
import { checkNativeEnvironment } from './environment.ts';
import { attentionOps } from './attention-ops.ts';

// Thread count and the read-bandwidth probe, for benchmarks (`sparq bench`, bench/*.ts).
export { loadAddon, type NativeAddon } from './addon.ts';
export { attentionAddon, type AttentionAddon } from './attention-ops.ts';
import { NATIVE_BLOCK_DTYPES, NATIVE_QUANTIZE_DTYPES, basicOps } from './basic-ops.ts';

/** The native backend over the addon in `buildDir` (default: this package's build/). */
export function createNativeBackend(buildDir?: string): Backend {
  checkNativeEnvironment();
  const addon = loadAddon(buildDir);
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
      return { name: 'native', kernel: info.kernel, threads: addon.attnThreads() as number, details: { features } };
    },
    ...basicOps(addon),
    ...attentionOps(addon),
  };
}

export { checkNativeEnvironment, KERNEL_NAMES, MAX_THREADS } from './environment.ts';

registerBackend('native', () => createNativeBackend(), 100);
