/**
 * `sparq playground`: serves the browser playground (packages/playground,
 * built by `pnpm install`) and the model files named on the command line, on
 * 127.0.0.1 only, and prints the URL. The page runs the engine itself, in a
 * Web Worker on the reference backend; this server only hands out files:
 *   /                 the page (index.html), and its built assets by name
 *   /files.json       { model, tokenizer }: the names of the files below (tokenizer null for a GGUF)
 *   /files/model      the model file
 *   /files/tokenizer  the llama2.c tokenizer (llama2.c checkpoints only)
 * Nothing else is served: no directory listing, no other path of the disk.
 */
import { createReadStream, existsSync, readdirSync, statSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { basename, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readModelHeader, tokenizerBeside } from '@sparq/llm';
import { UsageError, type Command } from '../command.ts';
import { isInt, number, parseFlags } from '../flags.ts';

const USAGE = `sparq playground [--model FILE] [--tokenizer FILE] [--port N]

Serves the SparQ playground on http://127.0.0.1:PORT/ and prints the URL. The
page generates text with the model in the browser (reference backend, in a Web
Worker) and shows what SparQ and the baselines do at any step, layer and head.
It works offline; in the page you can also open a model of your own.

  --model FILE      llama2.c checkpoint or GGUF; default ../shared/models/stories260K.bin
                    beside the repository (an installed release needs --model)
  --tokenizer FILE  llama2.c tokenizer; default tok<vocab>.bin or tokenizer.bin next to the model
  --port N          default 8260; 0 picks a free port`;

/** The repository root, from this file (packages/cli/src/commands). */
const REPO = fileURLToPath(new URL('../../../../', import.meta.url));
/**
 * The built page: in an installed release, the package's own copy (playground/ beside dist/,
 * put there by scripts/release-pack.mjs); in a checkout, packages/playground/dist (pnpm install builds it).
 */
const INSTALLED_PAGE = fileURLToPath(new URL('../../playground/', import.meta.url));
const PAGE = existsSync(join(INSTALLED_PAGE, 'index.html'))
  ? INSTALLED_PAGE
  : join(REPO, 'packages', 'playground', 'dist');
const DEFAULT_MODEL = join(REPO, '..', 'shared', 'models', 'stories260K.bin');
const DEFAULT_PORT = 8260;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
};

export const playgroundCommand: Command = {
  name: 'playground',
  summary: 'serve the browser playground that shows SparQ at work on a model',
  usage: USAGE,
  async run(argv) {
    const values = parseFlags(argv, {
      model: { type: 'string' },
      tokenizer: { type: 'string' },
      port: { type: 'string' },
    });
    const port = number('port', values.port, DEFAULT_PORT, isInt(0, 65535), 'an integer in [0, 65535]');
    if (!existsSync(join(PAGE, 'index.html'))) {
      throw new UsageError(
        `the page is not built (${PAGE} has no index.html). The playground runs from a checkout of the repository: run pnpm install there (or pnpm --filter @sparq/playground build)`,
      );
    }
    const model = values.model ?? DEFAULT_MODEL;
    if (!existsSync(model)) throw new UsageError(`--model ${model}: no such file`);
    const header = readModelHeader(model);
    const tokenizer =
      'gguf' in header
        ? (values.tokenizer ?? null)
        : (values.tokenizer ?? tokenizerBeside(model, header.llama2c.config.vocabSize));
    if (tokenizer !== null && !existsSync(tokenizer)) throw new UsageError(`--tokenizer ${tokenizer}: no such file`);

    // Every path the server answers, decided now: the page's own files and the two named files.
    const routes = new Map<string, string>();
    for (const name of readdirSync(PAGE)) routes.set(`/${name}`, join(PAGE, name));
    routes.set('/', join(PAGE, 'index.html'));
    routes.set('/files/model', model);
    if (tokenizer !== null) routes.set('/files/tokenizer', tokenizer);
    const files = JSON.stringify({
      model: basename(model),
      tokenizer: tokenizer === null ? null : basename(tokenizer),
    });

    const server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname;
      if (request.method !== 'GET' && request.method !== 'HEAD') return send(response, 405, 'only GET');
      if (path === '/files.json') return send(response, 200, files, TYPES['.json']);
      const file = routes.get(path);
      if (!file) return send(response, 404, `not found: ${path}`);
      response.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
        'content-length': statSync(file).size,
        'cache-control': 'no-store',
      });
      if (request.method === 'HEAD') return response.end();
      createReadStream(file).pipe(response);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    const address = server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}/`;
    process.stdout.write(`${url}\n`);
    process.stderr.write(`serving ${model}${tokenizer ? ` and ${tokenizer}` : ''}; Ctrl-C stops\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        server.close(() => resolve());
        server.closeAllConnections();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    return 0;
  },
};

function send(response: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  response.writeHead(status, { 'content-type': type });
  response.end(body);
}
