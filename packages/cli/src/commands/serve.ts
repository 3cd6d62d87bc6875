/**
 * `sparq serve`: an OpenAI-compatible HTTP server for one model (serve/server.ts), with
 * --parallel slots decoded as one batch per step (serve/scheduler.ts). It prints
 * "sparq serve: listening on URL" on stdout once it accepts requests; Ctrl-C (SIGINT or SIGTERM)
 * stops taking requests, finishes those it has, and exits 0; a second Ctrl-C exits at once (130).
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { kvLabel, selectBackend } from '@sparq/core';
import {
  ChatTemplate,
  DEFAULT_PRODUCT_PATH,
  LanguageModel,
  chatTemplateSource,
  describeConfig,
  openModel,
  readModelHeader,
  repackModel,
  stopRuleOf,
} from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { choice, isInt, number, parseFlags } from '../flags.ts';
import {
  RUN_FLAGS,
  attention as attentionFlags,
  attentionSettings,
  contextFlag,
  describeAttention,
  storage,
} from '../run-flags.ts';
import { startServer, type ServeOptions } from '../serve/server.ts';

/**
 * The chat template of a model that has none (llama2.c files, base models): the messages' text,
 * one per line, for the model to continue; nothing marks the roles.
 */
export const PLAIN_TEMPLATE =
  "{% for message in messages %}{{ message['content'] }}{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}";

const USAGE = `sparq serve --model FILE [--host ADDR] [--port N] [--parallel N] [--ctx N] [--queue N]
            [--timeout S] [--body-timeout S] [--max-body BYTES] [--prefill-chunk N]
            [--name NAME] [--template FILE] [--tokenizer FILE]
            [--attention dense|sparq|oracle|lminf] [--r R] [--k K] [--l L] [--no-reallocate]
            [--weights f32|q4_0|int4] [--product int8|dequant] [--kv TYPE|K/V] [--kv-layout k-twice|single-k]

Serves the OpenAI API for one model: POST /v1/chat/completions and /v1/completions (whole,
or streamed as server-sent events with "stream": true), GET /v1/models, /health and
/metrics (Prometheus text). Requests may set sparq's decode attention per request with
the extra fields attention, r, k, l. See docs/serve.md.

  --host ADDR         address to listen on, default 127.0.0.1 (this machine only)
  --port N            default 8080; 0 picks a free port (the URL is printed)
  --parallel N        slots: requests decoded together, one forward pass per step (default 1);
                      each has its own KV cache of --ctx positions, allocated at start
  --ctx N             positions per slot: prompt and reply (default: the model's, at most 2048)
  --queue N           requests waiting for a slot, at most (default 64); past it 429 + Retry-After
  --timeout S         a request's whole time, queue included, in seconds (default 600); past it 504
  --body-timeout S    time to receive a request body, seconds (default 10); past it 408
  --max-body BYTES    largest request body (default 1048576); larger gets 413
  --prefill-chunk N   prompt tokens one step forwards, all slots together (default 64), besides
                      one decode token per decoding slot: prompts that arrive together are
                      prefilled in the same steps, and a long one advances at most N tokens per
                      step while the other slots keep decoding
  --name NAME         the model's name in responses and /v1/models (default: the file's name)
  --template FILE     a Jinja chat template instead of the model's; a model without one gets the
                      messages' text one per line
  --attention ...     the default decode attention of requests (dense; h2o is not served)
  the other flags as for sparq generate.

SPARQ_BACKEND=reference|native forces a backend.`;

export const serveCommand: Command = {
  name: 'serve',
  summary: 'an OpenAI-compatible HTTP server: parallel batched decoding, prompt cache, /health, /metrics',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      ...RUN_FLAGS,
      host: { type: 'string' },
      port: { type: 'string' },
      parallel: { type: 'string' },
      queue: { type: 'string' },
      timeout: { type: 'string' },
      'body-timeout': { type: 'string' },
      'max-body': { type: 'string' },
      'prefill-chunk': { type: 'string' },
      name: { type: 'string' },
      template: { type: 'string' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    for (const flag of ['temperature', 'top-p', 'seed'] as const)
      if (values[flag] !== undefined)
        throw new UsageError(
          `--${flag}: sampling is per request in sparq serve (the request's ${flag.replace('-', '_')})`,
        );
    const parallel = number('parallel', values.parallel, 1, isInt(1, 256), 'an integer in [1, 256]');
    const port = number('port', values.port, 8080, isInt(0, 65535), 'an integer in [0, 65535]');
    const queue = number('queue', values.queue, 64, isInt(0), 'an integer >= 0');
    const timeout = number(
      'timeout',
      values.timeout,
      600,
      (t) => Number.isFinite(t) && t > 0,
      'a number of seconds > 0',
    );
    const bodyTimeout = number(
      'body-timeout',
      values['body-timeout'],
      10,
      (t) => Number.isFinite(t) && t > 0,
      'a number of seconds > 0',
    );
    const maxBody = number('max-body', values['max-body'], 1 << 20, isInt(1), 'an integer >= 1');
    const prefillChunk = number(
      'prefill-chunk',
      values['prefill-chunk'],
      64,
      isInt(1, 4096),
      'an integer in [1, 4096]',
    );
    choice('attention', values.attention, ['dense', 'sparq', 'oracle', 'lminf'], 'dense');
    const { weights, productPath, kv: kvDType, kvLayout, checkTensors } = storage(values);

    const engine = await selectBackend();
    const fallback = process.env.SPARQ_BACKEND ? undefined : await selectBackend({ backend: 'reference' });
    const loaded = openModel(engine, values.model, {
      tokenizer: values.tokenizer,
      weights,
      kv: kvDType,
      kvLayout,
      productPath,
      fallback,
      checkTensors,
    });
    const c = loaded.config;
    const context = contextFlag(values, c.seqLen);
    const attention = attentionFlags(values, c.headDim, context);
    // The same model with the flags' attention as every request's default.
    const lm = new LanguageModel(loaded.engine, loaded.model, loaded.tokenizer, {
      kv: kvDType,
      kvLayout,
      attention: attentionSettings(values),
      productPath,
      tokenizerSource: loaded.tokenizerSource,
    });
    const served = {
      lm,
      template: new ChatTemplate(templateSource(values.model, values.template), lm.tokenizer),
      context,
      name: values.name ?? basename(values.model),
    };
    const options: ServeOptions = {
      host: values.host ?? '127.0.0.1',
      port,
      parallel,
      context,
      queue,
      prefillChunk,
      timeoutMs: timeout * 1000,
      bodyTimeoutMs: bodyTimeout * 1000,
      maxBodyBytes: maxBody,
      kvDType,
      kvLayout: kvLayout ?? (attention.method === 'sparq' ? 'k-twice' : 'single-k'),
      stopRule: stopRuleOf(lm.model.format),
    };
    // Several slots decode as rows of one product, which reads the weights' repacked copies: made
    // here, so that memory is fixed from the start and no request waits for them.
    const t0 = performance.now();
    const repacked =
      parallel > 1 && (productPath ?? DEFAULT_PRODUCT_PATH) === 'int8' ? repackModel(lm.engine, lm.model) : 0;
    const running = await startServer(served, options);
    const info = engine.info();
    process.stderr.write(
      `model ${values.model}: ${lm.model.format}; ${describeConfig(c)}; weights ${lm.weightType}` +
        (repacked > 0
          ? `; ${(repacked / 2 ** 20).toFixed(1)} MiB repacked for batched products in ${((performance.now() - t0) / 1000).toFixed(1)} s`
          : '') +
        `\n` +
        `${parallel} slot${parallel === 1 ? '' : 's'} x ${context} positions, KV ${kvLabel(kvDType)} ${options.kvLayout} ${(running.scheduler.kvBytes / 2 ** 20).toFixed(1)} MiB; ` +
        `attention ${attention.method}${describeAttention(attention)}; backend ${info.name} (${info.threads} thread${info.threads === 1 ? '' : 's'})\n`,
    );
    process.stdout.write(`sparq serve: listening on ${running.url}\n`);

    // The first signal drains; a second one exits at once.
    await new Promise<void>((resolve) => {
      const stop = (signal: string) => {
        process.stderr.write(
          `sparq serve: ${signal}: finishing ${running.scheduler.busySlots + running.scheduler.queueLength} request(s), then exiting (again to exit now)\n`,
        );
        const now = () => process.exit(130);
        process.once('SIGINT', now);
        process.once('SIGTERM', now);
        void running.drain().then(resolve);
      };
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    });
    process.stderr.write('sparq serve: stopped\n');
    return 0;
  },
};

/** The chat template: --template FILE, else the GGUF's, else PLAIN_TEMPLATE. */
function templateSource(model: string, file: string | undefined): string {
  if (file !== undefined) return readFileSync(file, 'utf8');
  const header = readModelHeader(model);
  return ('gguf' in header ? chatTemplateSource(header.gguf) : null) ?? PLAIN_TEMPLATE;
}
