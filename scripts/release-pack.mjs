#!/usr/bin/env node
// `pnpm release:pack`: the one artifact a user installs, release/sparq-<version>.tgz.
//
//   npm i ./sparq-<version>.tgz     (no registry, no compiler, no install script)
//
// The tarball is the `sparq` package with every runtime dependency inside it as a bundled
// dependency (npm's bundleDependencies): the workspace's compiled packages (@sparq/core,
// reference, native, llm, pool, cli: their dist/ as tsc writes it, with its .d.ts files),
// @huggingface/jinja and piscina, and node-addon-api / node-api-headers for `sparq build-native`.
// Bundled dependencies rather than one esbuild bundle: each package keeps the files the
// workspace tests (the attention pool's worker file, the native loader's paths relative to its
// package, the declaration files, whose exports TypeScript resolves under node16, nodenext and
// bundler), and npm installs them from the tarball alone.
//
// @sparq/native carries prebuilt addons for linux-x64 (built here, with its run-time AVX2 /
// AVX-512 / AMX dispatch) and linux-arm64 (cross-compiled with Debian's g++-aarch64-linux-gnu),
// both glibc, libstdc++ linked in; its C++ sources and build script stay for
// `sparq build-native`. @sparq/cli carries the built playground page. No package keeps an
// install script. The staged tree is release/stage/ (kept for inspection).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RELEASE = join(ROOT, 'release');
const STAGE = join(RELEASE, 'stage');
const PACKAGES = ['core', 'reference', 'native', 'llm', 'pool', 'cli'];
// Linux prebuilt addons: the host's architecture is built natively, the other cross-compiled.
const ARCHES = ['x64', 'arm64'];
// A release over this size fails (the bound).
const MAX_BYTES = 10 * 1024 * 1024;
// Node's require(esm) is on by default from 20.19 (sparq's packages are ES modules).
const NODE_RANGE = '>=20.19';

const step = (message) => console.error(`release:pack: ${message}`);
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const writeJson = (path, value) => writeFileSync(path, JSON.stringify(value, null, 2) + '\n');
const run = (cmd, args, options = {}) => execFileSync(cmd, args, { cwd: ROOT, stdio: 'inherit', ...options });

const sparq = readJson(join(ROOT, 'packages/sparq/package.json'));
const version = sparq.version;

step('build: tsc for every package, the playground page');
run('pnpm', ['-s', '-r', 'run', 'build']);
for (const arch of ARCHES) {
  step(`prebuilt addon linux-${arch}`);
  // The other architecture's build needs its cross compiler (build.mjs says which, and fails with --strict).
  run(process.execPath, ['packages/native/scripts/build.mjs', '--prebuilt', '--strict', '--arch', arch]);
}

rmSync(STAGE, { recursive: true, force: true });
mkdirSync(STAGE, { recursive: true });

// The release's package.json of a workspace package: workspace ranges pinned to the version,
// no scripts (no install step), exports without the repository's source condition and with a
// default that require() takes too.
function releaseManifest(pkg) {
  const out = { ...pkg };
  delete out.scripts;
  delete out.devDependencies;
  out.engines = { node: NODE_RANGE };
  for (const field of ['dependencies', 'peerDependencies']) {
    if (!out[field]) continue;
    out[field] = Object.fromEntries(
      Object.entries(out[field]).map(([name, range]) => [name, range.startsWith('workspace:') ? version : range]),
    );
  }
  if (out.exports) {
    out.exports = Object.fromEntries(
      Object.entries(out.exports).map(([key, target]) => {
        if (typeof target === 'string') return [key, target];
        const { 'sparq-source': _source, import: esm, ...rest } = target;
        return [key, { ...rest, default: esm }];
      }),
    );
  }
  return out;
}

// Copies the files a package's manifest lists (plus README and LICENSE) into `to`.
function copyPackage(from, to, files) {
  mkdirSync(to, { recursive: true });
  for (const entry of [...files, 'README.md']) {
    if (existsSync(join(from, entry)))
      cpSync(join(from, entry), join(to, entry), { recursive: true, filter: (src) => !src.endsWith('.tsbuildinfo') });
  }
  cpSync(join(ROOT, 'LICENSE'), join(to, 'LICENSE'));
}

step('stage the packages');
const bundled = {};
for (const name of PACKAGES) {
  const from = join(ROOT, 'packages', name);
  const pkg = readJson(join(from, 'package.json'));
  // install.mjs served the per-package install step, which the release has not.
  // The CLI's files gain the playground page (copied below).
  const files = [...pkg.files.filter((f) => f !== 'scripts/install.mjs'), ...(name === 'cli' ? ['playground'] : [])];
  const to = join(STAGE, 'node_modules', pkg.name);
  copyPackage(from, to, files);
  writeJson(join(to, 'package.json'), { ...releaseManifest(pkg), files });
  bundled[pkg.name] = version;
  // Third-party runtime dependencies, as pnpm resolved them for the workspace.
  for (const dep of Object.keys(pkg.dependencies ?? {}).filter((d) => !d.startsWith('@sparq/'))) {
    const src = realpathSync(join(from, 'node_modules', dep));
    const manifest = readJson(join(src, 'package.json'));
    if (bundled[dep]) continue;
    cpSync(src, join(STAGE, 'node_modules', dep), {
      recursive: true,
      filter: (p) => !relative(src, p).split('/').includes('node_modules'),
    });
    bundled[dep] = manifest.version;
    if (Object.keys(manifest.dependencies ?? {}).length)
      throw new Error(`${dep} has dependencies of its own; bundle them too`);
  }
}
// The playground page (built above) beside the CLI that serves it; source maps stay home.
cpSync(join(ROOT, 'packages/playground/dist'), join(STAGE, 'node_modules/@sparq/cli/playground'), {
  recursive: true,
  filter: (p) => !p.endsWith('.map'),
});
// piscina's one optional dependency (@napi-rs/nice, thread priorities) is left out: npm would
// fetch it from the registry at install time, and piscina runs without it.
const piscina = join(STAGE, 'node_modules/piscina/package.json');
if (existsSync(piscina)) writeJson(piscina, { ...readJson(piscina), optionalDependencies: {} });

step('stage sparq');
copyPackage(join(ROOT, 'packages/sparq'), STAGE, sparq.files);
writeJson(join(STAGE, 'package.json'), {
  ...releaseManifest(sparq),
  dependencies: bundled,
  bundleDependencies: Object.keys(bundled),
});

step('pack');
mkdirSync(RELEASE, { recursive: true });
const tarball = join(RELEASE, `sparq-${version}.tgz`);
rmSync(tarball, { force: true });
run('npm', ['pack', '--silent', '--pack-destination', RELEASE], { cwd: STAGE, stdio: ['ignore', 'ignore', 'inherit'] });
const bytes = statSync(tarball).size;
const listing = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
for (const arch of ARCHES) {
  const addon = `package/node_modules/@sparq/native/prebuilds/linux-${arch}/node.napi.glibc.node`;
  if (!listing.includes(addon)) throw new Error(`the tarball lacks ${addon}`);
}
if (!listing.includes('package/node_modules/@sparq/cli/playground/index.html'))
  throw new Error('the tarball lacks the playground page');
const stray = listing.filter((f) => /(^|\/)build\/|\.o$|\.tsbuildinfo$|UNAVAILABLE/.test(f));
if (stray.length) throw new Error(`the tarball carries build leftovers: ${stray.join(', ')}`);
console.log(`${relative(ROOT, tarball)}: ${(bytes / 1024 / 1024).toFixed(2)} MiB, ${listing.length} files`);
if (bytes > MAX_BYTES) throw new Error(`the tarball is ${bytes} bytes, over ${MAX_BYTES}`);
