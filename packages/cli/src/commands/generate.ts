/**
 * `sparq generate`: text from a llama2.c or GGUF model, streamed to stdout
 * token by token exactly as llama2.c's run prints it (the prompt echoed, no
 * trailing newline); a summary on stderr: speeds, attention elements read per
 * token (the kernels' count), SPEC 3's compression ratio, backend and kernel.
 */
import { selectBackend, type AttentionMethod, type Int4Path, type KVDType } from '@sparq/core';
import { ATTENTION_METHODS, WEIGHT_TYPES, buildModel, defaultAttention, describeConfig, findTokenizer, generate, readModelFile, type WeightType } from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { choice, isInt, number, parseFlags } from '../flags.ts';

const USAGE = `sparq generate --model FILE [--tokenizer FILE] [--prompt TEXT] [-n N]
                [--temperature T] [--top-p P] [--seed S]
                [--attention dense|sparq|h2o|lminf|oracle] [--r R] [--k K] [--l L] [--no-reallocate]
                [--weights f32|q4_0|int4] [--int4-path dequant|int8] [--kv f32|f16]

Generates text as llama2.c's run does: -n counts positions including BOS (default
256; 0 or more than the model's seq_len means seq_len), the prompt is echoed, and
sampling BOS ends the text. stdout holds the text only, no trailing newline.

  --model FILE        llama2.c checkpoint (.bin) or GGUF v3 llama model
  --tokenizer FILE    llama2.c tokenizer; default: the GGUF's own, else tok<vocab>.bin
                      or tokenizer.bin next to the model
  --prompt TEXT       default empty (BOS only)
  --temperature T     default 1.0; 0 = greedy
  --top-p P           nucleus sampling, default 0.9 (<= 0 or >= 1: full distribution)
  --seed S            xorshift seed as in run.c; default (or 0): the time in seconds
  --attention METHOD  decode attention, default dense; prefill is always dense
  --r R               SparQ query components, default ceil(head_dim / 4)
  --k K               positions kept (sparq, oracle, h2o, lminf), default max(16, floor(ctx / 8))
                      where ctx = the positions of the run (-n)
  --l L               SparQ local window, default floor(k / 4)
  --no-reallocate     SparQ without the mean-value interpolation
  --weights TYPE      convert matrices on load: f32, q4_0 (ggml) or int4 (group 32);
                      default: as the file stores them
  --int4-path PATH    INT4 products: dequant (default) or int8
  --kv TYPE           KV cache element type, f32 (default) or f16

SPARQ_BACKEND=reference|native forces a backend.`;

export const generateCommand: Command = {
  name: 'generate',
  summary: 'generate text from a llama2.c or GGUF model with dense, SparQ or baseline attention',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      model: { type: 'string' }, tokenizer: { type: 'string' }, prompt: { type: 'string' }, n: { type: 'string', short: 'n' },
      temperature: { type: 'string' }, 'top-p': { type: 'string' }, seed: { type: 'string' }, attention: { type: 'string' },
      r: { type: 'string' }, k: { type: 'string' }, l: { type: 'string' }, 'no-reallocate': { type: 'boolean' },
      weights: { type: 'string' }, 'int4-path': { type: 'string' }, kv: { type: 'string' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    const steps = number('n', values.n, 256, isInt(0), 'an integer >= 0');
    const temperature = number('temperature', values.temperature, 1, (t) => Number.isFinite(t) && t >= 0, 'a number >= 0');
    const topp = number('top-p', values['top-p'], 0.9, (p) => Number.isFinite(p), 'a number (0..1)');
    if (values.seed !== undefined && !/^\d+$/.test(values.seed)) throw new UsageError(`--seed ${values.seed}, expected an integer >= 0`);
    const seedGiven = values.seed !== undefined && BigInt(values.seed) > 0n;
    const seed = seedGiven ? BigInt.asUintN(64, BigInt(values.seed!)) : BigInt(Math.floor(Date.now() / 1000));
    const method = choice<AttentionMethod>('attention', values.attention, ATTENTION_METHODS, 'dense');
    const weights = values.weights === undefined ? undefined : choice<WeightType>('weights', values.weights, WEIGHT_TYPES, 'f32');
    const int4Path = choice<Int4Path>('int4-path', values['int4-path'], ['dequant', 'int8'], 'dequant');
    const kvDType = choice<KVDType>('kv', values.kv, ['f32', 'f16'], 'f32');

    const engine = await selectBackend();
    const file = readModelFile(values.model, engine);
    const c = file.loaded.config;
    const { tokenizer, source } = findTokenizer(file, values.tokenizer);
    const context = steps <= 0 || steps > c.seqLen ? c.seqLen : steps;
    const defaults = defaultAttention(method, c.headDim, context);
    const attention = {
      method,
      r: number('r', values.r, defaults.r, isInt(1, c.headDim), `an integer in [1, ${c.headDim}] (the head dim)`),
      k: number('k', values.k, defaults.k, isInt(1), 'an integer >= 1'),
      l: 0,
      reallocate: !values['no-reallocate'],
    };
    attention.l = number('l', values.l, Math.floor(attention.k / 4), isInt(0), 'an integer >= 0');
    const model = buildModel(engine, file.loaded, weights);

    // A closed pipe (`| head`) ends the output quietly, as it would for run.c.
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
      process.exit(0);
    });
    const result = generate(engine, model, tokenizer, values.prompt ?? '', {
      steps, temperature, topp, seed, attention, kvDType, int4Path,
      onPiece: (bytes) => process.stdout.write(bytes),
    });

    const { session } = result;
    const info = engine.info();
    const perToken = session.decodeSteps ? session.stats.total / session.decodeSteps : 0;
    const ratio = session.denseCost ? session.methodCost / session.denseCost : 1;
    const counted = session.denseCost ? session.stats.total / session.denseCost : 0;
    const params = method === 'dense' ? '' : method === 'sparq' ? ` r=${attention.r} k=${attention.k} l=${attention.l}${attention.reallocate ? '' : ' no-reallocate'}` : ` k=${attention.k}`;
    const rate = (n: number, ms: number) => (ms > 0 ? (n / (ms / 1000)).toFixed(1) : 'inf');
    const lines = [
      `model ${values.model}: ${file.loaded.format}; ${describeConfig(c)}`,
      `weights ${model.weightType}${model.notes.length ? `; ${model.notes.join('; ')}` : ''}; tokenizer ${source}; KV ${kvDType}`,
      `sampling ${temperature === 0 ? 'greedy' : `temperature ${temperature}, top-p ${topp}, seed ${seed}`}`,
      `prefill ${result.promptTokens} tokens: ${rate(result.promptTokens, result.prefillMs)} tok/s; decode ${session.decodeSteps} tokens: ${rate(session.decodeSteps, result.decodeMs)} tok/s`,
      `attention ${method}${params}: ${perToken.toFixed(0)} elements read per token (kernel count, all layers); compression ratio vs dense ${ratio.toFixed(4)} (SPEC 3 formula), counted / dense formula ${counted.toFixed(4)}`,
      `backend ${info.name} (kernel ${info.kernel}, ${info.threads} thread${info.threads === 1 ? '' : 's'})`,
    ];
    process.stderr.write(`\n${lines.join('\n')}\n`);
    return 0;
  },
};
