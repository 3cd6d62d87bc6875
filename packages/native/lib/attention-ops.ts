import type { BackendOps } from '@sparq/core';
import type { NativeAddon } from './addon.ts';

/** KV-cache append, dense attention, SparQ and the baselines, bound to the addon. */
export function attentionOps(addon: NativeAddon): Partial<BackendOps> {
  return {};
}
