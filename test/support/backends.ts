/**
 * The conformance harness: every suite is written once and run against every
 * registered backend. A backend that cannot load is reported as skipped with
 * its reason, never as passed; under REQUIRE_NATIVE=1 or CI=true a missing
 * native backend fails the run instead.
 */
import { loadBackends, type DType, type Engine, type OpName } from '@sparq/core';
import '@sparq/reference';
import '@sparq/native';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../packages/native/lib/addon.ts';

const { available, unavailable } = await loadBackends();
const requireNative = process.env.REQUIRE_NATIVE === '1' || process.env.CI === 'true';

export const engines: readonly Engine[] = available;
export const referenceEngine: Engine = available.find((e) => e.name === 'reference')!;

/** Runs `body` once per backend, inside `describe('<title> [<backend>]')`. */
export function forEachBackend(title: string, body: (engine: Engine) => void): void {
  for (const engine of available) describe(`${title} [${engine.name}]`, () => body(engine));
  for (const { name, reason } of unavailable) {
    if (name === 'native' && requireNative) {
      describe(`${title} [native]`, () => {
        it('loads the native backend (REQUIRE_NATIVE=1)', () => {
          throw new Error(`native backend is required but unavailable: ${reason}`);
        });
      });
    } else {
      describe.skip(`${title} [${name}] skipped: backend unavailable: ${reason}`, () => {
        it('needs the backend', () => {});
      });
    }
  }
}

/**
 * `it` for one op (on one block dtype, when given): skipped, with the reason in its name, when the
 * backend declares the op absent or does not list the dtype (Backend.blockDTypes).
 */
export function opIt(engine: Engine, op: OpName, name: string, fn: () => void | Promise<void>, dtype?: DType): void {
  if (engine.has(op, dtype)) it(name, fn);
  else
    it.skip(`${name} (skipped: ${engine.name} does not implement ${op}${dtype === undefined || !engine.has(op) ? '' : ` on ${dtype}`})`, () => {});
}

/**
 * Runs `body(native)` once per native kernel path this CPU has (scalar, avx2, avx512, ...), inside
 * `describe('<title> [native, <path> kernels]')` with that path forced for the block (the addon's
 * forceKernelPath test hook; vitest runs each file in its own process, so it never leaks). Nothing
 * when native is unavailable: forEachBackend reports that.
 */
export function forEachNativePath(title: string, body: (native: Engine) => void): void {
  const native = available.find((e) => e.name === 'native');
  if (!native) return;
  const raw = loadAddon();
  for (const path of raw.kernelPaths().supported) {
    describe(`${title} [native, ${path} kernels]`, () => {
      beforeAll(() => {
        expect(raw.forceKernelPath(path)).toBe(path);
      });
      afterAll(() => {
        raw.forceKernelPath(null);
      });
      body(native);
    });
  }
}
