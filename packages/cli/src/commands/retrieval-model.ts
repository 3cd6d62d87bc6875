/**
 * `sparq retrieval-model`: writes the hand-built n-gram induction model (packages/llm/src/retrieval-model.ts,
 * docs/retrieval-model.md) as an ordinary llama GGUF with the stories260K tokenizer embedded.
 */
import { existsSync } from 'node:fs';
import {
  gguf,
  ggufTensors,
  llamaMetadata,
  readTokenizerFile,
  retrievalModel,
  writeGGUFFile,
  MAX_NGRAM,
  MIN_NGRAM,
} from '@sparq/llm';
import { selectBackend } from '@sparq/core';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { isInt, number, parseFlags } from '../flags.ts';
import { sharedPath } from '../shared-path.ts';

export const retrievalModelCommand: Command = {
  name: 'retrieval-model',
  summary: 'write a hand-built retrieval model (an n-gram induction circuit, weights set by construction) as GGUF',
  usage: `sparq retrieval-model --out FILE [--ngram N] [--ctx N] [--tokenizer FILE]

Writes a 2-layer llama model (head dim 128, 2 KV heads, F32) whose greedy decoding
continues any n-gram seen once before with the token that followed it: after
"... The pass key is 71432. ... The pass key is" it continues " 71432".
docs/retrieval-model.md explains every weight.

  --ngram N      tokens matched, ${MIN_NGRAM}..${MAX_NGRAM} (default 4)
  --ctx N        context length: the file's context_length, and the RoPE base is
                 chosen so that the match holds over it (default 131072)
  --tokenizer F  llama2.c tokenizer (default ../shared/models/tok512.bin, 512 tokens)`,
  async run(argv) {
    const values = parseFlags(argv, {
      out: { type: 'string' },
      ngram: { type: 'string' },
      ctx: { type: 'string' },
      tokenizer: { type: 'string' },
    });
    if (!values.out) throw new UsageError('--out FILE is required');
    const ngram = number(
      'ngram',
      values.ngram,
      4,
      isInt(MIN_NGRAM, MAX_NGRAM),
      `an integer in [${MIN_NGRAM}, ${MAX_NGRAM}]`,
    );
    const ctx = number('ctx', values.ctx, 131072, isInt(16, 1 << 24), `an integer in [16, ${1 << 24}]`);
    const tokenizerPath = values.tokenizer ?? sharedPath('models/tok512.bin');
    if (!existsSync(tokenizerPath))
      throw new UsageError(
        `--tokenizer ${tokenizerPath}: no such file${values.tokenizer ? '' : ' (the default; give the flag)'}`,
      );
    const tokenizer = readTokenizerFile(tokenizerPath);
    const { loaded, design } = retrievalModel({ ngram, ctx, vocabSize: tokenizer.vocabSize });
    const { tensors } = ggufTensors(await selectBackend({ backend: 'reference' }), loaded, 'f32');
    const metadata = llamaMetadata(loaded.config, tokenizer, { name: `sparq-retrieval-${ngram}gram`, fileType: 'f32' });
    metadata.push(['sparq.retrieval.ngram', gguf.u32(ngram)]);
    const size = writeGGUFFile(values.out, metadata, tensors);
    process.stderr.write(
      `wrote ${values.out}: ${size} bytes; ${ngram}-gram induction, dim ${design.dim}, code dims ${design.m}, RoPE base ${design.ropeBase.toExponential(3)}, context ${ctx}\n`,
    );
    return 0;
  },
};
