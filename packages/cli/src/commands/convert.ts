/**
 * `sparq convert`: a llama2.c checkpoint (or a GGUF model) to GGUF v3 with the
 * tokenizer embedded, matrices in one type, norms F32. Progress on stderr.
 */
import { selectBackend } from '@sparq/core';
import { GGUF_FILE_TYPES, findTokenizer, ggufTensors, llamaMetadata, readModelFile, writeGGUFFile, type GGUFFileType } from '@sparq/llm';
import { basename } from 'node:path';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { choice, parseFlags } from '../flags.ts';

export const convertCommand: Command = {
  name: 'convert',
  summary: 'convert a llama2.c checkpoint to GGUF v3 (f32, f16, q4_0, q4_1, q8_0) with its tokenizer',
  usage: `sparq convert --model IN.bin --out OUT.gguf [--type f32|f16|q4_0|q4_1|q8_0] [--tokenizer FILE]

Writes GGUF v3 with llama.cpp's llama keys and tensor names and the tokenizer
embedded (tokenizer.ggml.*). Matrices get --type (default f32; quantized by the
selected backend, byte-exact with ggml); norms stay F32; a matrix whose rows are
not whole 32-element blocks stays F32. wq/wk keep llama2.c's adjacent-pair RoPE
layout, which is also llama.cpp's for llama; the file says so in
sparq.rope_layout = "adjacent". The tokenizer defaults to the input GGUF's own,
else tok<vocab>.bin or tokenizer.bin next to the model.`,
  async run(argv) {
    const values = parseFlags(argv, { model: { type: 'string' }, out: { type: 'string' }, type: { type: 'string' }, tokenizer: { type: 'string' } });
    if (!values.model) throw new UsageError('--model FILE is required');
    if (!values.out) throw new UsageError('--out FILE is required');
    const type = choice<GGUFFileType>('type', values.type, GGUF_FILE_TYPES, 'f32');

    const engine = await selectBackend();
    const file = readModelFile(values.model, engine);
    const { tokenizer, source } = findTokenizer(file, values.tokenizer);
    process.stderr.write(`read ${values.model}: ${file.loaded.format}; tokenizer ${source}\n`);
    const { tensors, notes } = ggufTensors(engine, file.loaded, type, (done, total, name, dtype) => {
      process.stderr.write(`[${done}/${total}] ${name} ${dtype}\n`);
    });
    for (const note of notes) process.stderr.write(`note: ${note}\n`);
    const metadata = llamaMetadata(file.loaded.config, tokenizer, { name: basename(values.model).replace(/\.[^.]*$/, ''), fileType: type });
    const bytes = writeGGUFFile(values.out, metadata, tensors);
    process.stderr.write(`wrote ${values.out}: ${bytes} bytes, ${tensors.length} tensors, ${metadata.length} metadata keys (backend ${engine.name})\n`);
    return 0;
  },
};
