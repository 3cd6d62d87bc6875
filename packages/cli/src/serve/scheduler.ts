/**
 * The server's engine room: `parallel` slots over one model, a bounded queue, and a loop that runs
 * one step at a time and yields to the event loop between steps (so HTTP keeps flowing).
 *
 *   slot s: a Session over sequence s of per-layer KV caches of batch `parallel` (all allocated
 *           at start: memory is fixed), and the tokens its cache holds
 *   step:   ONE forward pass (Session.forwardBatch) whose rows are every decoding slot's sampled
 *           token (one row each), then prompt chunks of the slots still reading their prompts, in
 *           turn from a start that moves one slot each step, within the step's budget of
 *           `prefillChunk` prompt tokens in all: the weights are read once per step for all of them
 *
 * Requests that arrive together are prefilled in the same steps (8 prompts of 8 tokens within a
 * budget of 64: one step), and a long prompt advances at most a budget per step while the other
 * streams keep decoding; as the start moves, it cannot take every step's budget from the others.
 * A new job takes the free slot whose cached tokens share the longest prefix with its prompt
 * (prompt cache: chat turns, shared system prompts) and forwards only the rest; the last prompt
 * token is always forwarded again, for its logits.
 *
 * Faults: a job whose client went away or whose time ran out is cancelled at once (queued: removed;
 * running: its slot is free before the next step). A step that throws fails the jobs in it and
 * leaves their slots empty; the loop goes on.
 */
import {
  BatchState,
  RunState,
  Sampler,
  Session,
  StopFilter,
  TextStream,
  stops,
  type AttentionConfig,
  type LanguageModel,
  type StopRule,
} from '@sparq/llm';
import { KVCache, type KVTypeChoice } from '@sparq/core';

export type FinishReason = 'stop' | 'length';

/** What a job reports: text pieces as they are decided, then one end (done or failed). */
export interface JobEvents {
  onText(text: string): void;
  onDone(result: JobResult): void;
  onError(error: Error): void;
}

export interface JobResult {
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens found in the slot's cache (not forwarded again). */
  cachedTokens: number;
}

export interface JobSpec {
  prompt: number[];
  /** Tokens to sample at most (the caller has checked they fit the context). */
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  stop: string[];
  /** Generate past end-of-text tokens (they are sampled and shown like any other): max_tokens, a stop string or the context ends the job. */
  ignoreEos: boolean;
  attention: AttentionConfig;
}

export interface SchedulerOptions {
  parallel: number;
  /** KV positions per slot. */
  context: number;
  /** Jobs waiting for a slot, at most. */
  queue: number;
  /** Prompt tokens one step forwards, all slots together (the decode rows come on top). */
  prefillChunk: number;
  kvDType: KVTypeChoice;
  kvLayout: 'k-twice' | 'single-k';
  stopRule: StopRule;
}

/** The queue is full: the caller answers 429. */
export class QueueFullError extends Error {
  override name = 'QueueFullError';
}

export class Job {
  readonly spec: JobSpec;
  readonly events: JobEvents;
  readonly sampler: Sampler;
  readonly stopFilter: StopFilter;
  stream: TextStream | null = null;
  slot: Slot | null = null;
  /** The sampled token not forwarded yet; null while prefilling or once ended. */
  pending: number | null = null;
  generated = 0;
  cachedTokens = 0;
  ended = false;
  readonly enqueuedAt = performance.now();

  constructor(spec: JobSpec, events: JobEvents, vocabSize: number) {
    this.spec = spec;
    this.events = events;
    this.sampler = new Sampler(vocabSize, { temperature: spec.temperature, topp: spec.topP, seed: spec.seed });
    this.stopFilter = new StopFilter(spec.stop);
  }
}

class Slot {
  readonly id: number;
  readonly session: Session;
  /** Tokens whose keys and values are in the cache, in order. */
  readonly tokens: number[] = [];
  job: Job | null = null;
  constructor(id: number, session: Session) {
    this.id = id;
    this.session = session;
  }
}

/**
 * Counters the metrics endpoint reports. A step's time is shared between its prompt rows
 * (prefillMs) and its decode rows (decodeMs) in proportion to their numbers, so prompt tokens over
 * prefillMs and decode rows over decodeMs are each the rate of their rows within the steps.
 */
export interface SchedulerCounters {
  promptTokens: number;
  cachedTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** Forward steps completed (one pass each, prompt and decode rows together); failed ones are failedSteps. */
  steps: number;
  /** Steps with decode rows, and those rows (rows / steps = mean decode batch). */
  decodeSteps: number;
  decodeRows: number;
  failedSteps: number;
}

/** One slot's rows in a step: its pending token (decode), or a chunk of its prompt. */
interface StepPart {
  slot: Slot;
  job: Job;
  tokens: number[];
  prefill: boolean;
}

export class Scheduler {
  readonly lm: LanguageModel;
  readonly options: SchedulerOptions;
  readonly counters: SchedulerCounters = {
    promptTokens: 0,
    cachedTokens: 0,
    generatedTokens: 0,
    prefillMs: 0,
    decodeMs: 0,
    steps: 0,
    decodeSteps: 0,
    decodeRows: 0,
    failedSteps: 0,
  };
  /** Bytes of the KV caches (allocated at start). */
  readonly kvBytes: number;
  private readonly slots: Slot[];
  private readonly queue: Job[] = [];
  private readonly batch: BatchState;
  /** The prefilling slot of this id or the next one up (wrapping) starts the next step's prompt rows. */
  private nextPrefill = 0;
  private running = false;
  private wake: (() => void) | null = null;
  private idleWaiters: (() => void)[] = [];

  constructor(lm: LanguageModel, options: SchedulerOptions) {
    this.lm = lm;
    this.options = options;
    const c = lm.config;
    const caches = Array.from(
      { length: c.nLayers },
      () =>
        new KVCache({
          nKvHeads: c.nKvHeads,
          headDim: c.headDim,
          capacity: options.context,
          batch: options.parallel,
          dtype: options.kvDType,
          layout: options.kvLayout,
        }),
    );
    this.kvBytes = caches.reduce((sum, cache) => sum + cache.byteLength, 0);
    // One run state for the steps: a decode row per slot and the step's prompt budget. Each slot is
    // at most one part of a step, so the logits take `parallel` rows.
    const state = new RunState(c, options.prefillChunk + options.parallel);
    this.batch = new BatchState(state, options.parallel);
    const attention = lm.resolveAttention(options.context);
    this.slots = Array.from({ length: options.parallel }, (_, s) => {
      const session = new Session(lm.engine, lm.model, {
        capacity: options.context,
        attention,
        productPath: lm.productPath,
        state,
        caches: caches.map((cache) => cache.view(s, 0, c.nKvHeads)),
      });
      return new Slot(s, session);
    });
  }

  get queueLength(): number {
    return this.queue.length;
  }

  get busySlots(): number {
    return this.slots.filter((s) => s.job !== null).length;
  }

  /** KV bytes holding positions now (filled positions of all slots, cached prefixes included). */
  get kvBytesInUse(): number {
    const filled = this.slots.reduce((sum, s) => sum + s.session.pos, 0);
    return (this.kvBytes * filled) / (this.options.parallel * this.options.context);
  }

  /** Queues a job (QueueFullError when the queue is full) and starts the loop if it sleeps. */
  submit(spec: JobSpec, events: JobEvents): Job {
    // Jobs queued since the last step take the free slots first; past those, the queue's bound.
    const free = this.slots.filter((s) => s.job === null).length;
    if (this.queue.length >= free + this.options.queue)
      throw new QueueFullError(
        `the queue holds ${this.options.queue} requests and all ${this.options.parallel} slots are busy`,
      );
    const job = new Job(spec, events, this.lm.config.vocabSize);
    this.queue.push(job);
    this.kick();
    return job;
  }

  /** Ends a job now (client gone, timeout): out of the queue, or its slot freed. Reports nothing. */
  cancel(job: Job): void {
    if (job.ended) return;
    job.ended = true;
    const i = this.queue.indexOf(job);
    if (i >= 0) this.queue.splice(i, 1);
    if (job.slot) job.slot.job = null;
    this.kick();
  }

  /** Resolves when no job is queued or running. */
  idle(): Promise<void> {
    if (this.queue.length === 0 && this.busySlots === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private kick(): void {
    if (!this.running) {
      // Started on the next turn: a caller finishes its own set-up before any step reports to it.
      this.running = true;
      setImmediate(() => void this.loop());
    } else if (this.wake) {
      this.wake();
      this.wake = null;
    }
  }

  private async loop(): Promise<void> {
    for (;;) {
      this.admit();
      if (this.busySlots === 0) {
        for (const resolve of this.idleWaiters.splice(0)) resolve();
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      this.step();
      // Between steps: HTTP, disconnects and timers run.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Moves queued jobs to free slots, each to the one whose cache shares the longest prefix with its prompt. */
  private admit(): void {
    while (this.queue.length > 0) {
      const free = this.slots.filter((s) => s.job === null);
      if (free.length === 0) return;
      const job = this.queue.shift()!;
      const prompt = job.spec.prompt;
      let best = free[0];
      let bestShared = -1;
      for (const s of free) {
        const shared = commonPrefix(s.tokens, prompt);
        if (shared > bestShared) [best, bestShared] = [s, shared];
      }
      // The last prompt token is forwarded again even when cached: its logits give the first token.
      const keep = Math.min(bestShared, prompt.length - 1);
      const session = best.session;
      if (keep === 0) session.reset();
      else if (keep < best.tokens.length) session.truncate(keep);
      best.tokens.length = keep;
      session.setAttention(job.spec.attention);
      job.slot = best;
      job.cachedTokens = keep;
      best.job = job;
      this.counters.cachedTokens += keep;
    }
  }

  /**
   * One forward pass: every decoding slot's pending token, then chunks of the prefilling slots'
   * prompts, in turn from the slot after the last step's first, until the step's prompt budget
   * (prefillChunk tokens) is spent.
   */
  private step(): void {
    const parts: StepPart[] = [];
    const prefilling: Slot[] = [];
    for (const slot of this.slots) {
      const job = slot.job;
      if (job === null) continue;
      if (job.pending !== null) parts.push({ slot, job, tokens: [job.pending], prefill: false });
      else prefilling.push(slot);
    }
    if (prefilling.length > 0) {
      const next = prefilling.findIndex((s) => s.id >= this.nextPrefill);
      const first = next < 0 ? 0 : next;
      this.nextPrefill = prefilling[first].id + 1;
      let budget = this.options.prefillChunk;
      for (let i = 0; i < prefilling.length && budget > 0; i++) {
        const slot = prefilling[(first + i) % prefilling.length];
        const done = slot.tokens.length;
        const tokens = slot.job!.spec.prompt.slice(done, done + budget);
        budget -= tokens.length;
        parts.push({ slot, job: slot.job!, tokens, prefill: true });
      }
    }
    this.guard(parts, () => this.forward(parts));
  }

  /** Runs a step; if it throws, its jobs fail and their slots are emptied (the sessions rolled back). */
  private guard(parts: StepPart[], run: () => void): void {
    try {
      run();
    } catch (error) {
      this.counters.failedSteps++;
      for (const { slot, job } of parts) {
        slot.session.reset();
        slot.tokens.length = 0;
        this.end(job);
        job.events.onError(error instanceof Error ? error : new Error(String(error)));
      }
    }
  }

  /** Forwards the step's parts as one pass; samples for the decode parts and for prompts now complete. */
  private forward(parts: StepPart[]): void {
    const t0 = performance.now();
    const logits = Session.forwardBatch(
      parts.map(({ slot, tokens, prefill }) => ({ session: slot.session, tokens, prefill })),
      this.batch,
    );
    const ms = performance.now() - t0;
    const decodeRows = parts.filter((p) => !p.prefill).length;
    const promptRows = parts.reduce((sum, p) => sum + (p.prefill ? p.tokens.length : 0), 0);
    const c = this.counters;
    c.steps++;
    c.prefillMs += (ms * promptRows) / (promptRows + decodeRows);
    c.decodeMs += (ms * decodeRows) / (promptRows + decodeRows);
    c.promptTokens += promptRows;
    c.decodeRows += decodeRows;
    if (decodeRows > 0) c.decodeSteps++;
    parts.forEach(({ slot, job, tokens, prefill }, i) => {
      slot.tokens.push(...tokens);
      // A job another job's callback cancelled meanwhile samples nothing (its slot is free).
      if (job.ended) return;
      if (!prefill || slot.tokens.length === job.spec.prompt.length) this.sample(slot, job, logits[i]);
    });
  }

  /** Samples the job's next token from `logits` and reports its text; ends the job when a limit is reached. */
  private sample(slot: Slot, job: Job, logits: Float32Array): void {
    const tokenizer = this.lm.tokenizer;
    const next = job.sampler.sample(logits);
    if (!job.spec.ignoreEos && stops(tokenizer, next, this.options.stopRule)) return this.finish(job, 'stop');
    job.generated++;
    this.counters.generatedTokens++;
    job.stream ??= new TextStream(tokenizer, job.spec.prompt[job.spec.prompt.length - 1]);
    const { text, stopped } = job.stopFilter.push(job.stream.push(next));
    if (text) job.events.onText(text);
    if (stopped) return this.finish(job, 'stop', false);
    // The next token must fit the slot's context to be forwarded.
    if (job.generated >= job.spec.maxTokens || slot.session.pos >= this.options.context)
      return this.finish(job, 'length');
    job.pending = next;
  }

  /** Flushes held-back text (unless a stop string ended it), frees the slot and reports the result. */
  private finish(job: Job, reason: FinishReason, flush = true): void {
    if (flush) {
      const flushed = job.stopFilter.push(job.stream?.flush() ?? '');
      const tail = flushed.stopped ? flushed.text : flushed.text + job.stopFilter.flush();
      if (flushed.stopped) reason = 'stop';
      if (tail) job.events.onText(tail);
    }
    this.end(job);
    job.events.onDone({
      finishReason: reason,
      promptTokens: job.spec.prompt.length,
      completionTokens: job.generated,
      cachedTokens: job.cachedTokens,
    });
  }

  private end(job: Job): void {
    job.ended = true;
    job.pending = null;
    if (job.slot) job.slot.job = null;
  }
}

/** Length of the common prefix of a and b. */
function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
