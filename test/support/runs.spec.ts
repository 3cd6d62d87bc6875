/**
 * fcRuns: a property's case count scaled by SPARQ_FC_SCALE (read when the module loads), never
 * below 2 cases (or n, when n is smaller), and a clear error for a scale outside (0, 1].
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

/** runs.ts loaded afresh with SPARQ_FC_SCALE set to `scale` (unset for undefined). */
async function loadWith(scale: string | undefined) {
  vi.resetModules();
  if (scale === undefined) vi.stubEnv('SPARQ_FC_SCALE', undefined as unknown as string);
  else vi.stubEnv('SPARQ_FC_SCALE', scale);
  return import('./runs.ts');
}

describe('fcRuns', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('gives n unscaled when SPARQ_FC_SCALE is unset or empty', async () => {
    for (const scale of [undefined, '']) {
      const { fcRuns } = await loadWith(scale);
      expect([1, 2, 8, 40, 300].map(fcRuns)).toEqual([1, 2, 8, 40, 300]);
    }
  });

  it('scales n, rounding to the nearest count, with a floor of 2 (or n itself when smaller)', async () => {
    const { fcRuns } = await loadWith('0.25');
    expect([1, 2, 6, 8, 10, 40, 48, 300].map(fcRuns)).toEqual([1, 2, 2, 2, 3, 10, 12, 75]);
  });

  it('refuses a scale outside (0, 1], naming the variable and the value', async () => {
    for (const bad of ['0', '-1', '1.5', 'abc', 'NaN']) {
      await expect(loadWith(bad)).rejects.toThrow(`SPARQ_FC_SCALE must be in (0, 1], got '${bad}'`);
    }
  });
});
