/**
 * Loads the compiled addon: the one built from source on this machine
 * (build/sparq_native.node) if there is one, else the prebuilt binary for this
 * platform that ships in the package (prebuilds/<platform>-<arch>/, the
 * node-gyp-build layout). Both are built for the baseline ISA and pick their
 * SIMD kernels at run time. When neither loads, the error says why (the build
 * script's reason from build/UNAVAILABLE.txt) and how to build, so
 * `sparq backends` and the test report say why native is not in use.
 */
import { BackendUnavailableError, setMemoryAdvisor } from '@sparq/core';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// SPARQ_NATIVE_BUILD points at another build (the sanitizer one: scripts/test-sanitize.sh).
const buildDir = process.env.SPARQ_NATIVE_BUILD || join(dirname(fileURLToPath(import.meta.url)), '..', 'build');

/** How a consumer builds the addon from source (the CLI runs scripts/build.mjs). */
export const BUILD_COMMAND = 'npx sparq build-native (needs a C++ compiler: g++, c++ or clang++)';

export interface NativeInfo {
  kernel: string;
  hardwareThreads: number;
  features: Record<string, boolean>;
}

/** The raw addon: info(), the kernel-path switch, and one function per bound op (see the bind_*.cc files). */
export interface NativeAddon {
  info(): NativeInfo;
  /** Tests and benchmarks only: every op runs 'scalar' | 'avx2' | 'avx512' | 'neon' from now on; null restores the default. Returns the path in use. */
  forceKernelPath(name: string | null): string;
  /** The paths this CPU runs, narrowest first, and the one in use. */
  kernelPaths(): { supported: string[]; current: string };
  /** Asks Linux for transparent huge pages under the whole 2 MiB pages of `bytes`; returns the bytes advised (0: none). */
  adviseHugePages(bytes: Uint8Array): number;
  /** How many bytes from the array's start its first 64-byte-aligned address is (0-63). */
  lineOffset(bytes: Uint8Array): number;
  [fn: string]: (...args: never[]) => unknown;
}

/** Whether this process runs on glibc (prebuilt binaries are linked against it; none fits musl, as on Alpine). */
function glibc(): boolean {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return !!header?.glibcVersionRuntime;
}

/** This machine as the prebuilt binaries are named: linux-x64, linux-arm64 (with the C library on Linux). */
function platformName(): string {
  return `${process.platform}-${process.arch}${process.platform === 'linux' ? (glibc() ? ' (glibc)' : ' (musl)') : ''}`;
}

/** The prebuilt binary for this platform beside `dir` (a package's build/), or null when none fits. */
export function prebuiltPath(dir: string = buildDir): string | null {
  if (process.platform === 'linux' && !glibc()) return null;
  const path = join(dir, '..', 'prebuilds', `${process.platform}-${process.arch}`, 'node.napi.glibc.node');
  return existsSync(path) ? path : null;
}

/** The platforms the package has prebuilt binaries for (prebuilds/<platform>-<arch>/), or 'none'. */
function shippedPrebuilts(dir: string): string {
  const prebuilds = join(dir, '..', 'prebuilds');
  const names = existsSync(prebuilds) ? readdirSync(prebuilds).sort() : [];
  return names.length ? `${names.join(', ')}, glibc` : 'none';
}

/** Loads the addon built in `dir` (default: this package's build/), else the prebuilt one; or throws BackendUnavailableError saying why. */
export function loadAddon(dir: string = buildDir): NativeAddon {
  const built = join(dir, 'sparq_native.node');
  const path = existsSync(built) ? built : prebuiltPath(dir);
  const reasonFile = join(dir, 'UNAVAILABLE.txt');
  const notBuilt = `native addon not built${existsSync(reasonFile) ? `: ${readFileSync(reasonFile, 'utf8').trim().split('\n')[0]}` : ' on this machine'}`;
  if (!path) {
    throw new BackendUnavailableError(`${notBuilt}; no prebuilt binary for ${platformName()} (the package has: ${shippedPrebuilts(dir)}); to build it: ${BUILD_COMMAND}`);
  }
  let addon: NativeAddon;
  try {
    addon = createRequire(import.meta.url)(path) as NativeAddon;
  } catch (error) {
    const why = path === built ? '' : `${notBuilt}; `;
    throw new BackendUnavailableError(`${why}native addon failed to load from ${path}; to build it for this machine: ${BUILD_COMMAND}`, { cause: error });
  }
  // From now on the engine's large buffers (KV caches, weights) get huge pages where Linux grants them (core's memory.ts).
  // It also tells core where the buffer's first cache line starts (allocAligned).
  setMemoryAdvisor((buffer) => {
    const bytes = new Uint8Array(buffer);
    addon.adviseHugePages(bytes);
    return addon.lineOffset(bytes);
  });
  return addon;
}
