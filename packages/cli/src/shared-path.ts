/** Files of ../shared (models, data) that commands default to. */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** ../shared beside the working directory, else beside the repository this file is in. */
export function sharedPath(relative: string): string {
  const fromCwd = resolve('..', 'shared', relative);
  if (existsSync(fromCwd)) return fromCwd;
  return resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared', relative);
}
