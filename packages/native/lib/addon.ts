/**
 * Loads the compiled addon: the one built from source on this machine
 * (build/sparq_native.node) if there is one, else the prebuilt binary for this
 * platform that ships in the package (prebuilds/<platform>-<arch>/, the
 * node-gyp-build layout). Both are built for the baseline ISA and pick their
 * SIMD kernels at run time. When neither loads, the error says why (the build
 * script's reason from build/UNAVAILABLE.txt) and how to build, so
 * `sparq backends` and the test report say why native is not in use.
 */
import {
  BLOCK_LAYOUT,
  BackendUnavailableError,
  byteSize,
  isBlockDType,
  setMemoryAdvisor,
  type DType,
} from '@sparq/core';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AttentionAddon } from './attention-ops.ts';
import { DTYPE_CODE, type BasicAddon } from './basic-ops.ts';

// SPARQ_NATIVE_BUILD points at another build (the sanitizer one: scripts/test-sanitize.sh).
const buildDir = process.env.SPARQ_NATIVE_BUILD || join(dirname(fileURLToPath(import.meta.url)), '..', 'build');

/** How a consumer builds the addon from source (the CLI runs scripts/build.mjs). */
export const BUILD_COMMAND = 'npx sparq build-native (needs a C++ compiler: g++, c++ or clang++)';

export interface NativeInfo {
  kernel: string;
  hardwareThreads: number;
  features: Record<string, boolean>;
}

/**
 * The addon, every function typed: info(), the kernel-path switch, the memory helpers
 * (bind_memory.cc), and one function per bound op: BasicAddon (bind_basic.cc: quantizers,
 * products, row ops) and AttentionAddon (bind_attention.cc: KV append, attention, its threads).
 */
export interface NativeAddon extends BasicAddon, AttentionAddon {
  info(): NativeInfo;
  /** Tests and benchmarks only: every op runs 'scalar' | 'avx2' | 'avx512' | 'neon' from now on; null restores the default. Returns the path in use. */
  forceKernelPath(name: string | null): string;
  /** The paths this CPU runs, narrowest first, and the one in use. */
  kernelPaths(): { supported: string[]; current: string };
  /** Asks Linux for transparent huge pages under the whole 2 MiB pages of `bytes`; returns the bytes advised (0: none). */
  adviseHugePages(bytes: Uint8Array): number;
  /** How many bytes from the array's start its first 64-byte-aligned address is (0-63). */
  lineOffset(bytes: Uint8Array): number;
  /** The block shape every kernel assumes, per element type, with the type's binding code (src/bindings/addon.cc). */
  blockLayouts(): Record<string, BlockShape>;
}

/** One element type's block as the addon lays it out: its binding code, and elements in bytes. */
export interface BlockShape {
  code: number;
  elements: number;
  bytes: number;
}

/**
 * Why an addon's block layouts disagree with core's (BLOCK_LAYOUT, and one element of the plain
 * types) or with the binding codes the ops pass (DTYPE_CODE), or null when they agree. An addon
 * built from other sources would read every weight of such a type wrongly, so it is not used.
 */
export function blockLayoutMismatch(reported: Record<string, BlockShape>): string | null {
  const problems: string[] = [];
  for (const [name, code] of Object.entries(DTYPE_CODE)) {
    const dtype = name as DType;
    const elements = isBlockDType(dtype) ? BLOCK_LAYOUT[dtype].elements : 1;
    const expected = { code, elements, bytes: byteSize(dtype, elements) };
    const got = reported[name];
    if (!got) problems.push(`${name} is missing (core: code ${code}, ${elements} elements in ${expected.bytes} bytes)`);
    else if (got.code !== code || got.elements !== elements || got.bytes !== expected.bytes) {
      problems.push(
        `${name} is code ${got.code}, ${got.elements} elements in ${got.bytes} bytes (core: code ${code}, ${elements} in ${expected.bytes})`,
      );
    }
  }
  for (const name of Object.keys(reported)) if (!(name in DTYPE_CODE)) problems.push(`${name} is unknown to core`);
  return problems.length ? `the addon's block layouts disagree with @sparq/core's: ${problems.join('; ')}` : null;
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
    throw new BackendUnavailableError(
      `${notBuilt}; no prebuilt binary for ${platformName()} (the package has: ${shippedPrebuilts(dir)}); to build it: ${BUILD_COMMAND}`,
    );
  }
  let addon: NativeAddon;
  try {
    addon = createRequire(import.meta.url)(path) as NativeAddon;
  } catch (error) {
    const why = path === built ? '' : `${notBuilt}; `;
    throw new BackendUnavailableError(
      `${why}native addon failed to load from ${path}; to build it for this machine: ${BUILD_COMMAND}`,
      { cause: error },
    );
  }
  const mismatch =
    typeof addon.blockLayouts === 'function'
      ? blockLayoutMismatch(addon.blockLayouts())
      : 'it reports no block layouts (built from older sources)';
  if (mismatch)
    throw new BackendUnavailableError(
      `native addon at ${path}: ${mismatch}; rebuild it from this package's sources: ${BUILD_COMMAND}`,
    );
  // From now on the engine's large buffers (KV caches, weights) get huge pages where Linux grants them (core's memory.ts).
  // It also tells core where the buffer's first cache line starts (allocAligned).
  setMemoryAdvisor((buffer) => {
    const bytes = new Uint8Array(buffer);
    addon.adviseHugePages(bytes);
    return addon.lineOffset(bytes);
  });
  return addon;
}
