import type { BackendOps } from '@sparq/core';
import type { NativeAddon } from './addon.ts';

/** Quantization, matvec/matmul, rmsnorm, rope, softmax, top-k, bound to the addon. */
export function basicOps(addon: NativeAddon): Partial<BackendOps> {
  return {};
}
