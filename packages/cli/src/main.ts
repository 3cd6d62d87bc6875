/**
 * `sparq <subcommand>`: the command-line entry point (`pnpm sparq ...`).
 * Results go to stdout; progress, summaries and errors go to stderr.
 */
import { SparqError } from '@sparq/core';
import { UsageError, type Command } from './command.ts';
import { backendsCommand } from './commands/backends.ts';
import { vectorsCommand } from './commands/vectors.ts';
import { demoCommand } from './commands/demo.ts';
import { generateCommand } from './commands/generate.ts';
import { convertCommand } from './commands/convert.ts';

const COMMANDS: Command[] = [backendsCommand, vectorsCommand, demoCommand, generateCommand, convertCommand];

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `usage: sparq <command> [options]\n\ncommands:\n${lines.join('\n')}\n\nRun 'sparq <command> --help' for a command's options.\nSPARQ_BACKEND=reference|native forces a backend.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
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

process.exitCode = await main(process.argv.slice(2));
