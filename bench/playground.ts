/**
 * The browser playground's numbers: page load time (navigation to model
 * ready), decode tokens/s in headless Chromium against `sparq generate` on
 * the reference backend for the same settings, and the bundle's size; with
 * --shots DIR, a PNG of each teaching view (the README's screenshots).
 *   pnpm bench:playground [--n 256] [--reps 3] [--shots docs/playground]
 * Each figure is the best of --reps runs (the machine is shared and noisy).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { ROOT } from '../test/llm/support.ts';
import { buildPlayground, findChromium, runUrl, startPlayground } from '../test/support/playground.ts';

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const n = Number(option('n', '256'));
const reps = Number(option('reps', '3'));
const shots = option('shots', '');
const PROMPT = 'Once upon a time';
const RUNS: { name: string; query: Record<string, string | number>; flags: string[] }[] = [
  { name: 'dense', query: { attention: 'dense' }, flags: ['--attention', 'dense'] },
  {
    name: 'sparq r=2 k=16 l=4',
    query: { attention: 'sparq', r: 2, k: 16, l: 4 },
    flags: ['--attention', 'sparq', '--r', '2', '--k', '16', '--l', '4'],
  },
];

const chromiumFile = findChromium();
if (chromiumFile.missing) throw new Error(chromiumFile.missing);
buildPlayground();
const dist = join(ROOT, 'packages/playground/dist');
const bundle = readdirSync(dist)
  .filter((f) => /\.(js|html|css)$/.test(f))
  .map((f) => [f, statSync(join(dist, f)).size] as const);

const { server, url } = await startPlayground([]);
const browser = await chromium.launch({ executablePath: chromiumFile.path, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const load: number[] = [];
  const browserRate = new Map<string, number[]>();
  for (let rep = 0; rep < reps; rep++) {
    for (const run of RUNS) {
      await page.goto(runUrl(url, { prompt: PROMPT, n, temperature: 0, ...run.query }));
      await page.waitForSelector('#output[data-done]', { timeout: 120_000 });
      load.push(Number(await page.getAttribute('#status', 'data-load-ms')));
      const rate = Number(await page.getAttribute('#status', 'data-tokens-per-second'));
      browserRate.set(run.name, [...(browserRate.get(run.name) ?? []), rate]);
    }
  }
  const cliRate = (flags: string[]) => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'packages/cli/src/main.ts'),
        'generate',
        '--model',
        join(ROOT, '../shared/models/stories260K.bin'),
        '--prompt',
        PROMPT,
        '-n',
        String(n),
        '--temperature',
        '0',
        ...flags,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, SPARQ_BACKEND: 'reference' },
        encoding: 'utf8',
      },
    );
    const m = /decode \d+ tokens: ([\d.]+) tok\/s/.exec(r.stderr);
    if (!m) throw new Error(`no decode rate in: ${r.stderr}`);
    return Number(m[1]);
  };
  console.log(`bundle: ${bundle.map(([f, b]) => `${f} ${(b / 1024).toFixed(1)} KiB`).join(', ')}`);
  console.log(
    `page load to model ready: best ${Math.min(...load)} ms, median ${load.sort((a, b) => a - b)[load.length >> 1]} ms (${load.length} loads)`,
  );
  console.log(`decode tok/s, stories260K, -n ${n}, greedy, best of ${reps}:`);
  console.log('| attention | browser (worker, reference) | CLI, reference backend | browser / CLI |');
  console.log('|---|---|---|---|');
  for (const run of RUNS) {
    const b = Math.max(...browserRate.get(run.name)!);
    const c = Math.max(...Array.from({ length: reps }, () => cliRate(run.flags)));
    console.log(`| ${run.name} | ${b.toFixed(1)} | ${c.toFixed(1)} | ${(b / c).toFixed(2)} |`);
  }
  if (shots) await screenshots(page, join(ROOT, shots));
} finally {
  await browser.close();
  server.kill('SIGTERM');
}

/** One PNG per view, at a SparQ step in the middle of a story. */
async function screenshots(page: Page, dir: string): Promise<void> {
  await page.goto(
    runUrl(url, {
      prompt: PROMPT,
      n: 64,
      temperature: 0,
      attention: 'sparq',
      r: 2,
      k: 16,
      l: 4,
      step: 40,
      layer: 0,
      head: 0,
    }),
  );
  await page.waitForSelector('#output[data-done]');
  await page.waitForSelector('#views[data-ready]');
  await page.screenshot({ path: join(dir, 'controls.png'), clip: { x: 0, y: 0, width: 1280, height: 560 } });
  for (const view of ['query', 'scores', 'alpha', 'baselines', 'reads']) {
    await page.locator(`#view-${view}`).screenshot({ path: join(dir, `${view}.png`) });
  }
  console.log(`screenshots in ${dir}`);
}
