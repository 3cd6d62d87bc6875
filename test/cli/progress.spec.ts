/**
 * Progress on stderr: a bar redrawn in place on a terminal, plain lines
 * otherwise (what a log or CI sees).
 */
import { describe, expect, it } from 'vitest';
import { progress } from '../../packages/cli/src/progress.ts';

function stream(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 60, write: (s: string) => writes.push(s) > 0 } as unknown as NodeJS.WriteStream };
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
});
