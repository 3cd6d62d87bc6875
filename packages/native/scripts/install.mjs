#!/usr/bin/env node
// Install step of @sparq/native: nothing to do when the prebuilt addon for
// this platform loads; otherwise build from source (scripts/build.mjs, which
// never fails the install: without a compiler it records why, and the engine
// runs on the reference backend). A checkout of the repository (lib/, the
// TypeScript sources, is there) and SPARQ_BUILD_FROM_SOURCE=1 always build.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const prebuilt = join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'node.napi.glibc.node');

function loads(path) {
  try {
    createRequire(import.meta.url)(path).info();
    return true;
  } catch (error) {
    console.error(`@sparq/native: the prebuilt addon does not load here (${error.message}); building from source`);
    return false;
  }
}

const fromSource = process.env.SPARQ_BUILD_FROM_SOURCE === '1' || existsSync(join(root, 'lib'));
if (!fromSource && existsSync(prebuilt) && loads(prebuilt)) {
  console.error(`@sparq/native: using the prebuilt addon ${join('prebuilds', `${process.platform}-${process.arch}`)}`);
} else {
  await import('./build.mjs');
}
