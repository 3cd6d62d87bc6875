/**
 * Resident memory of this process, for the end-to-end part's peak RSS per
 * engine. Linux keeps the peak (VmHWM in /proc/self/status) and resets it to
 * the current RSS when "5" is written to /proc/self/clear_refs, so each
 * engine's run gets its own peak even though both engines share the process.
 * Elsewhere (or where the reset is refused) the peak is null: a process-wide
 * maximum would credit one engine with the other's memory.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How long V8's background sweeper gets to return freed ArrayBuffers to the OS (1 GiB took one event-loop turn here). */
const SWEEP_MS = 100;

/**
 * Runs a full garbage collection, so the previous run's buffers (a KV cache of GBs, the bandwidth
 * probe's 1 GiB) are gone before the next window opens: gc(), a pause for V8 to free the
 * ArrayBuffers' memory (it does so off the main thread, after the collection), gc() again. V8
 * exposes gc() only behind --expose-gc; setting the flag at run time makes it available to new contexts.
 */
async function collectGarbage(): Promise<void> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  await new Promise((resolve) => setTimeout(resolve, SWEEP_MS));
  gc();
}

/** A field of /proc/self/status in bytes (the file gives kB), or null off Linux. */
function statusBytes(field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export interface RssWindow {
  /** RSS when the window opened (bytes), null where it cannot be read. */
  startBytes: number | null;
  /** The peak RSS since the window opened (bytes), null where it cannot be measured. */
  peakBytes(): number | null;
}

/** Starts measuring the peak RSS from now (after a garbage collection; resets the kernel's high-water mark). */
export async function rssWindow(): Promise<RssWindow> {
  await collectGarbage();
  let reset = false;
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    reset = true;
  } catch {
    // Not Linux, or not permitted: no per-window peak.
  }
  const startBytes = statusBytes('VmRSS');
  // The kernel's RSS counters lag by a few pages per thread, so VmHWM can read a few KB under the RSS read just after the reset.
  const peakBytes = () => {
    const hwm = reset ? statusBytes('VmHWM') : null;
    return hwm === null ? null : Math.max(hwm, startBytes ?? 0);
  };
  return { startBytes, peakBytes };
}
