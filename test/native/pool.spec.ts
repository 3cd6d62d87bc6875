/**
 * The native thread pool (packages/native/src/common/threads.cc): its workers spin for a while after a
 * call before they sleep (SPARQ_SPIN_US; 0: not at all), and the caller spins while it waits for them. test/support/pool-calls.ts
 * makes calls across both hand-offs (right after resizes, back to back, after long gaps) and checks
 * each result bit for bit; it runs in a child process with a time limit, because a lost wake-up
 * blocks the calling thread inside the addon, where no test timeout reaches.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { engines } from '../support/backends.ts';

const ROOT = join(import.meta.dirname, '..', '..');

if (!engines.some((e) => e.name === 'native')) {
  describe.skip('native pool (native backend unavailable)', () => it('needs the native backend', () => {}));
} else {
  describe('native pool', () => {
    // SPARQ_SPIN_US=0: no busy wait, so every hand-off goes through the sleep and wake-up path.
    it.each([
      ['spinning first (the default)', {}],
      ['sleeping at once (SPARQ_SPIN_US=0)', { SPARQ_SPIN_US: '0' }],
    ])('takes every call (after resizes, back to back, after long gaps) and splits it exactly, %s', (_, env) => {
      const child = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/pool-calls.ts')], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 50_000,
        env: { ...process.env, ...env },
      });
      expect(child.error?.message ?? null, 'the calls finished in time (a hang: a lost wake-up)').toBeNull();
      expect(child.stdout + child.stderr).toContain('ok: calls back to back and after gaps');
      expect(child.status).toBe(0);
    });
  });
}
