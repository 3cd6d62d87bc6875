/**
 * `sparq <subcommand>`: the command-line entry point (`pnpm sparq ...`).
 * Results go to stdout; progress, summaries and errors go to stderr.
 */
import { SparqError } from '@sparq/core';
import { createRequire } from 'node:module';
import { UsageError, type Command } from './command.ts';
import { backendsCommand } from './commands/backends.ts';
import { vectorsCommand } from './commands/vectors.ts';
import { demoCommand } from './commands/demo.ts';
import { generateCommand } from './commands/generate.ts';
import { convertCommand } from './commands/convert.ts';
import { inspectCommand } from './commands/inspect.ts';
import { chatCommand } from './commands/chat.ts';
import { tokenizeCommand } from './commands/tokenize.ts';
import { benchCommand } from './commands/bench.ts';

const COMMANDS: Command[] = [backendsCommand, vectorsCommand, demoCommand, generateCommand, chatCommand, convertCommand, inspectCommand, tokenizeCommand, benchCommand];

/** This package's version (the same for every sparq package). */
function version(): string {
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
}

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `usage: sparq <command> [options]\n\ncommands:\n${lines.join('\n')}\n\nRun 'sparq <command> --help' for a command's options, 'sparq --version' for the version.\nSPARQ_BACKEND=reference|native forces a backend.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v') {
    process.stdout.write(`sparq ${version()}\n`);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(help());
    return name ? 0 : 2;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`sparq: unknown command '${name}'\n\n${help()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`sparq ${name}: ${error.message}\n\n${command.usage}\n`);
      return 2;
    }
    if (error instanceof SparqError || (error instanceof Error && 'code' in error)) {
      process.stderr.write(`sparq ${name}: ${error.name}: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

// A closed pipe (`| head`) ends the output quietly, as it would for run.c.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(0);
});
process.exitCode = await main(process.argv.slice(2));
