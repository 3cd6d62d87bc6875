#!/usr/bin/env node
// Builds the native addon with the system C++ compiler: no node-gyp, no cmake.
// Every .cc under src/ (docs/native.md: bindings/, ops/, common/, kernels/ref,
// kernels/x86, kernels/arm64) is compiled with flags chosen by its name (on x86-64
// …_avx2.cc, …_avx512.cc, …_amx.cc get their ISA flags; on arm64 …_neon.cc is built
// as is, NEON being part of the base architecture, and …_dotprod.cc with the
// dot-product extension; the other architecture's files are left out; everything
// else is portable scalar code), then linked into build/sparq_native.node. An ISA
// file lives in its architecture's kernel folder and nothing else carries an ISA
// suffix (checked below), so the folders show which flags a file gets. Includes
// are written from src/ ("common/half.h"). N-API symbols resolve against the
// running node at load time, so no Node headers are needed beyond node-api-headers.
//
// --arch arm64 (or x64) cross-compiles for that architecture with $CXX (default
// aarch64-linux-gnu-g++ / x86_64-linux-gnu-g++, Debian's cross compilers) and the
// binutils of the same prefix, into build-linux-<arch>/ (or, with --prebuilt,
// prebuilds/linux-<arch>/). macOS arm64 builds with clang (-undefined
// dynamic_lookup); that path is written but untested.
//
// Install must never fail: if there is no compiler or the build breaks, the
// reason goes to build/UNAVAILABLE.txt (the loader reports it and selection
// falls back to the reference) and the script exits 0. `--strict` (or
// REQUIRE_NATIVE=1) exits 1 instead, so CI sees a broken build.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = join(root, 'src');
// --sanitize builds an AddressSanitizer + UBSan copy into build-sanitize/ for
// `pnpm test:sanitize` (the loader takes it from SPARQ_NATIVE_BUILD).
const sanitize = process.argv.includes('--sanitize');
const archFlag = process.argv.indexOf('--arch');
const arch = archFlag >= 0 ? process.argv[archFlag + 1] : process.arch;
if (!['x64', 'arm64'].includes(arch)) {
  console.error(`@sparq/native: --arch ${arch}: expected x64 or arm64`);
  process.exit(1);
}
const cross = arch !== process.arch;
const CROSS_CXX = { arm64: 'aarch64-linux-gnu-g++', x64: 'x86_64-linux-gnu-g++' };
const SANITIZE_FLAGS = [
  '-fsanitize=address,undefined,float-cast-overflow',
  '-fno-sanitize-recover=all',
  '-fno-omit-frame-pointer',
  '-g',
];
const buildDir = join(root, sanitize ? 'build-sanitize' : cross ? `build-${process.platform}-${arch}` : 'build');
const objDir = join(buildDir, 'obj');
// --prebuilt: the addon that travels in the package, prebuilds/<platform>-<arch>/
// (node-gyp-build's layout), with libstdc++ linked in so it needs only glibc.
const prebuilt = process.argv.includes('--prebuilt');
const output = prebuilt
  ? join(root, 'prebuilds', `${process.platform}-${arch}`, 'node.napi.glibc.node')
  : join(buildDir, 'sparq_native.node');
const reasonFile = join(buildDir, 'UNAVAILABLE.txt');
const strict = process.argv.includes('--strict') || process.env.REQUIRE_NATIVE === '1';
const force = process.argv.includes('--force');

// The ISA files of each architecture and their flags (an empty list: the architecture's baseline).
const ISA_FLAGS = {
  x64: {
    avx2: ['-mavx2', '-mfma', '-mf16c'],
    avx512: ['-mavx512f', '-mavx512bw', '-mavx512vl', '-mavx512dq', '-mavx512vnni', '-mavx512bf16', '-mfma', '-mf16c'],
    amx: ['-mamx-tile', '-mamx-int8', '-mamx-bf16', '-mavx512f', '-mavx512bw', '-mavx512vl'],
  },
  arm64: {
    neon: [],
    dotprod: ['-march=armv8.2-a+dotprod'],
  },
}[arch];
const ALL_ISAS = ['avx2', 'avx512', 'amx', 'neon', 'dotprod'];

function fail(reason) {
  mkdirSync(buildDir, { recursive: true });
  rmSync(output, { force: true });
  writeFileSync(reasonFile, reason + '\n');
  console.error(`@sparq/native: not built: ${reason}`);
  console.error('@sparq/native: the engine will fall back to the reference backend.');
  process.exit(strict ? 1 : 0);
}

function findCompiler() {
  for (const cxx of [process.env.CXX, ...(cross ? [CROSS_CXX[arch]] : ['g++', 'c++', 'clang++'])].filter(Boolean)) {
    try {
      execFileSync(cxx, ['--version'], { stdio: 'ignore' });
      return cxx;
    } catch {
      // try the next one
    }
  }
  return null;
}

/** The ISA of a kernel file (…_avx2.cc: 'avx2'), or null for portable code. */
function isaOf(file) {
  const match = new RegExp(`_(${ALL_ISAS.join('|')})\\.cc$`).exec(file);
  return match ? match[1] : null;
}

// The folder of each architecture's ISA files, relative to src/.
const ISA_FOLDER = {
  avx2: 'kernels/x86',
  avx512: 'kernels/x86',
  amx: 'kernels/x86',
  neon: 'kernels/arm64',
  dotprod: 'kernels/arm64',
};

/** Every file under src/ as a path relative to src/ with '/' separators, sorted. */
function sourceTree(dir = srcDir, prefix = '') {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) =>
      entry.isDirectory() ? sourceTree(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
    )
    .sort();
}

// nm and objcopy of the compiler's target: aarch64-linux-gnu-g++ -> aarch64-linux-gnu-nm.
const binutilsPrefix = () => /^(.*-)(g\+\+|c\+\+|clang\+\+)(-[\d.]+)?$/.exec(cxx)?.[1] ?? '';
// ISA files need their weak symbols made their own (privatizeWeakSymbols). macOS has no objcopy;
// there the only ISA file is dotprod, which every Apple arm64 CPU runs, so it is linked as is.
const privatize = process.platform !== 'darwin';

/**
 * Makes an ISA object's weak definitions its own. Inline and template code that
 * the compiler emits out of line (std::vector's growth routines, say) is a weak
 * symbol in a COMDAT group; the linker keeps one copy per name for the whole
 * addon, and if it keeps the copy compiled with -mavx512f, portable code calls
 * AVX-512 instructions and dies with SIGILL on an AVX2-only CPU. Renaming each
 * weak symbol (and so its group) to `name.isa` leaves the ISA object calling its
 * own copy and everyone else calling the portable one. Only the C++ personality
 * reference, which is identical everywhere and holds no code, keeps its name.
 * A group is named by its signature symbol, usually the weak symbol itself; a
 * constructor's or destructor's group (C5 / D5) is named by a symbol of its own
 * (nm type n), renamed too: left shared, the linker kept one ISA object's group
 * for all and the others' references to their renamed destructor resolved to
 * address 0 (a thread_local std::vector in an AVX-512 kernel: node died at exit
 * calling it; linkedWeakReferences now refuses such a link).
 */
async function privatizeWeakSymbols(obj, isa) {
  const listing = await symbols(obj, '--defined-only');
  if (!listing.ok) return listing;
  const weak = listing.symbols
    .filter(([name, type]) => /^[WVuvwn]$/.test(type ?? '') && name !== 'DW.ref.__gxx_personality_v0')
    .map(([name]) => name);
  if (weak.length === 0) return { ok: true };
  const renames = join(objDir, `${isa}-${weak.length}-${Date.now()}.syms`);
  writeFileSync(renames, weak.map((name) => `${name} ${name}.${isa}`).join('\n') + '\n');
  const result = await run(`${binutilsPrefix()}objcopy`, [`--redefine-syms=${renames}`, obj]);
  rmSync(renames, { force: true });
  return result.ok
    ? result
    : { ok: false, stderr: `objcopy failed (binutils are needed to build the ISA kernels safely): ${result.stderr}` };
}

/**
 * Null when the linked addon keeps a definition of every weak symbol our objects define; else why
 * not. A weak definition whose group the linker discarded leaves the objects' references to it
 * undefined and weak, so they resolve to address 0 and calling one kills the process. (Weak
 * references of the libraries linked in, such as libstdc++'s transactional-memory hooks, are not
 * ours and are left alone.)
 */
async function linkedWeakReferences(file, objs) {
  const ours = new Set();
  for (const obj of objs) {
    const listing = await symbols(obj, '--defined-only');
    if (!listing.ok) return listing.stderr;
    for (const [name, type] of listing.symbols) if (/^[WV]$/.test(type ?? '')) ours.add(name);
  }
  const linked = await symbols(file, '--undefined-only');
  if (!linked.ok) return linked.stderr;
  const dangling = linked.symbols.filter(([name, type]) => type === 'w' && ours.has(name)).map(([name]) => name);
  return dangling.length
    ? `linking left weak symbols undefined (they would be called at address 0): ${dangling.join(', ')}`
    : null;
}

/** nm's POSIX listing of `file` (`only`: --defined-only or --undefined-only) as [name, type, ...] rows. */
async function symbols(file, only) {
  const listing = await run(`${binutilsPrefix()}nm`, ['-P', only, file]);
  if (!listing.ok)
    return {
      ok: false,
      stderr: `nm failed on ${file} (binutils are needed to build the ISA kernels safely): ${listing.stderr}`,
    };
  return { ok: true, symbols: listing.stdout.split('\n').map((line) => line.split(' ')) };
}

/** Runs a command to completion, keeping its output. */
function run(cmd, args) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (error) => resolve({ ok: false, stdout, stderr: error.message }));
    child.on('close', (code) => resolve({ ok: code === 0, stdout, stderr }));
  });
}

const cxx = findCompiler();
if (!cxx)
  fail(
    cross
      ? `no C++ compiler for ${arch} found (tried $CXX, ${CROSS_CXX[arch]}; on Debian: apt-get install ${CROSS_CXX[arch].replace(/-g\+\+$/, '').replace(/^/, 'g++-')})`
      : 'no C++ compiler found (tried $CXX, g++, c++, clang++)',
  );

const require = createRequire(import.meta.url);
let includes;
try {
  includes = [require('node-addon-api').include_dir, require('node-api-headers').include_dir];
} catch (error) {
  fail(`node-addon-api or node-api-headers is missing: ${error.message}`);
}

// Portable files and this architecture's ISA files.
const tree = sourceTree();
const misplaced = tree.filter((f) => {
  const isa = isaOf(f);
  return isa ? dirname(f) !== ISA_FOLDER[isa] : f.endsWith('.cc') && /^kernels\/(x86|arm64)\//.test(f);
});
if (misplaced.length)
  fail(`ISA files belong in their architecture's kernel folder and portable files outside it: ${misplaced.join(', ')}`);
const sources = tree.filter((f) => f.endsWith('.cc') && (isaOf(f) === null || isaOf(f) in ISA_FLAGS));
const headers = tree.filter((f) => f.endsWith('.h'));
// A header change rebuilds everything: simple and always right.
const newestHeader = Math.max(
  0,
  ...headers.map((h) => statSync(join(srcDir, h)).mtimeMs),
  statSync(fileURLToPath(import.meta.url)).mtimeMs,
);
mkdirSync(objDir, { recursive: true });
rmSync(reasonFile, { force: true });

const common = [
  '-std=c++17',
  ...(sanitize ? ['-O1', ...SANITIZE_FLAGS] : ['-O3']),
  '-fPIC',
  '-fexceptions',
  // a * b + c rounds twice, as the reference computes it. Otherwise GCC fuses it into one FMA
  // wherever FMA is in the baseline (arm64) or the file's flags (…_avx2.cc), and a quantized code
  // can land one step off the reference's at a rounding tie. The kernels' FMAs are intrinsics.
  '-ffp-contract=off',
  '-Wall',
  '-Wextra',
  '-Wno-unused-parameter',
  '-DNAPI_VERSION=8',
  '-DNAPI_CPP_EXCEPTIONS',
  `-I${srcDir}`,
  ...includes.map((i) => `-I${i}`),
];
const jobs = sources.map((file) => {
  const obj = join(objDir, file.replace(/\.cc$/, '.o'));
  mkdirSync(dirname(obj), { recursive: true });
  const stale =
    force || !existsSync(obj) || statSync(obj).mtimeMs < Math.max(statSync(join(srcDir, file)).mtimeMs, newestHeader);
  const isa = isaOf(file);
  return { file, obj, stale, args: [...common, ...(isa ? ISA_FLAGS[isa] : []), '-c', join(srcDir, file), '-o', obj] };
});

const queue = jobs.filter((j) => j.stale);
const workers = Math.max(1, Math.min(cpus().length, queue.length));
const errors = [];
await Promise.all(
  Array.from({ length: workers }, async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      console.error(`@sparq/native: compiling ${job.file}`);
      const result = await run(cxx, job.args);
      if (!result.ok) errors.push(`${job.file}:\n${result.stderr}`);
      else {
        if (result.stderr.trim()) console.error(result.stderr);
        const isa = isaOf(job.file);
        if (isa && ISA_FLAGS[isa].length && privatize) {
          const privatized = await privatizeWeakSymbols(job.obj, isa);
          if (!privatized.ok) errors.push(`${job.file}: ${privatized.stderr}`);
        }
      }
    }
  }),
);
if (errors.length) fail(`compilation failed with ${cxx}:\n${errors.join('\n')}`);

mkdirSync(dirname(output), { recursive: true });
// macOS: N-API's symbols stay undefined until node loads the addon; libc++ is the system's.
const platformLink =
  process.platform === 'darwin'
    ? ['-undefined', 'dynamic_lookup']
    : ['-lpthread', ...(prebuilt ? ['-static-libstdc++', '-static-libgcc'] : [])];
const link = await run(cxx, [
  '-shared',
  ...(sanitize ? SANITIZE_FLAGS : []),
  '-o',
  output,
  ...jobs.map((j) => j.obj),
  ...platformLink,
]);
if (!link.ok) fail(`linking failed: ${link.stderr}`);
const dangling = privatize
  ? await linkedWeakReferences(
      output,
      jobs.map((j) => j.obj),
    )
  : null;
if (dangling) fail(dangling);
console.error(`@sparq/native: built ${output}`);
