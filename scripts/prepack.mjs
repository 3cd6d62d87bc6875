#!/usr/bin/env node
// prepack of every package: the repository's LICENSE goes into the tarball
// (npm takes LICENSE from the package folder only). The copies are gitignored.
import { copyFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

copyFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'LICENSE'), join(process.cwd(), 'LICENSE'));
