#!/usr/bin/env node
// Prints the source lines of each package (TypeScript, C++, shell, HTML/CSS under src/, lib/ and web/), so CI
// logs show how each part grows. Counts every line, blank and comment lines included.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const SOURCE = /\.(ts|mts|cc|h|c|mjs|js|html|css|sh)$/;

function lines(dir) {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) total += lines(path);
    else if (SOURCE.test(name)) total += readFileSync(path, 'utf8').split('\n').length - 1;
  }
  return total;
}

const rows = [];
for (const pkg of readdirSync(join(root, 'packages')).sort()) {
  let count = 0;
  for (const sub of ['src', 'lib', 'web']) {
    const dir = join(root, 'packages', pkg, sub);
    try {
      if (statSync(dir).isDirectory()) count += lines(dir);
    } catch {
      // This package has no such folder.
    }
  }
  rows.push([`packages/${pkg}`, count]);
}
for (const dir of ['test', 'bench', 'scripts']) rows.push([dir, lines(join(root, dir))]);
const width = Math.max(...rows.map(([name]) => name.length));
console.log('source lines:');
for (const [name, count] of rows) console.log(`  ${name.padEnd(width)} ${String(count).padStart(7)}`);
