/**
 * Progress on stderr: a bar redrawn in place on a terminal, plain lines
 * otherwise (what a log or CI sees).
 */
import { describe, expect, it } from 'vitest';
import { formatDuration, progress, rateNote } from '../../packages/cli/src/progress.ts';

function stream(isTTY: boolean) {
  const writes: string[] = [];
  return {
    writes,
    stream: { isTTY, columns: 60, write: (s: string) => writes.push(s) > 0 } as unknown as NodeJS.WriteStream,
  };
}

describe('progress', () => {
  it('draws one bar in place on a terminal and ends its line once', () => {
    const { writes, stream: s } = stream(true);
    const bar = progress('prefill', s);
    bar.update(32, 128, 'tokens');
    bar.update(128, 128, 'tokens');
    bar.end();
    bar.end();
    expect(writes[0]).toBe(`\rprefill [${'#'.repeat(8)}${' '.repeat(22)}] 32/128 tokens\x1b[K`);
    expect(writes[1]).toBe(`\rprefill [${'#'.repeat(30)}] 128/128 tokens\x1b[K`);
    expect(writes.slice(2)).toEqual(['\n']);
  });

  it('writes plain lines when stderr is not a terminal', () => {
    const { writes, stream: s } = stream(false);
    const bar = progress('convert', s);
    bar.update(1, 3, 'tok_embeddings.weight F32');
    bar.end();
    expect(writes).toEqual(['convert 1/3 tok_embeddings.weight F32\n']);
  });

  it('writes plain lines at most every everyMs, and always the last one', () => {
    const { writes, stream: s } = stream(false);
    const bar = progress('prefill', s, { everyMs: 60_000 });
    bar.update(512, 2048);
    bar.update(1024, 2048);
    bar.update(2048, 2048);
    expect(writes).toEqual(['prefill 512/2048\n', 'prefill 2048/2048\n']);
  });

  it('says the rate and the time left at that rate', () => {
    expect(rateNote({ done: 1000, total: 31000, tokensPerSecond: 200 })).toBe('tokens, 200.0 tok/s, ETA 2m30s');
    expect(rateNote({ done: 512, total: 131072, tokensPerSecond: 25.5 })).toBe('tokens, 25.5 tok/s, ETA 1h25m');
    expect(rateNote({ done: 2048, total: 2048, tokensPerSecond: 300 })).toBe('tokens, 300.0 tok/s');
    expect(rateNote({ done: 0, total: 2048, tokensPerSecond: 0 })).toBe('tokens');
    expect([formatDuration(0), formatDuration(59.4), formatDuration(61), formatDuration(3600)]).toEqual([
      '0s',
      '59s',
      '1m01s',
      '1h00m',
    ]);
  });
});
