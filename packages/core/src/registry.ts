/**
 * Backend registry and selection, after ONNX Runtime's resolver: backends
 * register a factory with a priority; selection tries them best first, keeps
 * every failure reason, and returns the first that initialises.
 * `SPARQ_BACKEND=reference|native` forces one and fails loudly if it is unavailable.
 */
import type { Backend } from './backend.ts';
import { Engine } from './engine.ts';
import { BackendUnavailableError, SparqError } from './errors.ts';

/** Makes a backend; a factory that throws (or rejects) leaves that backend unavailable, with its reason. */
export type BackendFactory = () => Backend | Promise<Backend>;

type InitResult = { backend: Backend } | { error: string };

interface Registration {
  name: string;
  priority: number;
  factory: BackendFactory;
  /** The one initialisation attempt, shared by every caller. */
  result?: Promise<InitResult>;
}

export interface SelectOptions {
  /** Backend to force; defaults to the SPARQ_BACKEND environment variable. */
  backend?: string;
}

/** One backend's line of `backendReport()`: its priority, state and, when unavailable, why. */
export interface BackendStatus {
  name: string;
  priority: number;
  /** 'active': selected; 'available': initialised, not selected; 'unavailable': failed (see reason); 'untried': never initialised. */
  status: 'active' | 'available' | 'unavailable' | 'untried';
  reason?: string;
  kernel?: string;
  threads?: number;
}

function describe(error: unknown): string {
  if (error instanceof Error)
    return error.message + (error.cause instanceof Error ? ` (cause: ${error.cause.message})` : '');
  return String(error);
}

export class BackendRegistry {
  private readonly registrations = new Map<string, Registration>();
  private readonly settled = new Map<string, InitResult>();
  private active: Engine | null = null;

  /** Registers a backend factory. Registering a name twice throws. Higher priority is preferred. */
  register(name: string, factory: BackendFactory, priority: number): void {
    if (this.registrations.has(name)) throw new SparqError(`registerBackend: backend '${name}' is already registered`);
    this.registrations.set(name, { name, priority, factory });
  }

  /** Registered backend names, best first. */
  names(): string[] {
    return [...this.registrations.values()].sort((a, b) => b.priority - a.priority).map((r) => r.name);
  }

  /** Initialises a backend once; later calls get the same backend or the same failure reason. */
  private initialise(name: string): Promise<InitResult> {
    const reg = this.registrations.get(name)!;
    reg.result ??= (async () => {
      let result: InitResult;
      try {
        result = { backend: await reg.factory() };
      } catch (error) {
        result = { error: describe(error) };
      }
      this.settled.set(name, result);
      return result;
    })();
    return reg.result;
  }

  /**
   * The forced backend (option or SPARQ_BACKEND), else the highest-priority one
   * that initialises. Throws BackendUnavailableError with every reason when
   * nothing works, or when the forced backend is unavailable.
   */
  async select(options: SelectOptions = {}): Promise<Engine> {
    // `process` is absent in a browser (the playground's worker).
    const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env;
    const forced = options.backend ?? env?.SPARQ_BACKEND ?? '';
    if (forced !== '') {
      if (!this.registrations.has(forced)) {
        const source = options.backend ? 'requested' : 'forced by SPARQ_BACKEND';
        throw new BackendUnavailableError(
          `selectBackend: backend '${forced}' (${source}) is not registered; registered: ${this.names().join(', ') || 'none'}`,
        );
      }
      const result = await this.initialise(forced);
      if ('error' in result)
        throw new BackendUnavailableError(
          `selectBackend: backend '${forced}' was requested but is unavailable: ${result.error}`,
        );
      return (this.active = new Engine(result.backend));
    }
    const reasons: string[] = [];
    for (const name of this.names()) {
      const result = await this.initialise(name);
      if ('backend' in result) return (this.active = new Engine(result.backend));
      reasons.push(`${name}: ${result.error}`);
    }
    throw new BackendUnavailableError(
      `selectBackend: no backend is available${reasons.length ? `; ${reasons.join('; ')}` : ' (none registered)'}`,
    );
  }

  /** Every registered backend, initialised; those that fail come back with their reason. */
  async loadAll(): Promise<{ available: Engine[]; unavailable: { name: string; reason: string }[] }> {
    const available: Engine[] = [];
    const unavailable: { name: string; reason: string }[] = [];
    for (const name of this.names()) {
      const result = await this.initialise(name);
      if ('backend' in result) available.push(new Engine(result.backend));
      else unavailable.push({ name, reason: result.error });
    }
    return { available, unavailable };
  }

  /** Which backend is active, which were skipped, and why. */
  report(): BackendStatus[] {
    return this.names().map((name) => {
      const base = { name, priority: this.registrations.get(name)!.priority };
      const result = this.settled.get(name);
      if (!result) return { ...base, status: 'untried' as const };
      if ('error' in result) return { ...base, status: 'unavailable' as const, reason: result.error };
      const info = result.backend.info();
      const status = this.active?.backend === result.backend ? ('active' as const) : ('available' as const);
      return { ...base, status, kernel: info.kernel, threads: info.threads };
    });
  }
}

/** The process-wide registry the backend packages register into when imported. */
export const defaultRegistry = new BackendRegistry();

/** Registers a backend factory under `name` with a priority (higher is tried first); a name registered twice throws. */
export function registerBackend(name: string, factory: BackendFactory, priority: number): void {
  defaultRegistry.register(name, factory, priority);
}

/**
 * The Engine of the best backend that initialises (or of `options.backend` / SPARQ_BACKEND, which
 * must); BackendUnavailableError lists every reason when none does.
 */
export function selectBackend(options: SelectOptions = {}): Promise<Engine> {
  return defaultRegistry.select(options);
}

/** Initialises every registered backend: the engines that load and the reasons of those that do not. */
export function loadBackends(): ReturnType<BackendRegistry['loadAll']> {
  return defaultRegistry.loadAll();
}

/** Each registered backend with its state (active, available, unavailable with the reason, untried), best first. */
export function backendReport(): BackendStatus[] {
  return defaultRegistry.report();
}

/** One line per backend, e.g. `native: unavailable (addon not built: ...)`. */
export function formatBackendReport(report: BackendStatus[] = backendReport()): string {
  return report
    .map((s) => {
      if (s.status === 'unavailable') return `${s.name}: unavailable (${s.reason})`;
      if (s.status === 'untried') return `${s.name}: not tried`;
      return `${s.name}: ${s.status} (kernel ${s.kernel}, ${s.threads} thread${s.threads === 1 ? '' : 's'})`;
    })
    .join('\n');
}
