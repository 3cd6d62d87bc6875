#!/usr/bin/env node
// The `sparq` command (see `sparq --help`).
//
// Inside the repository, pnpm runs every command with `--conditions=sparq-source` (.npmrc), under
// which the workspace packages resolve to their TypeScript sources; plain Node cannot load those, so
// when the CLI resolves to a .ts file the repository's tsx loader is registered first. An installed
// package has no such export (release-pack.mjs drops it): it loads dist/, whatever NODE_OPTIONS says.
if (import.meta.resolve('@sparq/cli').endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import('@sparq/cli');
