/**
 * `sparq chat`: a multi-turn conversation with a GGUF model through its own
 * chat template. Each line of stdin is a user turn (a terminal gets a "> "
 * prompt; piped input works the same); the reply streams to stdout, ended by
 * a newline. One KV cache holds the conversation, so each turn prefills only
 * its own tokens; a per-turn summary goes to stderr.
 */
import { createInterface } from 'node:readline';
import { selectBackend } from '@sparq/core';
import {
  Chat,
  ChatTemplate,
  buildModel,
  chatTemplateSource,
  checkTensors,
  describeConfig,
  findTokenizer,
  readModelFile,
  readTextFile,
} from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { isInt, number, parseFlags } from '../flags.ts';
import {
  RUN_FLAGS,
  attention as attentionFlags,
  contextFlag,
  describeAttention,
  runUsage,
  sampling,
  storage,
} from '../run-flags.ts';

const USAGE = `sparq chat --model FILE [--system TEXT] [--template FILE] [--max-tokens N] [--ctx N]
           [--temperature T] [--top-p P] [--seed S]
           [--attention dense|sparq|h2o|lminf|oracle] [--r R] [--k K] [--l L] [--no-reallocate]
           [--weights f32|q4_0|int4] [--product int8|dequant] [--kv TYPE|K/V] [--kv-layout k-twice|single-k]

Chats with a GGUF model: each stdin line is a user turn, each reply is printed on
stdout as it is sampled, then a newline. The conversation is rendered with the
model's tokenizer.chat_template (Jinja) and kept in one KV cache: a turn prefills
only its new tokens. A reply ends at an end-of-generation token, --max-tokens, or
a full context. Ctrl-D (end of input) ends the chat.

  --system TEXT       a system message first in the conversation
  --template FILE     a Jinja chat template to use instead of the model's
  --max-tokens N      most tokens per reply (default: no limit but the context)
${runUsage(0.8)}

SPARQ_BACKEND=reference|native forces a backend.`;

export const chatCommand: Command = {
  name: 'chat',
  summary: 'chat with a GGUF model through its chat template (multi-turn, one KV cache)',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      ...RUN_FLAGS,
      system: { type: 'string' },
      template: { type: 'string' },
      'max-tokens': { type: 'string' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    const maxReplyTokens =
      values['max-tokens'] === undefined
        ? undefined
        : number('max-tokens', values['max-tokens'], 0, isInt(1), 'an integer >= 1');
    const { temperature, topP, seed } = sampling(values, 0.8);
    const { weights, productPath, kv, kt, kvLayout, checkTensors: check } = storage(values);

    const engine = await selectBackend();
    const file = readModelFile(values.model, engine);
    const c = file.loaded.config;
    const { tokenizer } = findTokenizer(file, values.tokenizer);
    const source =
      values.template !== undefined ? readTextFile(values.template) : file.gguf && chatTemplateSource(file.gguf);
    if (!source) throw new UsageError(`${values.model} has no tokenizer.chat_template; pass --template FILE`);
    const context = contextFlag(values, c.seqLen);
    const attention = attentionFlags(values, c.headDim, context);
    if (check) checkTensors(engine, file.loaded);
    const model = buildModel(engine, file.loaded, weights);
    const chat = new Chat(engine, model, tokenizer, new ChatTemplate(source, tokenizer), {
      attention,
      contextSize: context,
      maxReplyTokens,
      system: values.system,
      temperature,
      topP,
      seed,
      kv,
      kt,
      kvLayout,
      productPath,
    });
    process.stderr.write(
      `model ${values.model}: ${file.loaded.format}; ${describeConfig(c)}\nweights ${model.weightType}; context ${context}; attention ${attention.method}${describeAttention(attention)}\n`,
    );

    const tty = process.stdin.isTTY === true;
    const lines = createInterface({ input: process.stdin, terminal: tty, prompt: '> ' });
    if (tty) lines.prompt();
    const rate = (n: number, ms: number) => (ms > 0 ? (n / (ms / 1000)).toFixed(1) : 'inf');
    for await (const line of lines) {
      if (line.trim() === '') {
        if (tty) lines.prompt();
        continue;
      }
      const reply = chat.send(line, (bytes) => process.stdout.write(bytes));
      process.stdout.write('\n');
      const again = reply.reprefilled ? ' (the template rewrote earlier turns: whole conversation prefilled)' : '';
      process.stderr.write(
        `[turn ${chat.messages.filter((m) => m.role === 'user').length}: prefill ${reply.prefilled} tokens${again}, ${rate(reply.prefilled, reply.prefillMs)} tok/s; ` +
          `reply ${reply.tokens.length} tokens, ${rate(reply.tokens.length, reply.decodeMs)} tok/s, ended by ${reply.finishReason}; context ${chat.session.pos}/${context}]\n`,
      );
      if (tty) lines.prompt();
    }
    return 0;
  },
};
