/**
 * The built native addon for suites that call it directly, or null with the reason it did not
 * load (the suite then skips and says why). Under REQUIRE_NATIVE=1 or CI=true a missing addon
 * fails the run instead, as the conformance harness does.
 */
import { loadAddon, type NativeAddon } from '../../packages/native/lib/addon.ts';

export let addon: NativeAddon | null = null;
export let missing = '';
try {
  addon = loadAddon();
} catch (error) {
  missing = (error as Error).message;
  if (process.env.REQUIRE_NATIVE === '1' || process.env.CI === 'true') throw error;
}
