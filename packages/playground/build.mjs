/**
 * Builds the playground into dist/: the page script and the worker bundled by
 * esbuild (workspace packages from their TypeScript sources), plus index.html
 * and style.css. Runs on `pnpm install` (the root postinstall builds every package) and `pnpm build`.
 *
 * The bundle must not need Node: esbuild on the browser platform fails on any
 * `node:` import, and a source that reaches for Node's globals (Buffer,
 * process, require) fails the build here, naming the file.
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'dist');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await build({
  entryPoints: { main: join(here, 'web/main.ts'), worker: join(here, 'web/worker.ts') },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  conditions: ['sparq-source'],
  minify: true,
  sourcemap: true,
  metafile: true,
  logLevel: 'warning',
});
for (const f of ['index.html', 'style.css']) copyFileSync(join(here, 'web', f), join(out, f));

// Node's globals, used bare (not as a property or part of a longer name).
const NODE_GLOBAL = /(?<![.\w$])(Buffer|process|require)\s*[.(]/;
const offenders = [];
for (const input of Object.keys(result.metafile.inputs)) {
  const lines = readFileSync(join(process.cwd(), input), 'utf8').split('\n');
  lines.forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '');
    if (NODE_GLOBAL.test(code)) offenders.push(`${input}:${i + 1}: ${line.trim()}`);
  });
}
if (offenders.length > 0) {
  rmSync(out, { recursive: true, force: true });
  console.error(`playground: the bundle reaches for Node's globals (not in a browser):\n${offenders.join('\n')}`);
  process.exit(1);
}
const bytes = Object.entries(result.metafile.outputs)
  .filter(([f]) => f.endsWith('.js'))
  .map(([f, o]) => `${f.split('/').pop()} ${(o.bytes / 1024).toFixed(0)} KiB`);
console.log(`playground: built ${out} (${bytes.join(', ')})`);
