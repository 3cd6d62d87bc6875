import { formatBackendReport, loadBackends, selectBackend } from '@sparq/core';
import '../backends.ts';
import type { Command } from '../command.ts';
import { parseFlags } from '../flags.ts';

export const backendsCommand: Command = {
  name: 'backends',
  summary: 'list the backends, which one is selected, and why the others are not',
  usage: `sparq backends

Initialises every registered backend and prints one line each: the selected one
(highest priority that loads, or the one forced by SPARQ_BACKEND), the others
that are available, and the reason for each that is not.`,
  async run(argv) {
    parseFlags(argv, {});
    await loadBackends();
    await selectBackend();
    process.stdout.write(formatBackendReport() + '\n');
    return 0;
  },
};
