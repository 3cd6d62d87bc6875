#!/usr/bin/env node
// clang-format over the native addon's C++ (packages/native/.clang-format has the style), with the
// binary the clang-format npm package ships (clang-format 15; no system install needed).
//
//   node scripts/clang-format.mjs --write   formats in place (pnpm format)
//   node scripts/clang-format.mjs --check   exits 1 naming each file that would change (pnpm format:check)
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = join(ROOT, 'packages/native/src');
const mode = process.argv[2];
if (mode !== '--write' && mode !== '--check') {
  console.error('usage: node scripts/clang-format.mjs --write | --check');
  process.exit(2);
}

const binary = createRequire(import.meta.url)('clang-format').getNativeBinary();
const files = readdirSync(SOURCES, { recursive: true })
  .filter((name) => /\.(cc|h)$/.test(name))
  .sort()
  .map((name) => join(SOURCES, name));
const args = mode === '--write' ? ['-i'] : ['--dry-run', '-Werror'];
try {
  execFileSync(binary, ['--style=file', ...args, ...files], { stdio: ['ignore', 'inherit', 'pipe'] });
} catch (error) {
  // --dry-run prints a warning per changed line: name each file once.
  const changed = [
    ...new Set(
      [...String(error.stderr ?? '').matchAll(/^(.+?):\d+:\d+: (?:error|warning)/gm)].map((m) => relative(ROOT, m[1])),
    ),
  ];
  if (mode === '--check' && changed.length > 0) {
    console.error(
      `clang-format: ${changed.length} files are not formatted (pnpm format writes them):\n  ${changed.join('\n  ')}`,
    );
  } else {
    console.error(String(error.stderr ?? error.message));
  }
  process.exit(1);
}
console.log(`clang-format: ${files.length} files ${mode === '--write' ? 'formatted' : 'checked'}`);
