/**
 * Paths into ../shared (read-only data beside the project). A test that needs a
 * file calls `sharedFile`: when the file is absent the test is skipped with the
 * reason, except under CI=true, where absence fails.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** ../shared beside the checkout, or SPARQ_SHARED_DIR (a git worktree elsewhere, a CI cache). */
export const SHARED_DIR = process.env.SPARQ_SHARED_DIR
  ? resolve(process.env.SPARQ_SHARED_DIR)
  : resolve(dirname(fileURLToPath(import.meta.url)), '../../../shared');

/** Absolute path of a file under ../shared, and the reason it is unusable (null when present). */
export function sharedFile(relative: string): { path: string; missing: string | null } {
  const path = join(SHARED_DIR, relative);
  if (existsSync(path)) return { path, missing: null };
  const missing = `${path} is absent (../shared must sit beside the project)`;
  if (process.env.CI === 'true') throw new Error(`CI=true and ${missing}`);
  return { path, missing };
}
