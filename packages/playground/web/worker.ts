/**
 * The engine's Web Worker: loads a model from bytes onto the reference backend,
 * generates as `sparq generate` does (the prompt echoed, then each piece as it
 * is sampled), and answers lessons about any recorded step. The page stays
 * responsive because all of this runs here.
 */
import { Engine, SparqError } from '@sparq/core';
import { ATTENTION_PARAMETERS, LanguageModel, clampSteps, decodeUtf8 } from '@sparq/llm/browser';
import { createReferenceBackend } from '@sparq/reference';
import { lesson } from './lesson.ts';
import { openModelBytes } from './model-bytes.ts';
import { ProbeEngine } from './probe.ts';
import type { FromWorker, RunSettings, ToWorker } from './protocol.ts';

interface Loaded {
  model: LanguageModel;
  probe: ProbeEngine;
  base: Engine;
}

let loaded: Loaded | null = null;
let last: {
  session: ReturnType<LanguageModel['createSession']>;
  attention: ReturnType<LanguageModel['resolveAttention']>;
} | null = null;

const post = (message: FromWorker) => (self as unknown as { postMessage(m: FromWorker): void }).postMessage(message);

function load(model: ToWorker & { type: 'load' }): void {
  const started = performance.now();
  const base = new Engine(createReferenceBackend());
  const opened = openModelBytes(base, model.model, model.tokenizer);
  const probe = new ProbeEngine(base, opened.config.nLayers);
  // The same weights and tokenizer, on the engine that records queries; the KV type is the CLI's default, so the same settings give the same text.
  const language = new LanguageModel(probe, opened.model, opened.tokenizer, {
    tokenizerSource: opened.tokenizerSource,
  });
  loaded = { model: language, probe, base };
  last = null;
  const c = opened.config;
  post({
    type: 'loaded',
    ms: performance.now() - started,
    model: {
      description: `${model.model.name}: ${opened.model.format}, ${c.nLayers} layers, ${c.nHeads} heads (${c.nKvHeads} KV), head dim ${c.headDim}, vocab ${c.vocabSize}, context ${c.seqLen}; tokenizer ${opened.tokenizerSource}`,
      nLayers: c.nLayers,
      nHeads: c.nHeads,
      nKvHeads: c.nKvHeads,
      headDim: c.headDim,
      seqLen: c.seqLen,
    },
  });
}

async function generate(settings: RunSettings): Promise<void> {
  if (!loaded) throw new Error('playground: no model is loaded');
  const { model, probe } = loaded;
  probe.clear();
  // As `sparq generate`: the context is -n positions, budgets resolved against it.
  const contextSize = clampSteps(settings.n, model.config.seqLen);
  // Only the parameters the method reads (the form keeps r, k and l for every method).
  const given = { r: settings.r, k: settings.k, l: settings.l };
  const wanted = {
    method: settings.method,
    ...Object.fromEntries(ATTENTION_PARAMETERS[settings.method].map((p) => [p, given[p as keyof typeof given]])),
  };
  const tokens = model.tokenize(settings.prompt);
  if (tokens.length > contextSize)
    throw new SparqError(
      `the prompt is ${tokens.length} tokens (with BOS), more than the ${contextSize} positions of n`,
    );
  const session = model.createSession({ contextSize, attention: wanted });
  // Every layer's query at every prompt position, so that any recorded step can be inspected.
  session.forward.prefillAllRows = true;
  const attention = session.attention;
  post({ type: 'text', text: model.detokenize(tokens) });
  const generation = session.generate(tokens, {
    temperature: settings.temperature,
    topP: 0.9,
    seed: BigInt(settings.seed),
  });
  for await (const piece of generation) post({ type: 'text', text: piece });
  const result = generation.result!;
  last = { session, attention };
  const history = session.history;
  const t = model.tokenizer;
  post({
    type: 'done',
    run: {
      pieces: history.map((id, i) => (i === 0 ? '⟨s⟩' : decodeUtf8(t.decodePiece(history[i - 1], id)))),
      inspectable: [...probe.records[0].keys()].sort((a, b) => a - b),
      promptTokens: tokens.length,
      decodeTokensPerSecond: result.decodeTokensPerSecond,
      generatedTokens: result.generatedTokens,
      attention: { method: attention.method, r: attention.r, k: attention.k, l: attention.l },
    },
  });
}

function inspect(request: ToWorker & { type: 'inspect' }): void {
  if (!loaded || !last) throw new Error('playground: generate first, then pick a step');
  post({
    type: 'lesson',
    lesson: lesson({
      engine: loaded.base,
      caches: last.session.forward.caches,
      records: loaded.probe.records,
      attention: last.attention,
      nHeads: loaded.model.config.nHeads,
      position: request.position,
      layer: request.layer,
      head: request.head,
    }),
  });
}

// Messages are handled one at a time, in order.
let queue: Promise<void> = Promise.resolve();
self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  queue = queue.then(async () => {
    try {
      if (message.type === 'load') load(message);
      else if (message.type === 'generate') await generate(message.settings);
      else inspect(message);
    } catch (error) {
      post({ type: 'error', message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    }
  });
};
