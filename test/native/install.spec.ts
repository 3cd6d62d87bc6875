/**
 * Install never fails: without a C++ compiler the build script exits 0 and
 * leaves its reason in build/UNAVAILABLE.txt, the loader turns that reason into
 * BackendUnavailableError, and selection falls back to the reference with it.
 * A prebuilt binary that does not load sends install to the source build.
 * The script runs on a copy of the package in a temporary folder, with a PATH
 * that holds node and nothing else, so the real build is never touched.
 */
import { BackendRegistry, BackendUnavailableError } from '@sparq/core';
import { createReferenceBackend } from '@sparq/reference';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../packages/native/lib/addon.ts';
import { createNativeBackend } from '@sparq/native';

const nativeDir = resolve(dirname(fileURLToPath(import.meta.url)), '../../packages/native');

describe('native install without a compiler', () => {
  const root = mkdtempSync(join(tmpdir(), 'sparq-nocc-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('exits 0, records why, and selection falls back to the reference with that reason', async () => {
    cpSync(join(nativeDir, 'scripts'), join(root, 'scripts'), { recursive: true });
    cpSync(join(nativeDir, 'src'), join(root, 'src'), { recursive: true });
    const bin = join(root, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    // No compiler reachable: PATH has node only, CXX unset, REQUIRE_NATIVE off (CI sets it).
    const env = { PATH: bin, HOME: root };
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { env, stdio: 'pipe' });
    expect(existsSync(join(root, 'build', 'sparq_native.node'))).toBe(false);
    const reason = readFileSync(join(root, 'build', 'UNAVAILABLE.txt'), 'utf8');
    expect(reason).toMatch(/no C\+\+ compiler found/);

    expect(() => loadAddon(join(root, 'build'))).toThrow(BackendUnavailableError);
    expect(() => loadAddon(join(root, 'build'))).toThrow('native addon not built: no C++ compiler found');

    const registry = new BackendRegistry();
    registry.register('reference', createReferenceBackend, 0);
    registry.register('native', () => createNativeBackend(join(root, 'build')), 100);
    const forced = process.env.SPARQ_BACKEND;
    delete process.env.SPARQ_BACKEND; // selection by priority, whatever the caller forced
    const engine = await registry.select().finally(() => {
      if (forced !== undefined) process.env.SPARQ_BACKEND = forced;
    });
    expect(engine.name).toBe('reference');
    expect(registry.report()[0]).toMatchObject({
      name: 'native',
      status: 'unavailable',
      reason: expect.stringContaining('no C++ compiler found'),
    });
  });

  it('a prebuilt binary that does not load here: install tries the source build, and the error gives both reasons', () => {
    const prebuilt = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
    mkdirSync(prebuilt, { recursive: true });
    writeFileSync(join(prebuilt, 'node.napi.glibc.node'), 'not a shared object');
    const env = { PATH: join(root, 'bin'), HOME: root };
    const run = spawnSync(process.execPath, [join(root, 'scripts', 'install.mjs')], { env, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain('the prebuilt addon does not load here');
    expect(readFileSync(join(root, 'build', 'UNAVAILABLE.txt'), 'utf8')).toMatch(/no C\+\+ compiler found/);
    expect(() => loadAddon(join(root, 'build'))).toThrow(
      /native addon not built: no C\+\+ compiler found.*; native addon failed to load from .*node\.napi\.glibc\.node; to build it for this machine: npx sparq build-native/,
    );
    rmSync(join(root, 'prebuilds'), { recursive: true });
  });

  it('with REQUIRE_NATIVE=1 the same build exits non-zero, so CI cannot hide it', () => {
    const env = { PATH: join(root, 'bin'), HOME: root, REQUIRE_NATIVE: '1' };
    expect(() =>
      execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { env, stdio: 'pipe' }),
    ).toThrow();
  });
});
