#!/usr/bin/env node
// Builds the native addon with the system C++ compiler: no node-gyp, no cmake.
// Every src/*.cc is compiled with flags chosen by its name (…_avx2.cc,
// …_avx512.cc, …_amx.cc get their ISA flags; everything else is portable
// scalar code), then linked into build/sparq_native.node. N-API symbols resolve
// against the running node at load time, so no Node headers are needed beyond
// node-api-headers.
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
const buildDir = join(root, 'build');
const objDir = join(buildDir, 'obj');
const output = join(buildDir, 'sparq_native.node');
const reasonFile = join(buildDir, 'UNAVAILABLE.txt');
const strict = process.argv.includes('--strict') || process.env.REQUIRE_NATIVE === '1';
const force = process.argv.includes('--force');

const ISA_FLAGS = {
  avx2: ['-mavx2', '-mfma', '-mf16c'],
  avx512: ['-mavx512f', '-mavx512bw', '-mavx512vl', '-mavx512dq', '-mavx512vnni', '-mavx512bf16', '-mfma', '-mf16c'],
  amx: ['-mamx-tile', '-mamx-int8', '-mamx-bf16', '-mavx512f', '-mavx512bw', '-mavx512vl'],
};

function fail(reason) {
  mkdirSync(buildDir, { recursive: true });
  rmSync(output, { force: true });
  writeFileSync(reasonFile, reason + '\n');
  console.error(`@sparq/native: not built: ${reason}`);
  console.error('@sparq/native: the engine will fall back to the reference backend.');
  process.exit(strict ? 1 : 0);
}

function findCompiler() {
  for (const cxx of [process.env.CXX, 'g++', 'c++', 'clang++'].filter(Boolean)) {
    try {
      execFileSync(cxx, ['--version'], { stdio: 'ignore' });
      return cxx;
    } catch {
      // try the next one
    }
  }
  return null;
}

function isaOf(file) {
  const match = /_(avx2|avx512|amx)\.cc$/.exec(file);
  return match ? match[1] : null;
}

function run(cmd, args) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (error) => resolve({ ok: false, stderr: error.message }));
    child.on('close', (code) => resolve({ ok: code === 0, stderr }));
  });
}

const cxx = findCompiler();
if (!cxx) fail('no C++ compiler found (tried $CXX, g++, c++, clang++)');

const require = createRequire(import.meta.url);
let includes;
try {
  includes = [require('node-addon-api').include_dir, require('node-api-headers').include_dir];
} catch (error) {
  fail(`node-addon-api or node-api-headers is missing: ${error.message}`);
}

const sources = readdirSync(srcDir).filter((f) => f.endsWith('.cc')).sort();
const headers = readdirSync(srcDir).filter((f) => f.endsWith('.h'));
// A header change rebuilds everything: simple and always right.
const newestHeader = Math.max(0, ...headers.map((h) => statSync(join(srcDir, h)).mtimeMs), statSync(fileURLToPath(import.meta.url)).mtimeMs);
mkdirSync(objDir, { recursive: true });
rmSync(reasonFile, { force: true });

const common = ['-std=c++17', '-O3', '-fPIC', '-fexceptions', '-Wall', '-Wextra', '-Wno-unused-parameter', '-DNAPI_VERSION=8', '-DNAPI_CPP_EXCEPTIONS', ...includes.map((i) => `-I${i}`)];
const jobs = sources.map((file) => {
  const obj = join(objDir, file.replace(/\.cc$/, '.o'));
  const stale = force || !existsSync(obj) || statSync(obj).mtimeMs < Math.max(statSync(join(srcDir, file)).mtimeMs, newestHeader);
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
      else if (result.stderr.trim()) console.error(result.stderr);
    }
  }),
);
if (errors.length) fail(`compilation failed with ${cxx}:\n${errors.join('\n')}`);

const link = await run(cxx, ['-shared', '-o', output, ...jobs.map((j) => j.obj), '-lpthread']);
if (!link.ok) fail(`linking failed: ${link.stderr}`);
console.error(`@sparq/native: built ${output}`);
