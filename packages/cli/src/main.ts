/**
 * `sparq <subcommand>`: the command-line entry point (`pnpm sparq ...`).
 * Results go to stdout; progress, summaries and errors go to stderr.
 *
 * Exit status: 0 success; 1 bad input (a file, a value, the environment), one
 * line on stderr; 2 usage (an unknown command or flag, a flag's value out of
 * its range), one line; 130 interrupted (Ctrl-C): generate stops
 * between forward steps and exits 130, the others keep node's default, ending
 * by SIGINT, which shells report as 130 (a handler here could not interrupt
 * a synchronous loop). `--debug` anywhere adds the stack trace to an error.
 */
import { checkNativeSettings } from '@sparq/native';
import { createRequire } from 'node:module';
import { UsageError, type Command } from './command.ts';
import { describeError, oneLine } from './error-line.ts';
import { backendsCommand } from './commands/backends.ts';
import { vectorsCommand } from './commands/vectors.ts';
import { demoCommand } from './commands/demo.ts';
import { generateCommand } from './commands/generate.ts';
import { convertCommand } from './commands/convert.ts';
import { inspectCommand } from './commands/inspect.ts';
import { chatCommand } from './commands/chat.ts';
import { tokenizeCommand } from './commands/tokenize.ts';
import { benchCommand } from './commands/bench.ts';
import { evalCommand } from './commands/eval.ts';
import { playgroundCommand } from './commands/playground.ts';
import { serveCommand } from './commands/serve.ts';
import { retrievalModelCommand } from './commands/retrieval-model.ts';
import { buildNativeCommand } from './commands/build-native.ts';

const COMMANDS: Command[] = [
  backendsCommand,
  vectorsCommand,
  demoCommand,
  generateCommand,
  chatCommand,
  convertCommand,
  inspectCommand,
  tokenizeCommand,
  evalCommand,
  benchCommand,
  playgroundCommand,
  serveCommand,
  retrievalModelCommand,
  buildNativeCommand,
];

/** This package's version (the same for every sparq package). */
function version(): string {
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
}

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `usage: sparq <command> [options]\n\ncommands:\n${lines.join('\n')}\n\nRun 'sparq <command> --help' for a command's options, 'sparq --version' for the version.\nSPARQ_BACKEND=reference|native forces a backend.\n`;
}

async function main(args: string[]): Promise<number> {
  const debug = args.includes('--debug');
  const [name, ...rest] = args.filter((a) => a !== '--debug');
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
    process.stderr.write(
      `sparq: unknown command '${name}' (commands: ${COMMANDS.map((c) => c.name).join(', ')}; see 'sparq --help')\n`,
    );
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  try {
    checkNativeSettings();
    return await command.run(rest);
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    const usage = e instanceof UsageError;
    // One line, whatever the message holds (a stack only on request).
    const line = usage
      ? `sparq ${name}: ${oneLine(e.message)} (see 'sparq ${name} --help')`
      : `sparq ${name}: ${describeError(e)}`;
    process.stderr.write(`${line}\n${debug && e.stack ? `${e.stack}\n` : ''}`);
    return usage ? 2 : 1;
  }
}

// A closed pipe (`| head`) ends the output quietly, as it would for run.c.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(0);
});
process.exitCode = await main(process.argv.slice(2));
