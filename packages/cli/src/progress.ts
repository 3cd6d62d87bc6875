/**
 * Progress of a long step on stderr: a bar redrawn in place when stderr is a
 * terminal, one plain line per update otherwise (logs, pipes, CI).
 */
const BAR_WIDTH = 30;

export interface Progress {
  /** `done` of `total` units, with an optional note (e.g. a tensor name). */
  update(done: number, total: number, note?: string): void;
  /** Ends the bar's line (a no-op for plain lines). */
  end(): void;
}

export function progress(title: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) {
    return {
      update: (done, total, note) => void stream.write(`${title} ${done}/${total}${note ? ` ${note}` : ''}\n`),
      end: () => {},
    };
  }
  let drawn = false;
  return {
    update(done, total, note) {
      const filled = total > 0 ? Math.round((BAR_WIDTH * done) / total) : BAR_WIDTH;
      const line = `${title} [${'#'.repeat(filled)}${' '.repeat(BAR_WIDTH - filled)}] ${done}/${total}${note ? ` ${note}` : ''}`;
      // \r and clear-to-end-of-line: the bar is redrawn in place.
      stream.write(`\r${line.slice(0, Math.max(20, (stream.columns ?? 80) - 1))}\x1b[K`);
      drawn = true;
    },
    end() {
      if (drawn) stream.write('\n');
      drawn = false;
    },
  };
}
