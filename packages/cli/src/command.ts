/**
 * What a subcommand of `sparq` provides. Each lives in commands/<name>.ts.
 */
export interface Command {
  name: string;
  /** One line for `sparq --help`. */
  summary: string;
  /** Full usage text for `sparq <name> --help`. */
  usage: string;
  /** Runs with the arguments after the subcommand; resolves to the exit code. */
  run(argv: string[]): Promise<number>;
}

/** Thrown for bad command-line usage: printed with the usage text, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
