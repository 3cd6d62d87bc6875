/**
 * Progress of a long step on stderr: a bar redrawn in place when stderr is a
 * terminal, one plain line per update otherwise (logs, pipes, CI).
 */
const BAR_WIDTH = 30;

/** How often long runs (a prefill of many chunks) write a plain progress line when stderr is not a terminal. */
export const PROGRESS_EVERY_MS = 5000;

export interface Progress {
  /** `done` of `total` units, with an optional note (e.g. a tensor name). */
  update(done: number, total: number, note?: string): void;
  /** Ends the bar's line (a no-op for plain lines). */
  end(): void;
}

/**
 * Progress on `stream`. `everyMs`: plain lines (not a terminal) at most this often, plus the last
 * one (done = total), so a 128k-token prefill logs a line every few seconds, not one per chunk.
 */
export function progress(
  title: string,
  stream: NodeJS.WriteStream = process.stderr,
  { everyMs = 0 }: { everyMs?: number } = {},
): Progress {
  if (!stream.isTTY) {
    let last = -Infinity;
    return {
      update(done, total, note) {
        const now = performance.now();
        if (done < total && now - last < everyMs) return;
        last = now;
        stream.write(`${title} ${done}/${total}${note ? ` ${note}` : ''}\n`);
      },
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

/** "1h02m", "3m05s" or "42s": a duration for an estimate. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${s}s`;
}

/** The note of a token progress line: the rate so far and, from it, the time left ("tokens, 212.4 tok/s, ETA 3m05s"). */
export function rateNote(p: { done: number; total: number; tokensPerSecond: number }): string {
  if (!(p.tokensPerSecond > 0)) return 'tokens';
  const left = p.done < p.total ? `, ETA ${formatDuration((p.total - p.done) / p.tokensPerSecond)}` : '';
  return `tokens, ${p.tokensPerSecond.toFixed(1)} tok/s${left}`;
}
