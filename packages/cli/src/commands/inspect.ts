/**
 * `sparq inspect FILE`: what a model file holds. For GGUF, as llama.cpp's gguf
 * dump shows it: the header, every metadata key with its type and value
 * (arrays summarised), and a table of tensors (name, type, shape, bytes,
 * offset); a split model is read from all its parts. For a llama2.c
 * checkpoint: its config and the stacked weight regions. Reads only headers,
 * so it is instant for a file of any size. `--json` prints the same as JSON.
 */
import {
  describeConfig,
  readModelHeader,
  type GGUFFile,
  type GGUFValue,
  type Llama2cRegion,
  type ModelConfig,
} from '@sparq/llm';
import { UsageError, type Command } from '../command.ts';
import { parseFlagsAndFiles } from '../flags.ts';

const USAGE = `sparq inspect FILE [--json]

Prints a GGUF file's header, metadata and tensor table (name, ggml type, shape
as ggml's ne with the innermost dimension first, bytes, data offset). Arrays
show their item type, length and first items. A file named
<prefix>-00001-of-0000N.gguf is read with all its parts. A llama2.c checkpoint
shows its config and weight regions (row-major shapes, layers first).

  --json   the same as one JSON object (arrays: item type, length, first items)`;

/** Items of an array shown. */
const HEAD = 8;

export const inspectCommand: Command = {
  name: 'inspect',
  summary: "print a model file's metadata and tensor table (name, type, shape, bytes), as gguf dump",
  usage: USAGE,
  async run(argv) {
    const parsed = parseFlagsAndFiles(argv, { json: { type: 'boolean' } }, true);
    if (parsed.positionals.length !== 1) throw new UsageError(`expected one FILE, got ${parsed.positionals.length}`);
    const path = parsed.positionals[0];
    const header = readModelHeader(path);
    const json = parsed.values.json === true;
    const text =
      'gguf' in header
        ? json
          ? JSON.stringify(asJSON(path, header.gguf), null, 2)
          : asText(path, header.gguf)
        : llama2c(path, header.llama2c, json);
    process.stdout.write(text + '\n');
    return 0;
  },
};

/** A value as JSON-safe data: bigints as decimal strings, arrays summarised. */
function plain(v: GGUFValue): unknown {
  if (v.type === 'array') {
    const items = Array.from(v.value.values as ArrayLike<unknown>).slice(0, HEAD);
    return {
      itemType: v.value.itemType,
      length: v.value.values.length,
      head: items.map((x) => (typeof x === 'bigint' ? x.toString() : typeof x === 'object' ? '[array]' : x)),
    };
  }
  return typeof v.value === 'bigint' ? v.value.toString() : v.value;
}

function asJSON(path: string, f: GGUFFile) {
  return {
    file: path,
    version: f.version,
    parts: f.parts.map((p) => p.name),
    alignment: f.alignment,
    metadata: Object.fromEntries([...f.metadata].map(([k, v]) => [k, { type: v.type, value: plain(v) }])),
    tensors: f.tensors.map((t) => ({
      name: t.name,
      type: t.type.name,
      ne: t.ne,
      bytes: t.byteSize,
      offset: t.fileOffset,
      part: t.part,
    })),
  };
}

/** One value on one line: strings quoted and cut at 80 characters, arrays as `[type x n] first items, ...`. */
function show(v: GGUFValue): string {
  const str = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);
  if (v.type === 'string') return str(v.value);
  // An f32 printed with the digits it has (1e-5, not 0.000009999999747378752).
  if (v.type === 'f32') return String(Number(v.value.toPrecision(7)));
  if (v.type !== 'array') return String(v.value);
  const all = Array.from(v.value.values as ArrayLike<unknown>);
  const items = all
    .slice(0, HEAD)
    .map((x) => (typeof x === 'string' ? str(x) : typeof x === 'object' ? '[...]' : String(x)));
  return `[${v.value.itemType} x ${all.length}] ${items.join(', ')}${all.length > HEAD ? ', ...' : ''}`;
}

function asText(path: string, f: GGUFFile): string {
  const lines = [
    `${path}: GGUF v${f.version}, ${f.metadata.size} metadata keys, ${f.tensors.length} tensors, alignment ${f.alignment}${f.parts.length > 1 ? `, ${f.parts.length} parts` : ''}`,
  ];
  lines.push('', 'metadata:');
  const keyWidth = Math.max(0, ...[...f.metadata.keys()].map((k) => k.length));
  for (const [key, v] of f.metadata) lines.push(`  ${key.padEnd(keyWidth)}  ${v.type.padEnd(6)}  ${show(v)}`);
  lines.push('', 'tensors:');
  const rows = f.tensors.map((t, i) => [
    String(i),
    t.name,
    t.type.name,
    `[${t.ne.join(', ')}]`,
    String(t.byteSize),
    String(t.fileOffset) + (f.parts.length > 1 ? ` (part ${t.part + 1})` : ''),
  ]);
  const header = ['#', 'name', 'type', 'shape (ne)', 'bytes', 'offset'];
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  // Numbers right-aligned, text left-aligned.
  const line = (r: string[]) =>
    '  ' + r.map((cell, c) => (c === 0 || c >= 4 ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ');
  lines.push(line(header), ...rows.map(line));
  const total = f.tensors.reduce((n, t) => n + t.byteSize, 0);
  lines.push('', `${f.tensors.length} tensors, ${total} bytes of tensor data`);
  return lines.join('\n');
}

/** A llama2.c checkpoint: its config, then each region (all F32). */
function llama2c(
  path: string,
  { config, regions }: { config: ModelConfig; regions: Llama2cRegion[] },
  json: boolean,
): string {
  const rows = regions.map((r) => ({
    name: r.name,
    type: 'F32',
    shape: r.shape,
    bytes: r.shape.reduce((a, b) => a * b, 4),
    offset: r.at,
  }));
  if (json)
    return JSON.stringify({ file: path, format: 'llama2.c legacy (version 0)', config, tensors: rows }, null, 2);
  const table = rows.map((r) => [r.name, r.type, `[${r.shape.join(', ')}]`, String(r.bytes), String(r.offset)]);
  const header = ['name', 'type', 'shape', 'bytes', 'offset'];
  const widths = header.map((h, c) => Math.max(h.length, ...table.map((r) => r[c].length)));
  const line = (r: string[]) =>
    '  ' + r.map((cell, c) => (c >= 3 ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ');
  return [
    `${path}: llama2.c legacy (version 0), f32`,
    `  ${describeConfig(config)}${config.sharedClassifier ? ', classifier shared with the embedding' : ''}`,
    '',
    'tensors:',
    line(header),
    ...table.map(line),
  ].join('\n');
}
