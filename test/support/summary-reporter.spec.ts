/**
 * The summary line CI reads, and the skipped tests' reasons above it: a
 * ctx.skip note, a "skipped: why" in a test's or a suite's name, else the
 * test's full name. Run on stand-ins for vitest's reported tasks.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TestCase, TestModule } from 'vitest/node';
import SummaryReporter, { skipReason } from './summary-reporter.ts';

type Node = { type: 'module' | 'suite' | 'test'; name: string; parent?: Node };

/** A stand-in TestCase: `state`, an optional note, its chain of suite names. */
function testCase(
  name: string,
  state: 'passed' | 'failed' | 'skipped',
  suites: string[] = [],
  note?: string,
): TestCase {
  let parent: Node = { type: 'module', name: 'file' };
  for (const s of suites) parent = { type: 'suite', name: s, parent };
  const fullName = [...suites, name].join(' > ');
  return { type: 'test', name, parent, fullName, result: () => ({ state, note, errors: [] }) } as unknown as TestCase;
}

function testModule(path: string, tests: TestCase[]): TestModule {
  return {
    relativeModuleId: path,
    state: () => (tests.some((t) => t.result().state === 'failed') ? 'failed' : 'passed'),
    children: { allTests: () => tests },
  } as unknown as TestModule;
}

afterEach(() => vi.restoreAllMocks());

describe('summary reporter', () => {
  it('finds the reason of a skip: the note first, then a "skipped:" name, then the full name', () => {
    expect(skipReason(testCase('x', 'skipped', [], 'needs AMX'))).toBe('needs AMX');
    expect(skipReason(testCase('works', 'skipped', ['tok512 skipped: /a/tok512.bin is absent']))).toBe(
      '/a/tok512.bin is absent',
    );
    expect(skipReason(testCase('matmul (skipped: native does not implement matmul on q2_k)', 'skipped'))).toBe(
      'native does not implement matmul on q2_k',
    );
    expect(
      skipReason(testCase('needs the native backend', 'skipped', ['native pool (native backend unavailable)'])),
    ).toBe('native pool (native backend unavailable) > needs the native backend');
  });

  it('prints one line per file and reason with its count, then the counts line', () => {
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    new SummaryReporter().onTestRunEnd(
      [
        testModule('test/a.spec.ts', [
          testCase('one', 'passed'),
          testCase('two', 'skipped', [], 'no chromium'),
          testCase('three', 'skipped', [], 'no chromium'),
        ]),
        testModule('test/b.spec.ts', [testCase('four', 'failed'), testCase('five', 'skipped', ['b skipped: no data'])]),
      ],
      [],
    );
    expect(out.join('')).toBe(
      '\n  skipped 2 in test/a.spec.ts: no chromium\n  skipped 1 in test/b.spec.ts: no data\n1 passed, 1 failed, 3 skipped\n',
    );
  });
});
