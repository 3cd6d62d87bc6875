/**
 * `sparq tokenize`: the token ids of a text under a model's tokenizer. Reads
 * only the tokenizer, so a vocab-only GGUF (metadata, no tensors) works, as
 * with llama.cpp's llama-tokenize.
 */
import { readTextFile, readTokenizerOnly } from '@sparq/llm';
import { UsageError, type Command } from '../command.ts';
import { parseFlags } from '../flags.ts';

const USAGE = `sparq tokenize --model FILE [--tokenizer FILE] (--text TEXT | --file FILE) [--json] [--no-special] [--parse-special]

Prints the token ids of the text, space-separated on one line (a JSON array with
--json); the count and the tokenizer go to stderr.

  --model FILE      GGUF with a tokenizer (a vocab-only file is enough), a
                    llama2.c checkpoint (its tokenizer found as generate finds
                    it), or a llama2.c tokenizer file
  --tokenizer FILE  llama2.c tokenizer to use instead
  --text TEXT       the text
  --file FILE       the text from a file, read as UTF-8 (an invalid byte
                    sequence becomes U+FFFD)
  --json            print a JSON array
  --no-special      no BOS / EOS (by default they are added as the vocab says)
  --parse-special   special tokens written in the text ("<|begin_of_text|>")
                    become their ids; by default only user-defined tokens do`;

export const tokenizeCommand: Command = {
  name: 'tokenize',
  summary: "print the token ids of a text under a model's tokenizer (vocab-only GGUF files work)",
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      model: { type: 'string' },
      tokenizer: { type: 'string' },
      text: { type: 'string' },
      file: { type: 'string' },
      json: { type: 'boolean' },
      'no-special': { type: 'boolean' },
      'parse-special': { type: 'boolean' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    if ((values.text === undefined) === (values.file === undefined))
      throw new UsageError('give exactly one of --text TEXT and --file FILE');
    const text = values.text ?? readTextFile(values.file!);
    const { tokenizer, source } = readTokenizerOnly(values.model, values.tokenizer);
    const ids = tokenizer.encode(text, {
      addSpecial: !values['no-special'],
      parseSpecial: values['parse-special'] ?? false,
    });
    process.stdout.write(values.json ? `${JSON.stringify(ids)}\n` : `${ids.join(' ')}\n`);
    process.stderr.write(`${ids.length} tokens; tokenizer ${source}\n`);
    return 0;
  },
};
