/**
 * `sparq build-native`: compiles the native addon for this machine with the system C++ compiler,
 * for a platform no prebuilt addon fits (macOS, musl, another CPU) or to build from source anyway.
 * It runs the installed @sparq/native's scripts/build.mjs, which writes build/sparq_native.node
 * beside the package's prebuilt addons; the loader prefers that build from then on.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Command } from '../command.ts';
import { parseFlags } from '../flags.ts';

const USAGE = `sparq build-native

Compiles the native backend's C++ sources for this machine (needs g++, c++ or
clang++, found on PATH or named by $CXX; about 1-2 minutes). The addon goes to
the installed package's build/ folder and is used instead of the prebuilt one.
'sparq backends' then shows the native backend and the kernels it runs.`;

export const buildNativeCommand: Command = {
  name: 'build-native',
  summary: 'compile the native addon for this machine with the system C++ compiler',
  usage: USAGE,
  async run(argv) {
    parseFlags(argv, {});
    const nativeDir = dirname(createRequire(import.meta.url).resolve('@sparq/native/package.json'));
    const script = join(nativeDir, 'scripts', 'build.mjs');
    process.stderr.write(`sparq build-native: compiling in ${nativeDir}\n`);
    // --strict: a failed build exits 1 with the compiler's messages (install time never fails; this does).
    const result = spawnSync(process.execPath, [script, '--force', '--strict'], { stdio: 'inherit' });
    if (result.status !== 0) {
      process.stderr.write(
        `sparq build-native: the build failed (see above); the engine keeps running on the reference backend\n`,
      );
      return 1;
    }
    process.stderr.write(`sparq build-native: done; 'sparq backends' shows the native backend\n`);
    return 0;
  },
};
