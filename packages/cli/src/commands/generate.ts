/**
 * `sparq generate`: text from a llama2.c or GGUF model, streamed to stdout
 * token by token as llama2.c's run prints it (the prompt echoed, no trailing
 * newline); a summary on stderr: speeds, attention elements read per token
 * (the kernels' count), spec.md §3's compression ratio, backend and kernel. It is
 * the library's TextSession with a context of -n positions; Ctrl-C aborts it
 * between two forward steps and still prints the summary (exit 130).
 */
import { SparqRangeError, kvLabel, selectBackend } from '@sparq/core';
import {
  DEFAULT_PREFILL_CHUNK,
  clampSteps,
  describeConfig,
  loadSessionState,
  openModel,
  readModelPlan,
  readTextFile,
  saveSessionState,
  type GenerationResult,
} from '@sparq/llm';
import { writeFileSync } from 'node:fs';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { isInt, number, parseFlags } from '../flags.ts';
import { PROGRESS_EVERY_MS, progress, rateNote } from '../progress.ts';
import {
  RUN_FLAGS,
  attention as attentionFlags,
  attentionSettings,
  contextFlag,
  describeAttention,
  runUsage,
  sampling,
  storage,
} from '../run-flags.ts';

/** Exit code of a run stopped by Ctrl-C (128 + SIGINT), as shells report it. */
const EXIT_INTERRUPTED = 130;

const USAGE = `sparq generate --model FILE [--tokenizer FILE] [--prompt TEXT | --prompt-file FILE] [-n N] [--ctx N]
                [--temperature T] [--top-p P] [--seed S] [--stop TEXT ...]
                [--attention dense|sparq|h2o|lminf|oracle] [--r R] [--k K] [--l L] [--no-reallocate]
                [--weights f32|q4_0|int4] [--product int8|dequant] [--kv TYPE|K/V] [--kv-layout k-twice|single-k]
                [--save-state FILE] [--load-state FILE] [--json] [--json-file FILE]

Generates text as llama2.c's run does: -n counts positions including BOS (default
256; 0 or more than the context means the context), the prompt is echoed, and
sampling BOS (or EOS) ends the text (GGUF models: an end-of-generation token, not
BOS, as in llama.cpp). stdout holds the text only, no trailing
newline; a lone byte token that is an ASCII control character is not printed
(run.c's rule), while byte tokens that form UTF-8 characters are. Ctrl-C stops
generation, prints the summary so far and exits with status 130.

${runUsage(1)}
  --prompt TEXT       default empty (BOS only)
  --prompt-file FILE  the prompt is the file's text (UTF-8), as is
  --stop TEXT         generation ends before TEXT is printed; repeat for several
  --load-state FILE   start from a session state saved by --save-state (same model and --kv):
                      the prompt continues that text (no BOS), and only the prompt is echoed
  --save-state FILE   after generating, save the session (tokens, KV cache) to FILE
  --json              the summary as one JSON object on stderr instead of text
  --json-file FILE    also write the summary as JSON to FILE

A prompt longer than ${DEFAULT_PREFILL_CHUNK} tokens is forwarded in chunks of ${DEFAULT_PREFILL_CHUNK}, with progress
on stderr (a bar on a terminal). SPARQ_BACKEND=reference|native forces a backend.`;

export const generateCommand: Command = {
  name: 'generate',
  summary: 'generate text from a llama2.c or GGUF model with dense, SparQ or baseline attention',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      ...RUN_FLAGS,
      prompt: { type: 'string' },
      'prompt-file': { type: 'string' },
      n: { type: 'string', short: 'n' },
      stop: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      'json-file': { type: 'string' },
      'save-state': { type: 'string' },
      'load-state': { type: 'string' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    if (values.prompt !== undefined && values['prompt-file'] !== undefined)
      throw new UsageError('--prompt and --prompt-file: give one of them');
    const steps = number('n', values.n, 256, isInt(0), 'an integer >= 0');
    const { temperature, topP, seed } = sampling(values, 1);
    const { weights, productPath, kv, kt, kvLayout, checkTensors } = storage(values);
    const prompt = values['prompt-file'] === undefined ? (values.prompt ?? '') : readTextFile(values['prompt-file']);

    const engine = await selectBackend();
    // A file in types the selected backend lacks runs on the reference backend, unless a backend was forced.
    const fallback = process.env.SPARQ_BACKEND ? undefined : await selectBackend({ backend: 'reference' });
    // The context from the file's header, so a context that does not fit is refused before the weights load.
    const header = readModelPlan(values.model, weights).config;
    const context = contextFlag(values, header.seqLen);
    const contextSize = clampSteps(steps, context);
    const wanted = attentionFlags(values, header.headDim, contextSize);
    const model = openModel(engine, values.model, {
      tokenizer: values.tokenizer,
      weights,
      kv,
      kt,
      kvLayout,
      productPath,
      fallback,
      checkTensors,
      contextSize,
      attention: { method: wanted.method },
    });
    const c = model.config;
    const attention = wanted;
    const method = attention.method;
    const session = model.createSession({ contextSize, attention: attentionSettings(values) });
    const loaded = values['load-state'];
    if (loaded !== undefined) loadSessionState(session, loaded);
    // A loaded state continues its text: the prompt gets no BOS.
    const tokens = model.tokenize(prompt, { bos: loaded === undefined });
    if (session.position + tokens.length > contextSize) {
      // Name the limit that binds: -n when it is below the context, else --ctx, else the model's trained context.
      const limit =
        contextSize < context
          ? `-n ${steps}`
          : values.ctx !== undefined
            ? `--ctx ${context}`
            : `the model's trained context (${c.seqLen})`;
      const what = loaded
        ? `${tokens.length} tokens after the ${session.position} loaded`
        : `${tokens.length} tokens (with BOS)`;
      throw new SparqRangeError(`generate: the prompt is ${what}, more than the ${contextSize} positions of ${limit}`);
    }

    const controller = new AbortController();
    const interrupt = () => controller.abort();
    // The first Ctrl-C stops between two forward steps; a second one (default handling) kills at once.
    process.once('SIGINT', interrupt);
    const bar = progress('prefill', process.stderr, { everyMs: PROGRESS_EVERY_MS });
    let result: GenerationResult;
    try {
      process.stdout.write(loaded === undefined ? model.detokenize(tokens) : prompt);
      // -n is a token limit as maxTokens is (the last sampled token is shown, not forwarded, as run.c does),
      // so a run it ends finishes with 'length', and one a full context ends with 'context'.
      const maxTokens = contextSize < context ? contextSize - session.position - tokens.length + 1 : undefined;
      const generation = session.generate(tokens, {
        temperature,
        topP,
        seed,
        maxTokens,
        stop: values.stop,
        signal: controller.signal,
        onProgress: (p) => {
          if (p.total > DEFAULT_PREFILL_CHUNK) bar.update(p.done, p.total, rateNote(p));
        },
      });
      for await (const piece of generation) {
        bar.end();
        process.stdout.write(piece);
      }
      result = generation.result!;
    } finally {
      bar.end();
      process.off('SIGINT', interrupt);
    }
    const interrupted = controller.signal.aborted;
    if (values['save-state'] !== undefined) saveSessionState(session, values['save-state']);

    const info = model.engine.info();
    const a = result.attention;
    const params = describeAttention(attention);
    const summary = {
      model: values.model,
      format: model.model.format,
      config: c,
      weights: model.weightType,
      notes: model.model.notes,
      tokenizer: model.tokenizerSource,
      kv,
      kt: session.forward.caches[0].kTDType,
      kvLayout: session.forward.caches[0].layout,
      kvBytes: session.forward.kvBytes,
      kvBytesPerPosition: session.forward.kvBytesPerPosition,
      sampling: { temperature, topP, seed: seed.toString() },
      backend: { name: info.name, kernel: info.kernel, threads: info.threads },
      ...result,
      text: undefined,
      attention: { ...attention, ...a },
      interrupted,
    };
    if (values['json-file']) writeFileSync(values['json-file'], JSON.stringify(summary, null, 2) + '\n');
    if (values.json) {
      process.stderr.write(`\n${JSON.stringify(summary)}\n`);
    } else {
      const rate = (n: number) => (n > 0 ? n.toFixed(1) : '-');
      const lines = [
        `model ${values.model}: ${model.model.format}; ${describeConfig(c)}`,
        `weights ${model.weightType}${model.model.notes.length ? `; ${model.model.notes.join('; ')}` : ''}; tokenizer ${model.tokenizerSource}; KV ${kvLabel(kv)} ${session.forward.caches[0].layout}${session.forward.caches[0].kTDType ? ` (K transposed ${session.forward.caches[0].kTDType})` : ''}, ${session.forward.kvBytes} bytes`,
        `sampling ${temperature === 0 ? 'greedy' : `temperature ${temperature}, top-p ${topP}, seed ${seed}`}`,
        `prefill ${result.promptTokens} tokens: ${rate(result.prefillTokensPerSecond)} tok/s; decode ${result.decodeSteps} tokens: ${rate(result.decodeTokensPerSecond)} tok/s`,
        `attention ${method}${params}: ${a.elementsPerToken.toFixed(0)} elements read per token (kernel count, all layers); compression ratio vs dense ${a.compressionRatio.toFixed(4)} (spec.md §3 formula), counted / dense formula ${a.countedRatio.toFixed(4)}`,
        `backend ${info.name} (kernel ${info.kernel}, ${info.threads} thread${info.threads === 1 ? '' : 's'})`,
        `finished: ${interrupted ? 'interrupted (Ctrl-C)' : FINISH[result.finishReason]}, ${result.generatedTokens} tokens generated`,
      ];
      process.stderr.write(`\n${lines.join('\n')}\n`);
    }
    return interrupted ? EXIT_INTERRUPTED : 0;
  },
};

const FINISH: Record<GenerationResult['finishReason'], string> = {
  eos: 'end of text',
  length: 'token limit (-n)',
  context: 'context full (--ctx)',
  stop: 'stop text',
  abort: 'aborted',
};
