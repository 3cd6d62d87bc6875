/**
 * The browser playground from outside, for its test and its benchmark: where
 * Chromium is, the page's bundle built from the current sources, and
 * `sparq playground --port 0` started (resolves to its URL).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../llm/support.ts';

/** Debian's package installs /usr/bin/chromium; CHROMIUM_PATH points elsewhere. Absent under CI=true: an error. */
export function findChromium(): { path: string; missing: string | null } {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(
    (p): p is string => !!p,
  );
  const path = candidates.find((p) => existsSync(p));
  if (path) return { path, missing: null };
  const missing = `no chromium (looked for ${candidates.join(', ')}; apt-get install chromium, or set CHROMIUM_PATH)`;
  if (process.env.CI === 'true') throw new Error(`CI=true and ${missing}`);
  return { path: '', missing };
}

/** Builds packages/playground/dist (pnpm install does too; this tests the current sources). */
export function buildPlayground(): void {
  const build = spawnSync(process.execPath, [join(ROOT, 'packages/playground/build.mjs')], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (build.status !== 0) throw new Error(`playground build failed: ${build.stderr}`);
}

/** `sparq playground --port 0 ...args` from source; the URL it prints. Kill the process when done. */
export async function startPlayground(args: string[]): Promise<{ server: ChildProcess; url: string }> {
  const server = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'packages/cli/src/main.ts'), 'playground', '--port', '0', ...args],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    server.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(out);
      if (m) resolve(m[0]);
    });
    server.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
    server.once('exit', (code) => reject(new Error(`sparq playground exited (${code}): ${err}`)));
  });
  return { server, url };
}

/** The page's URL for a run: the playground's URL state (see packages/playground/web/main.ts). */
export function runUrl(url: string, query: Record<string, string | number>): string {
  const params = new URLSearchParams({ run: '1' });
  for (const [key, value] of Object.entries(query)) params.set(key, String(value));
  return `${url}?${params}`;
}
