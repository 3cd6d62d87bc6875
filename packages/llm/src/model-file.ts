/**
 * Opening model and tokenizer files by path. This is where node's file system
 * meets the parsers: a model file becomes a ByteSource read piece by piece
 * (no whole-file buffer, so any size works), its format known from its bytes:
 * the "GGUF" magic, else a llama2.c header whose sizes match the file's, else
 * a FormatError saying what was expected. A split GGUF model
 * (`<prefix>-00001-of-0000N.gguf`) is read from all its parts. The tokenizer
 * is found the way the CLI promises: the explicit path, else the one inside a
 * GGUF file, else tok<vocab>.bin or tokenizer.bin next to the model.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { totalmem } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { FormatError, allocBuffer, kvLabel, type DType, type Engine, type MatrixDType } from '@sparq/core';
import type { ByteSource } from './byte-reader.ts';
import { GGUF_MAGIC, tensorByteSize, tensorBytes, type GGUFValue } from './gguf-format.ts';
import { llamaConfigFromGGUF, llamaFromGGUF } from './gguf-llama.ts';
import type { ModelConfig } from './config.ts';
import { defaultKVLayout } from './forward.ts';
import { checkMemory, memoryPlan, scratchBytes, sessionKvBytes, type MemoryPlan } from './memory-plan.ts';
import { DEFAULT_KV_DTYPE, DEFAULT_PREFILL_CHUNK } from './options.ts';
import { tokenizerFromGGUF } from './gguf-tokenizer.ts';
import { joinGGUFParts, readGGUF, splitPartNames, type GGUFFile } from './gguf-read.ts';
import { layoutGGUF, tensorSpec, type GGUFTensorEntry, type GGUFTensorSpec } from './gguf-write.ts';
import { llama2cLayout, readLlama2c, type LoadedModel } from './llama2c.ts';
import { readLlama2cTokenizer } from './tokenizer-file.ts';
import type { Tokenizer } from './tokenizer.ts';
import { LanguageModel, checkModelOptions, type ModelOptions } from './language-model.ts';
import { buildModel, unsupportedDTypes, type WeightType } from './weights.ts';
import { checkTensors } from './tensor-check.ts';

export interface ModelFile {
  path: string;
  loaded: LoadedModel;
  /** The parsed GGUF container (all parts of a split model), when the file is GGUF. */
  gguf: GGUFFile | null;
}

/** Largest single read: readSync takes at most 2 GiB at a time. */
const MAX_READ = 1 << 30;

/**
 * An open file as a ByteSource: each read is one buffer of its own, filled by
 * positioned reads. Close it when done; a read after close throws (the fd
 * number may already belong to another file).
 */
export function openFileSource(path: string): ByteSource & { close(): void } {
  let fd: number | null = openSync(checkedFile(path), 'r');
  const size = fstatSync(fd).size;
  return {
    name: path,
    size,
    read(offset, length) {
      if (fd === null)
        throw new Error(`${path}: read after the file was closed (tensors are read while the model loads)`);
      const out = new Uint8Array(allocBuffer(length, false, `${path}: a read of ${length} bytes`));
      for (let done = 0; done < length;) {
        const n = readSync(fd, out, done, Math.min(length - done, MAX_READ), offset + done);
        if (n === 0)
          throw new FormatError(
            `${path}: ends at byte offset ${offset + done}, inside a read of ${length} bytes from ${offset} (the file changed while it was read?)`,
          );
        done += n;
      }
      return out;
    },
    close() {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

/**
 * `path` when it names a regular file (or a device or pipe); else a
 * FormatError that says what is there instead, never node's raw ENOENT or EISDIR.
 */
function checkedFile(path: string): string {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) throw new FormatError(`${path}: no such file`);
  if (stat.isDirectory()) throw new FormatError(`${path}: is a directory, expected a file`);
  return path;
}

/** Runs `use` on the open files at `paths`, closing them all afterwards. */
function withSources<T>(paths: readonly string[], use: (sources: ByteSource[]) => T): T {
  const open: (ByteSource & { close(): void })[] = [];
  try {
    for (const p of paths) open.push(openFileSource(p));
    return use(open);
  } finally {
    for (const s of open) s.close();
  }
}

/** The files of a model: every part of a split GGUF (named as llama.cpp names them), else the file alone. */
export function modelParts(path: string): string[] {
  const names = splitPartNames(basename(path));
  return names ? names.map((n) => join(dirname(path), n)) : [path];
}

/** True when the source starts with the GGUF magic. */
function isGGUF(source: ByteSource): boolean {
  return source.size >= 4 && firstWord(source) === GGUF_MAGIC;
}

/** The file's first 4 bytes as a little-endian u32 (the file has them). */
function firstWord(source: ByteSource): number {
  const head = source.read(0, 4);
  return new DataView(head.buffer, head.byteOffset, 4).getUint32(0, true);
}

/** The GGUF header of every part, joined; `use` runs while the files are open (to read tensors). */
export function withGGUF<T>(path: string, use: (gguf: GGUFFile) => T): T {
  const parts = modelParts(path);
  const missing = parts.filter((p) => !existsSync(p));
  if (missing.length > 0 && parts.length > 1)
    throw new FormatError(`${path}: split model of ${parts.length} parts (by its name): missing ${missing.join(', ')}`);
  return withSources(parts, (sources) => use(joinGGUFParts(sources.map((s, i) => readGGUF(s, undefined, i)))));
}

/** Reads a llama2.c checkpoint or a GGUF llama model (the engine dequantizes non-f32 norms). */
export function readModelFile(path: string, engine?: Engine): ModelFile {
  const gguf = withSources([path], ([source]) => isGGUF(source));
  if (gguf) {
    return withGGUF(path, (f) => {
      if (f.tensors.length === 0)
        throw new FormatError(
          `${path}: the GGUF has no tensors (a vocab-only file?): it can tokenize (sparq tokenize) but not run`,
        );
      return { path, loaded: llamaFromGGUF(f, path, engine), gguf: f };
    });
  }
  return withSources([path], ([source]) => ({
    path,
    loaded: asLlama2c(source, () => readLlama2c(source)),
    gguf: null,
  }));
}

/** A model file's header, no tensors read: the GGUF container (all parts; its files closed again) or llama2.c's layout. */
export function readModelHeader(path: string): { gguf: GGUFFile } | { llama2c: ReturnType<typeof llama2cLayout> } {
  const gguf = withSources([path], ([source]) => isGGUF(source));
  if (gguf) return { gguf: withGGUF(path, (f) => f) };
  return withSources([path], ([source]) => ({ llama2c: asLlama2c(source, () => llama2cLayout(source)) }));
}

/** llama2.c has no magic: its header must agree with the file's size, else neither format fits and the error says so. */
function asLlama2c<T>(source: ByteSource, read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof FormatError)) throw error;
    const head =
      source.size >= 4
        ? `found 0x${firstWord(source).toString(16).padStart(8, '0')}`
        : `the file has ${source.size} bytes`;
    const why = error.message.startsWith(`${source.name}: `)
      ? error.message.slice(source.name.length + 2)
      : error.message;
    throw new FormatError(
      `${source.name}: not a model file: expected GGUF (magic "GGUF" at byte offset 0; ${head}) or a llama2.c checkpoint (${why})`,
    );
  }
}

/**
 * Writes a GGUF file piece by piece (no second copy of the weights in memory;
 * alignment padding left as holes, which read as zeros). It goes to a
 * temporary file beside `path`, renamed over `path` only once complete, so a
 * failure leaves neither a partial file nor a damaged previous one.
 * Returns the file size.
 */
export function writeGGUFFile(
  path: string,
  metadata: Iterable<[string, GGUFValue]>,
  tensors: readonly GGUFTensorEntry[],
): number {
  return writeGGUFStream(path, metadata, tensors.map(tensorSpec), (i, put) => put(tensorBytes(tensors[i].tensor)));
}

/**
 * writeGGUFFile with each tensor's bytes made on demand: `fill(i, put)` hands tensor i's bytes
 * to `put` in order, in as many pieces as it likes (a multi-GB tensor need never be whole in
 * memory). A tensor given more or fewer bytes than its type and shape take is an error.
 */
export function writeGGUFStream(
  path: string,
  metadata: Iterable<[string, GGUFValue]>,
  tensors: readonly GGUFTensorSpec[],
  fill: (i: number, put: (bytes: Uint8Array) => void) => void,
): number {
  const { header, at, size } = layoutGGUF(metadata, tensors);
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.partial`);
  const fd = openSync(temp, 'w');
  try {
    try {
      writeAll(fd, header, 0);
      tensors.forEach(({ name, dtype, shape }, i) => {
        const bytes = tensorByteSize(
          dtype,
          shape.reduce((a, b) => a * b, 1),
        );
        let written = 0;
        fill(i, (piece) => {
          if (written + piece.length > bytes)
            throw new RangeError(`writeGGUFStream: tensor "${name}" given more than its ${bytes} bytes`);
          writeAll(fd, piece, at[i] + written);
          written += piece.length;
        });
        if (written !== bytes)
          throw new RangeError(`writeGGUFStream: tensor "${name}" given ${written} bytes, expected ${bytes}`);
      });
      ftruncateSync(fd, size);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  return size;
}

/** All of `bytes` at file position `at` (writeSync may write less than asked). */
function writeAll(fd: number, bytes: Uint8Array, at: number): void {
  for (let done = 0; done < bytes.length;)
    done += writeSync(fd, bytes, done, Math.min(bytes.length - done, MAX_READ), at + done);
}

/** A text file's contents (UTF-8; an invalid byte sequence becomes U+FFFD), with checkedFile's errors. */
export function readTextFile(path: string): string {
  return readFileSync(checkedFile(path), 'utf8');
}

/** A small file's bytes (tokenizers). */
export function readBytes(path: string): Uint8Array {
  return new Uint8Array(readFileSync(checkedFile(path)));
}

/**
 * The tokenizer of a GGUF file (its metadata only: a vocab-only file with no
 * tensors works, as with llama.cpp's tokenizer tools), of a llama2.c
 * checkpoint (`explicit`, else the one beside it, as findTokenizer finds it;
 * no weights read), or of a llama2.c tokenizer file.
 */
export function readTokenizerOnly(path: string, explicit?: string): { tokenizer: Tokenizer; source: string } {
  const gguf = withSources([path], ([source]) => isGGUF(source));
  if (!gguf) {
    // A checkpoint's header matches its file's size; a tokenizer file's first words never do.
    const checkpoint = withSources([path], ([source]) => {
      try {
        return llama2cLayout(source).config.vocabSize;
      } catch (error) {
        if (error instanceof FormatError) return null;
        throw error;
      }
    });
    if (checkpoint !== null) {
      const file = explicit ?? tokenizerBeside(path, checkpoint);
      return { tokenizer: readTokenizerFile(file, checkpoint), source: `${file} (llama2.c tokenizer of ${path})` };
    }
  }
  if (!gguf || explicit !== undefined) {
    const file = explicit ?? path;
    return { tokenizer: readTokenizerFile(file), source: `${file} (llama2.c tokenizer)` };
  }
  const tokenizer = withGGUF(path, (f) => tokenizerFromGGUF(f, path));
  if (!tokenizer) throw new FormatError(`${path}: GGUF without a tokenizer (no tokenizer.ggml.tokens)`);
  const v = tokenizer.vocab;
  return { tokenizer, source: `${path} (GGUF ${v.model}${v.pre ? ` ${v.pre}` : ''}, ${tokenizer.vocabSize} tokens)` };
}

/** Reads a llama2.c tokenizer file holding exactly `vocabSize` tokens (or any count when omitted). */
export function readTokenizerFile(path: string, vocabSize?: number): Tokenizer {
  return readLlama2cTokenizer(readBytes(path), path, vocabSize);
}

/** The tokenizer for `model`: `explicit`, else the GGUF's own, else tok<vocab>.bin / tokenizer.bin beside it. */
export function findTokenizer(model: ModelFile, explicit?: string): { tokenizer: Tokenizer; source: string } {
  const vocab = model.loaded.config.vocabSize;
  if (explicit) return { tokenizer: readTokenizerFile(explicit, vocab), source: explicit };
  if (model.gguf) {
    const t = tokenizerFromGGUF(model.gguf, model.path);
    if (t) {
      if (t.vocabSize !== vocab)
        throw new FormatError(
          `${model.path}: tokenizer.ggml.tokens has ${t.vocabSize} tokens, the model's vocab is ${vocab}`,
        );
      return { tokenizer: t, source: `${model.path} (GGUF metadata)` };
    }
  }
  const found = tokenizerBeside(model.path, vocab);
  return { tokenizer: readTokenizerFile(found, vocab), source: found };
}

/** The llama2.c tokenizer next to a model of `vocab` tokens: tok<vocab>.bin, else tokenizer.bin; a FormatError when neither exists. */
export function tokenizerBeside(modelPath: string, vocab: number): string {
  const candidates = [`tok${vocab}.bin`, 'tokenizer.bin'].map((f) => join(dirname(modelPath), f));
  const found = candidates.find((p) => existsSync(p));
  if (!found)
    throw new FormatError(
      `${modelPath}: no tokenizer given and none found (looked for ${candidates.join(', ')}); pass --tokenizer`,
    );
  return found;
}

/** Reads a llama2.c or GGUF model and its tokenizer onto `engine`. */
export function openModel(engine: Engine, path: string, options: ModelOptions = {}): LanguageModel {
  checkModelOptions('openModel', options);
  const plan = options.contextSize !== undefined ? checkModelMemory(engine, path, options) : undefined;
  const file = readModelFile(path, engine);
  const { tokenizer, source } = findTokenizer(file, options.tokenizer);
  const lacking = unsupportedDTypes(engine, file.loaded);
  const runOn = lacking.length > 0 && options.fallback ? options.fallback : engine;
  if (options.checkTensors) checkTensors(runOn, file.loaded);
  const repack = plan?.repacked !== false;
  const model = buildModel(runOn, file.loaded, options.weights, { constant: repack });
  if (!repack)
    model.notes.push(
      `weights not repacked for the prefill products: the context fits in memory only without the copies`,
    );
  if (runOn !== engine)
    model.notes.push(`backend ${engine.name} does not compute on ${lacking.join(', ')}: running on ${runOn.name}`);
  return new LanguageModel(runOn, model, tokenizer, { ...options, tokenizerSource: source });
}

/** Bytes per element of the matrices converted on load (ModelOptions.weights): f32, Q4_0 blocks, INT4 groups of 32 with f32 scales. */
const CONVERTED_BYTES: Record<WeightType, number> = { f32: 4, q4_0: 18 / 32, int4: 0.5 + 4 / 32 };

/**
 * A model file's config and the bytes its weights take in memory (as stored, or converted to
 * `weights`), from the header alone; with `engine`, also the bytes of the copies its backend lays
 * out for the blocked products (Backend.repackedBytes) of every matrix a product reads (all but a
 * token embedding that has its own output matrix).
 */
export function readModelPlan(
  path: string,
  weights?: WeightType,
  engine?: Engine,
): { config: ModelConfig; weightBytes: number; repackedBytes: number } {
  const header = readModelHeader(path);
  const tensors =
    'gguf' in header
      ? header.gguf.tensors.map((t) => ({
          name: t.name,
          ne: t.ne,
          dtype: t.type.dtype,
          bytes: t.byteSize,
        }))
      : header.llama2c.regions.map((r) => ({
          name: r.name,
          ne: [...r.shape].reverse(),
          dtype: 'f32' as DType | null,
          bytes: 4 * r.shape.reduce((a, b) => a * b, 1),
        }));
  const config = 'gguf' in header ? llamaConfigFromGGUF(header.gguf, path) : header.llama2c.config;
  const tiedOutput = !tensors.some((t) => t.name === 'output.weight');
  let weightBytes = 0;
  let repackedBytes = 0;
  for (const t of tensors) {
    const elements = t.ne.reduce((a, b) => a * b, 1);
    // Vectors stay f32 whatever the matrices become.
    const matrix = t.ne.length > 1;
    weightBytes += weights && matrix ? elements * CONVERTED_BYTES[weights] : t.bytes;
    const dtype = weights ?? t.dtype;
    const product = matrix && (t.name !== 'token_embd.weight' || tiedOutput);
    if (engine?.backend.repackedBytes && product && dtype !== null && dtype !== 'i8' && dtype !== 'i32')
      repackedBytes += engine.backend.repackedBytes(dtype as MatrixDType, elements / t.ne[0], t.ne[0]);
  }
  return { config, weightBytes, repackedBytes };
}

/**
 * The memory the process may use: the cgroup's limit where one is set (containers), else the
 * machine's RAM. Linux cgroup v2 (memory.max), then v1 (memory.limit_in_bytes).
 */
export function memoryAvailable(): { bytes: number; source: string } {
  const ram = { bytes: totalmem(), source: 'os.totalmem()' };
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch {
      continue;
    }
    const limit = Number(text); // 'max' (no limit) gives NaN
    if (Number.isFinite(limit) && limit > 0 && limit < ram.bytes)
      return { bytes: limit, source: `cgroup limit ${file}` };
    return ram;
  }
  return ram;
}

/**
 * Refuses, before the weights are read, a context that does not fit: weights + KV cache + scratch
 * (memory-plan.ts) against memoryAvailable(). The context is options.contextSize, at most the model's.
 * The backend's repacked copies of the weights only speed up prefill: a context that fits only
 * without them runs without them (`repacked` false).
 */
export function checkModelMemory(
  engine: Engine,
  path: string,
  options: ModelOptions,
  available = memoryAvailable(),
): MemoryPlan & { repacked: boolean } {
  const { config, weightBytes, repackedBytes } = readModelPlan(path, options.weights, engine);
  const contextSize = Math.min(options.contextSize ?? config.seqLen, config.seqLen);
  const dtype = options.kv ?? DEFAULT_KV_DTYPE;
  const layout = options.kvLayout ?? defaultKVLayout(options.attention?.method ?? 'dense');
  const kv = sessionKvBytes(config, contextSize, dtype, layout, options.kt);
  const scratch = scratchBytes(config, contextSize, DEFAULT_PREFILL_CHUNK, engine.info().threads);
  const withCopies = memoryPlan(weightBytes + repackedBytes, kv, scratch);
  const repacked = repackedBytes > 0 && withCopies.total <= available.bytes;
  const plan = repacked || repackedBytes === 0 ? withCopies : memoryPlan(weightBytes, kv, scratch);
  checkMemory(plan, available, `${path}: a context of ${contextSize} positions (KV ${kvLabel(dtype)} ${layout})`);
  return { ...plan, repacked };
}
