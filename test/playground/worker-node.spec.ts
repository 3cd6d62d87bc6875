/**
 * The playground's engine worker (the built bundle, run in Node with `self`
 * shimmed, no browser) against `sparq generate` with the same settings and
 * the CLI's defaults: the same text, byte for byte. The issue's settings
 * (prompt "The little dog found", n 64, SparQ r 1, k 12, l 3) gave different
 * text while the page pinned an f32 KV cache and the CLI defaulted to f16.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT, files, storiesMissing } from '../llm/support.ts';
import { buildPlayground } from '../support/playground.ts';

/** Loads the model into the built worker, runs one generation, prints its text (argv: model, tokenizer, settings JSON). */
const RUN_WORKER = `
import { readFileSync } from 'node:fs';
const [model, tokenizer, settings] = process.argv.slice(1);
const texts = [];
let finish;
const finished = new Promise((resolve) => (finish = resolve));
globalThis.self = { postMessage: (m) => { if (m.type === 'text') texts.push(m.text); if (m.type === 'done' || m.type === 'error') finish(m); } };
await import(${JSON.stringify(join(ROOT, 'packages/playground/dist/worker.js'))});
const file = (p) => ({ name: p, bytes: new Uint8Array(readFileSync(p)) });
self.onmessage({ data: { type: 'load', model: file(model), tokenizer: file(tokenizer) } });
self.onmessage({ data: { type: 'generate', settings: JSON.parse(settings) } });
const last = await finished;
if (last.type === 'error') { console.error(last.message); process.exit(1); }
process.stdout.write(texts.join(''));
`;

function run(command: string[], env: Record<string, string> = {}): string {
  const r = spawnSync(process.execPath, command, {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
  if (r.status !== 0) throw new Error(`${command.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

describe.skipIf(storiesMissing)(
  `playground worker in Node${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`,
  () => {
    beforeAll(() => buildPlayground());

    it("gives sparq generate's text for the same settings (SparQ r 1, k 12, l 3; and dense)", () => {
      for (const [method, flags] of [
        ['sparq', ['--r', '1', '--k', '12', '--l', '3']],
        ['dense', []],
      ] as const) {
        const settings = { prompt: 'The little dog found', n: 64, temperature: 0, seed: 42, method, r: 1, k: 12, l: 3 };
        const page = run([
          '--input-type=module',
          '-e',
          RUN_WORKER,
          files.model.path,
          files.tok512.path,
          JSON.stringify(settings),
        ]);
        const cli = run(
          [
            '--import',
            'tsx',
            join(ROOT, 'packages/cli/src/main.ts'),
            'generate',
            '--model',
            files.model.path,
            '--prompt',
            settings.prompt,
            '-n',
            '64',
            '--temperature',
            '0',
            '--attention',
            method,
            ...flags,
          ],
          { SPARQ_BACKEND: 'reference' },
        );
        expect(page.length).toBeGreaterThan(settings.prompt.length);
        expect(page, method).toBe(cli);
      }
    });
  },
);
