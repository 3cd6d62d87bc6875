import {
  BackendRegistry,
  BackendUnavailableError,
  Engine,
  Tensor,
  UnsupportedOpError,
  formatBackendReport,
  type Backend,
} from '@sparq/core';
import { afterEach, describe, expect, it } from 'vitest';

const fake = (name: string): Backend => ({ name, info: () => ({ name, kernel: `${name}-kernel`, threads: 1 }) });
const failing = (reason: string) => () => {
  throw new BackendUnavailableError(reason);
};

describe('BackendRegistry', () => {
  const saved = process.env.SPARQ_BACKEND;
  afterEach(() => {
    if (saved === undefined) delete process.env.SPARQ_BACKEND;
    else process.env.SPARQ_BACKEND = saved;
  });

  it('picks the highest-priority backend that initialises and keeps every reason', async () => {
    delete process.env.SPARQ_BACKEND;
    const registry = new BackendRegistry();
    registry.register('slow', () => fake('slow'), 0);
    registry.register('fast', failing('no compiler'), 100);
    registry.register('mid', () => fake('mid'), 50);
    expect(registry.names()).toEqual(['fast', 'mid', 'slow']);
    const engine = await registry.select();
    expect(engine).toBeInstanceOf(Engine);
    expect(engine.name).toBe('mid');
    const report = registry.report();
    expect(report).toEqual([
      { name: 'fast', priority: 100, status: 'unavailable', reason: 'no compiler' },
      { name: 'mid', priority: 50, status: 'active', kernel: 'mid-kernel', threads: 1 },
      { name: 'slow', priority: 0, status: 'untried' },
    ]);
    expect(formatBackendReport(report)).toBe(
      'fast: unavailable (no compiler)\nmid: active (kernel mid-kernel, 1 thread)\nslow: not tried',
    );
  });

  it('honours SPARQ_BACKEND and fails loudly when the forced backend is unavailable', async () => {
    const registry = new BackendRegistry();
    registry.register('reference', () => fake('reference'), 0);
    registry.register('native', failing('addon not built: g++ missing'), 100);
    process.env.SPARQ_BACKEND = 'reference';
    expect((await registry.select()).name).toBe('reference');
    process.env.SPARQ_BACKEND = 'native';
    await expect(registry.select()).rejects.toThrow(BackendUnavailableError);
    await expect(registry.select()).rejects.toThrow(
      "backend 'native' was requested but is unavailable: addon not built: g++ missing",
    );
    process.env.SPARQ_BACKEND = 'cuda';
    await expect(registry.select()).rejects.toThrow(
      "backend 'cuda' (forced by SPARQ_BACKEND) is not registered; registered: native, reference",
    );
    await expect(registry.select({ backend: 'cuda' })).rejects.toThrow("backend 'cuda' (requested)");
  });

  it('lists every reason when nothing is available', async () => {
    delete process.env.SPARQ_BACKEND;
    const registry = new BackendRegistry();
    registry.register('a', failing('reason a'), 1);
    registry.register('b', () => Promise.reject(new Error('reason b')), 0);
    await expect(registry.select()).rejects.toThrow('no backend is available; a: reason a; b: reason b');
    const { available, unavailable } = await registry.loadAll();
    expect(available).toEqual([]);
    expect(unavailable).toEqual([
      { name: 'a', reason: 'reason a' },
      { name: 'b', reason: 'reason b' },
    ]);
  });

  it('initialises each backend once and refuses duplicate names', async () => {
    let created = 0;
    const registry = new BackendRegistry();
    registry.register('x', () => (created++, fake('x')), 0);
    expect(() => registry.register('x', () => fake('x'), 5)).toThrow("backend 'x' is already registered");
    await registry.select({ backend: 'x' });
    await registry.loadAll();
    expect(created).toBe(1);
  });

  it('throws UnsupportedOpError for an op the backend declares absent', () => {
    const engine = new Engine(fake('bare'));
    expect(engine.has('softmax')).toBe(false);
    const x = { dtype: 'f32', shape: [1, 2], isContiguous: () => true, rank: 2 } as never;
    expect(() => engine.softmax(x)).toThrow(UnsupportedOpError);
    expect(() => engine.softmax(x)).toThrow("softmax: not implemented by backend 'bare'");
  });

  it('throws UnsupportedOpError for a block dtype the backend does not list, before calling it', () => {
    const calls: string[] = [];
    const engine = new Engine({
      ...fake('q8only'),
      blockDTypes: ['q8_0'],
      matvec: () => calls.push('matvec'),
      quantize: () => calls.push('quantize'),
    });
    expect(engine.has('matvec')).toBe(true);
    expect(engine.has('matvec', 'q8_0')).toBe(true);
    expect(engine.has('matvec', 'q4_k')).toBe(false);
    expect(engine.has('matvec', 'f16')).toBe(true); // plain dtypes are not listed: every matvec takes them
    const w = Tensor.zeros('q4_k', [2, 256]);
    expect(() => engine.matvec(Tensor.zeros('f32', [2]), w, Tensor.zeros('f32', [256]))).toThrow(
      new UnsupportedOpError('matvec', 'q8only', 'q4_k', ['q8_0']),
    );
    expect(() => engine.quantize(w, Tensor.zeros('f32', [2, 256]))).toThrow(
      "quantize: dtype q4_k is not implemented by backend 'q8only' (it has q8_0)",
    );
    engine.matvec(Tensor.zeros('f32', [2]), Tensor.zeros('q8_0', [2, 32]), Tensor.zeros('f32', [32]));
    expect(calls).toEqual(['matvec']);
  });
});
