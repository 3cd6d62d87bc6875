#!/usr/bin/env node
// The public names of a `sparq` entry, counted with the TypeScript compiler (values and types):
//
//   node scripts/public-api.mjs [entry]          names, values, types only (default packages/sparq/src/index.ts)
//   node scripts/public-api.mjs --check [entry]  also: every name has a TSDoc comment (exit 1 naming those without)
//
// TypeScript 7 (the packages' compiler) has no JavaScript API: this uses docs/'s TypeScript 5.9.
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ts = createRequire(join(ROOT, 'docs/package.json'))('typescript');
const args = process.argv.slice(2);
const check = args.includes('--check');
const entry = join(ROOT, args.find((a) => !a.startsWith('--')) ?? 'packages/sparq/src/index.ts');

const program = ts.createProgram([entry], {
  allowImportingTsExtensions: true,
  noEmit: true,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  customConditions: ['sparq-source'],
  skipLibCheck: true,
});
const checker = program.getTypeChecker();
const names = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)));
const resolved = names.map((symbol) => ({
  name: symbol.name,
  target: symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol,
}));
const values = resolved.filter(({ target }) => target.flags & ts.SymbolFlags.Value).length;
console.log(`${relative(ROOT, entry)}: ${names.length} names, ${values} values, ${names.length - values} types only`);

if (check) {
  const undocumented = resolved.filter(
    ({ target }) => ts.displayPartsToString(target.getDocumentationComment(checker)).trim() === '',
  );
  for (const { name, target } of undocumented)
    console.error(`  no TSDoc: ${name} (${relative(ROOT, target.declarations?.[0]?.getSourceFile().fileName ?? '?')})`);
  if (undocumented.length > 0) {
    console.error(`public-api: ${undocumented.length} public names have no TSDoc comment`);
    process.exit(1);
  }
}
