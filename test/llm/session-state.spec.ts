/**
 * Session state files (saveSessionState / loadSessionState, `sparq generate --save-state /
 * --load-state`): generating N tokens, saving, loading into a fresh session and generating M more
 * gives the text of N + M at once; a file that does not fit is refused and leaves the session as it was.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadModel, type LanguageModel } from 'sparq';
import { loadSessionState, saveSessionState } from '@sparq/llm';
import { files, runSparq, storiesMissing } from './support.ts';

const GREEDY = { temperature: 0 } as const;
const PROMPT = 'Once upon a time, there was a little girl named Lily.';

describe(`session state files on stories260K${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  if (storiesMissing) return void it.skip('needs stories260K', () => {});
  const dir = mkdtempSync(join(tmpdir(), 'sparq-state-'));
  let lm: LanguageModel;
  const load = async () =>
    (lm ??= await loadModel(files.model.path, { backend: 'reference', tokenizer: files.tok512.path }));

  for (const [name, layout] of [
    ['dense', { attention: { method: 'dense' as const } }],
    ['sparq', { attention: { method: 'sparq' as const, r: 4, k: 16 } }],
    ['K f32 / V f16', { attention: { method: 'dense' as const }, kv: { k: 'f32', v: 'f16' } as const }],
  ] as const) {
    it(`${name}: N tokens, save, load elsewhere, M more = N + M at once`, async () => {
      const model = await load();
      const whole = await model
        .createSession({ contextSize: 128, ...layout })
        .generate(PROMPT, { ...GREEDY, maxTokens: 40 })
        .collect();
      const first = model.createSession({ contextSize: 128, ...layout });
      const a = await first.generate(PROMPT, { ...GREEDY, maxTokens: 15 }).collect();
      const path = join(dir, `${name.replace(/\W+/g, '-')}.state`);
      saveSessionState(first, path);
      const second = model.createSession({ contextSize: 100, ...layout });
      loadSessionState(second, path);
      expect(second.history).toEqual(first.history);
      const b = await second.generate('', { ...GREEDY, maxTokens: 25 }).collect();
      expect(a.text + b.text).toBe(whole.text);
    });
  }

  it('refuses a file that does not fit, naming both sides, and keeps the session', async () => {
    const model = await load();
    const s = model.createSession({ contextSize: 128 });
    await s.generate(PROMPT, { ...GREEDY, maxTokens: 30 }).collect();
    const path = join(dir, 'long.state');
    saveSessionState(s, path);
    const small = model.createSession({ contextSize: 16 });
    await small.generate('Once', { ...GREEDY, maxTokens: 3 }).collect();
    const before = small.history;
    expect(() => loadSessionState(small, path)).toThrow(/holds \d+ positions, this session's context is 16/);
    const f32 = model.createSession({ contextSize: 128, kv: 'f32' });
    expect(() => loadSessionState(f32, path)).toThrow(/"dtype":"f16".*this session has .*"dtype":"f32"/);
    const split = model.createSession({ contextSize: 128, kv: { k: 'f16', v: 'f32' } });
    expect(() => loadSessionState(split, path)).toThrow(/"dtype":"f16".*this session has .*"dtype":"f16\/f32"/);
    writeFileSync(join(dir, 'junk.state'), 'not a state');
    expect(() => loadSessionState(small, join(dir, 'junk.state'))).toThrow('is not a session state file');
    expect(small.history).toEqual(before);
  });

  it('sparq generate --save-state then --load-state continues the text', () => {
    const path = join(dir, 'cli.state');
    const common = [
      'generate',
      '--model',
      files.model.path,
      '--tokenizer',
      files.tok512.path,
      '--temperature',
      '0',
      '--ctx',
      '128',
    ];
    const whole = runSparq(...common, '--prompt', PROMPT, '-n', '60');
    const first = runSparq(...common, '--prompt', PROMPT, '-n', '30', '--save-state', path);
    const rest = runSparq(...common, '--load-state', path, '-n', '60');
    expect([whole.code, first.code, rest.code], first.stderr + rest.stderr).toEqual([0, 0, 0]);
    expect(first.stdout + rest.stdout).toBe(whole.stdout);
  });
});
