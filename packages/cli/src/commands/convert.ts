/**
 * `sparq convert`: a llama2.c checkpoint (or a GGUF model) to GGUF v3 with the
 * tokenizer embedded, matrices in one type, norms F32. Progress on stderr.
 */
import { isBlockDType, selectBackend, type Engine } from '@sparq/core';
import {
  GGUF_FILE_TYPES,
  findTokenizer,
  ggufTensors,
  llamaMetadata,
  readModelFile,
  writeGGUFFile,
  type GGUFFileType,
  type LoadedModel,
} from '@sparq/llm';
import { statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { choice, parseFlags } from '../flags.ts';
import { progress } from '../progress.ts';

export const convertCommand: Command = {
  name: 'convert',
  summary: 'convert a llama2.c checkpoint or GGUF model to GGUF v3 in any supported tensor type, with its tokenizer',
  usage: `sparq convert --model IN --out OUT.gguf [--type TYPE] [--tokenizer FILE]

  --type TYPE   ${GGUF_FILE_TYPES.join(', ')}

Writes GGUF v3 with llama.cpp's llama keys and tensor names and the tokenizer
embedded (tokenizer.ggml.*). Matrices get --type (default f32; quantized by the
selected backend, or by the reference backend when the selected one lacks the
type; byte-exact with ggml's reference quantizers); norms stay F32; a matrix
whose rows are not whole blocks of the type stays F32. The file is written to a
temporary name beside OUT and renamed only when complete, so a failure leaves
neither a partial file nor a damaged OUT. wq/wk keep llama2.c's adjacent-pair RoPE
layout, which is also llama.cpp's for llama; the file says so in
sparq.rope_layout = "adjacent". The tokenizer defaults to the input GGUF's own,
else tok<vocab>.bin or tokenizer.bin next to the model.`,
  async run(argv) {
    const values = parseFlags(argv, {
      model: { type: 'string' },
      out: { type: 'string' },
      type: { type: 'string' },
      tokenizer: { type: 'string' },
    });
    if (!values.model) throw new UsageError('--model FILE is required');
    if (!values.out) throw new UsageError('--out FILE is required');
    const type = choice<GGUFFileType>('type', values.type, GGUF_FILE_TYPES, 'f32');
    checkOutput(values.out);

    const file = readModelFile(values.model, await selectBackend({ backend: 'reference' }));
    const engine = await converter(file.loaded, type);
    const { tokenizer, source } = findTokenizer(file, values.tokenizer);
    process.stderr.write(`read ${values.model}: ${file.loaded.format}; tokenizer ${source}\n`);
    const bar = progress('convert', process.stderr);
    const { tensors, notes } = ggufTensors(engine, file.loaded, type, (done, total, name, dtype) =>
      bar.update(done, total, `${name} ${dtype}`),
    );
    bar.end();
    for (const note of notes) process.stderr.write(`note: ${note}\n`);
    const metadata = llamaMetadata(file.loaded.config, tokenizer, {
      name: basename(values.model).replace(/\.[^.]*$/, ''),
      fileType: type,
    });
    const size = writeGGUFFile(values.out, metadata, tensors);
    process.stderr.write(
      `wrote ${values.out}: ${size} bytes, ${tensors.length} tensors, ${metadata.length} metadata keys (backend ${engine.name})\n`,
    );
    return 0;
  },
};

/** Refuses an output the file cannot be written to before any tensor is converted: a missing folder, or a directory as the name. */
function checkOutput(out: string): void {
  const folder = dirname(resolve(out));
  const dir = statSync(folder, { throwIfNoEntry: false });
  if (!dir?.isDirectory())
    throw new Error(`--out ${out}: the folder ${folder} ${dir ? 'is not a directory' : 'does not exist'}`);
  if (statSync(out, { throwIfNoEntry: false })?.isDirectory())
    throw new Error(`--out ${out}: is a directory, expected a file name`);
}

/** The selected backend, or the reference one when the selected backend cannot read the model's block types or quantize to `type`. */
async function converter(loaded: LoadedModel, type: GGUFFileType): Promise<Engine> {
  const engine = await selectBackend();
  const needed = new Set([...loaded.tensors.values()].map((t) => t.dtype).filter((d) => isBlockDType(d)));
  if (isBlockDType(type)) needed.add(type);
  const lacking = [...needed].filter((d) => !engine.has(d === type ? 'quantize' : 'dequantize', d));
  if (lacking.length === 0) return engine;
  process.stderr.write(
    `note: backend ${engine.name} does not convert ${lacking.join(', ')}; using the reference backend\n`,
  );
  return selectBackend({ backend: 'reference' });
}
