#!/usr/bin/env node
// The `sparq` command (see `sparq --help`).
//
// Inside the repository, pnpm runs every command with `--conditions=sparq-source` (.npmrc), which
// resolves the workspace packages to their TypeScript sources; plain Node cannot load those, so
// under that condition the repository's tsx loader is registered first (an installed package never
// has the condition set and loads dist/).
const sourceCondition = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) =>
  arg.includes('sparq-source'),
);
if (sourceCondition) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import('@sparq/cli');
