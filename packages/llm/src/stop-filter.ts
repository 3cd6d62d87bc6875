/**
 * Stop strings over streamed text. Text that could still turn into a stop
 * string is held back until it either does (generation ends, the stop string
 * and anything after it are never shown) or cannot (it is released).
 */
export class StopFilter {
  private readonly stops: readonly string[];
  private held = '';

  /** `stops`: strings that end generation; empty strings are ignored. */
  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /** Adds `text`; returns what may be shown now, and whether a stop string was completed. */
  push(text: string): { text: string; stopped: boolean } {
    this.held += text;
    let at = -1;
    for (const stop of this.stops) {
      const i = this.held.indexOf(stop);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      const shown = this.held.slice(0, at);
      this.held = '';
      return { text: shown, stopped: true };
    }
    const keep = this.pendingPrefix();
    const shown = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return { text: shown, stopped: false };
  }

  /** The held-back text, at the end of generation. */
  flush(): string {
    const text = this.held;
    this.held = '';
    return text;
  }

  /** Length of the longest end of the held text that begins some stop string. */
  private pendingPrefix(): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, this.held.length); n > longest; n--) {
        if (this.held.endsWith(stop.slice(0, n))) {
          longest = n;
          break;
        }
      }
    }
    return longest;
  }
}
