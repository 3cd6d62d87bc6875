/**
 * The page: controls, the URL that mirrors them, the text stream into
 * #output, the token strip and the five views. The engine runs in worker.ts;
 * this thread only draws. On load it fetches the model `sparq playground`
 * serves (/files.json names it), or the user opens files of their own.
 */
import type { AttentionMethod } from '@sparq/core';
import type { FromWorker, Lesson, ModelSummary, NamedBytes, RunSettings, RunSummary, ToWorker } from './protocol.ts';
import { alphaView, baselinesView, queryView, readsView, scoresView } from './views.ts';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const input = (id: string) => $<HTMLInputElement>(id);

/** Everything the URL carries. */
interface ViewState extends RunSettings {
  step: number | null;
  layer: number;
  head: number;
}

const METHODS: readonly AttentionMethod[] = ['dense', 'sparq', 'h2o', 'lminf', 'oracle'];
const DEFAULTS: ViewState = {
  prompt: 'Once upon a time',
  n: 128,
  temperature: 0,
  seed: 42,
  method: 'sparq',
  r: 2,
  k: 16,
  l: 4,
  step: null,
  layer: 0,
  head: 0,
};

function readUrl(): ViewState & { run: boolean } {
  const p = new URLSearchParams(location.search);
  const num = (name: string, fallback: number) => {
    const v = Number(p.get(name));
    return p.has(name) && Number.isFinite(v) ? v : fallback;
  };
  const method = p.get('attention') as AttentionMethod | null;
  return {
    prompt: p.get('prompt') ?? DEFAULTS.prompt,
    n: num('n', DEFAULTS.n),
    temperature: num('temperature', DEFAULTS.temperature),
    seed: num('seed', DEFAULTS.seed),
    method: method && METHODS.includes(method) ? method : DEFAULTS.method,
    r: num('r', DEFAULTS.r),
    k: num('k', DEFAULTS.k),
    l: num('l', DEFAULTS.l),
    step: p.has('step') ? num('step', 0) : null,
    layer: num('layer', 0),
    head: num('head', 0),
    run: p.get('run') === '1',
  };
}

const state: ViewState = readUrl();
const startOnLoad = readUrl().run;

function writeUrl(): void {
  const p = new URLSearchParams();
  p.set('prompt', state.prompt);
  for (const key of ['n', 'temperature', 'seed'] as const) p.set(key, String(state[key]));
  p.set('attention', state.method);
  for (const key of ['r', 'k', 'l'] as const) p.set(key, String(state[key]));
  if (state.step !== null) p.set('step', String(state.step));
  p.set('layer', String(state.layer));
  p.set('head', String(state.head));
  history.replaceState(null, '', `?${p}`);
}

// ---- worker ----
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
const send = (message: ToWorker, transfer: Transferable[] = []) => worker.postMessage(message, transfer);
let model: ModelSummary | null = null;
let run: RunSummary | null = null;
let generating = false;
/** True until the first model is ready (the page load time is measured to then). */
let first = true;

worker.onmessage = (event: MessageEvent<FromWorker>) => {
  const m = event.data;
  if (m.type === 'loaded') onLoaded(m.model, m.ms);
  else if (m.type === 'text') $('output').textContent += m.text;
  else if (m.type === 'done') onDone(m.run);
  else if (m.type === 'lesson') showLesson(m.lesson);
  else fail(m.message);
};

function fail(message: string): void {
  generating = false;
  $<HTMLButtonElement>('generate').disabled = model === null;
  $('status').textContent = message;
  $('status').dataset.error = '1';
  if (model === null) $('model').textContent = 'no model loaded: open one';
}

function loadModel(modelFile: NamedBytes, tokenizer: NamedBytes | null, source: string): void {
  const files = tokenizer ? [modelFile, tokenizer] : [modelFile];
  model = null;
  $<HTMLButtonElement>('generate').disabled = true;
  $('model').textContent = `reading ${modelFile.name} (${source})…`;
  send(
    { type: 'load', model: modelFile, tokenizer },
    files.map((f) => f.bytes.buffer as ArrayBuffer),
  );
}

function onLoaded(summary: ModelSummary, ms: number): void {
  model = summary;
  $('model').textContent = summary.description;
  if (first) {
    // Navigation to a model ready to generate: fetching the page, its scripts and the model, parsing.
    const loadMs = performance.now();
    $('status').textContent =
      `model ready ${loadMs.toFixed(0)} ms after the page started (parsing ${ms.toFixed(0)} ms)`;
    $('status').dataset.loadMs = loadMs.toFixed(0);
  } else {
    $('status').textContent = `model ready (parsing ${ms.toFixed(0)} ms)`;
  }
  first = false;
  input('r').max = String(summary.headDim);
  input('k').max = String(summary.seqLen);
  input('l').max = String(summary.seqLen);
  fillSelect('layer', summary.nLayers, state.layer);
  fillSelect('head', summary.nKvHeads, state.head);
  $<HTMLButtonElement>('generate').disabled = false;
  showControls();
  if (startOnLoad && run === null) start();
}

function fillSelect(id: string, count: number, selected: number): void {
  const select = $<HTMLSelectElement>(id);
  select.innerHTML = Array.from(
    { length: count },
    (_, i) => `<option value="${i}"${i === selected ? ' selected' : ''}>${i}</option>`,
  ).join('');
}

// ---- controls ----
function showControls(): void {
  $<HTMLTextAreaElement>('prompt').value = state.prompt;
  for (const key of ['n', 'temperature', 'seed', 'r', 'k', 'l'] as const) input(key).value = String(state[key]);
  $<HTMLSelectElement>('attention').value = state.method;
  for (const key of ['r', 'k', 'l'] as const) $(`${key}-value`).textContent = String(state[key]);
}

function readControls(): void {
  state.prompt = $<HTMLTextAreaElement>('prompt').value;
  for (const key of ['n', 'temperature', 'seed', 'r', 'k', 'l'] as const) state[key] = Number(input(key).value);
  state.method = $<HTMLSelectElement>('attention').value as AttentionMethod;
  for (const key of ['r', 'k', 'l'] as const) $(`${key}-value`).textContent = String(state[key]);
  writeUrl();
}

$('controls').addEventListener('input', readControls);
$('controls').addEventListener('submit', (event) => {
  event.preventDefault();
  readControls();
  start();
});

function start(): void {
  if (!model || generating) return;
  generating = true;
  run = null;
  const output = $('output');
  output.textContent = '';
  output.removeAttribute('data-done');
  delete $('status').dataset.error;
  $('status').textContent = 'generating…';
  $<HTMLButtonElement>('generate').disabled = true;
  const { prompt, n, temperature, seed, method, r, k, l } = state;
  send({ type: 'generate', settings: { prompt, n, temperature, seed, method, r, k, l } });
}

function onDone(summary: RunSummary): void {
  generating = false;
  run = summary;
  $('output').setAttribute('data-done', '1');
  $<HTMLButtonElement>('generate').disabled = false;
  const a = summary.attention;
  const params = a.method === 'sparq' ? ` r=${a.r} k=${a.k} l=${a.l}` : a.method === 'dense' ? '' : ` k=${a.k}`;
  $('status').textContent =
    `${summary.generatedTokens} tokens generated, decode ${summary.decodeTokensPerSecond.toFixed(1)} tok/s (reference backend, in this tab), attention ${a.method}${params}`;
  $('status').dataset.tokensPerSecond = summary.decodeTokensPerSecond.toFixed(1);
  const last = summary.inspectable.at(-1) ?? 0;
  if (state.step === null || !summary.inspectable.includes(state.step)) state.step = last;
  $('inspect').hidden = false;
  drawStrip();
  inspect();
}

// ---- the token strip and the views ----
function drawStrip(): void {
  if (!run) return;
  const strip = $('strip');
  const inspectable = new Set(run.inspectable);
  strip.innerHTML = '';
  run.pieces.forEach((piece, position) => {
    const span = document.createElement('span');
    span.textContent = piece;
    span.title = `position ${position}`;
    span.dataset.position = String(position);
    if (position < run!.promptTokens) span.classList.add('prompt');
    if (!inspectable.has(position)) span.classList.add('off');
    if (position === state.step) span.classList.add('current');
    strip.append(span);
  });
}

$('strip').addEventListener('click', (event) => {
  const target = (event.target as HTMLElement).closest<HTMLElement>('span[data-position]');
  if (!target || !run) return;
  const position = Number(target.dataset.position);
  if (!run.inspectable.includes(position)) return;
  state.step = position;
  drawStrip();
  inspect();
});
for (const id of ['layer', 'head'] as const) {
  $(id).addEventListener('change', () => {
    state[id] = Number($<HTMLSelectElement>(id).value);
    inspect();
  });
}

function inspect(): void {
  if (!run || state.step === null) return;
  writeUrl();
  $('views').removeAttribute('data-ready');
  send({ type: 'inspect', position: state.step, layer: state.layer, head: state.head });
}

function showLesson(lesson: Lesson): void {
  const pieces = run?.pieces ?? [];
  $('where').textContent =
    `position ${lesson.position} (${JSON.stringify(pieces[lesson.position] ?? '')}), layer ${lesson.layer}, KV head ${lesson.head}: S = ${lesson.S} positions`;
  $('view-query').innerHTML = queryView(lesson);
  $('view-scores').innerHTML = scoresView(lesson, pieces);
  $('view-alpha').innerHTML = alphaView(lesson);
  $('view-baselines').innerHTML = baselinesView(lesson, pieces);
  $('view-reads').innerHTML = readsView(lesson);
  $('views').setAttribute('data-ready', '1');
}

// ---- files ----
$<HTMLInputElement>('files').addEventListener('change', async (event) => {
  const list = [...((event.target as HTMLInputElement).files ?? [])];
  if (list.length === 0) return;
  const files = await Promise.all(
    list.map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) })),
  );
  // A GGUF is the model; else the larger file is the checkpoint and the other its tokenizer.
  const modelFile =
    files.find((f) => f.name.toLowerCase().endsWith('.gguf')) ??
    [...files].sort((a, b) => b.bytes.length - a.bytes.length)[0];
  run = null;
  $('inspect').hidden = true;
  loadModel(modelFile, files.find((f) => f !== modelFile) ?? null, 'opened in this tab');
});

async function fetchServed(): Promise<void> {
  const served = await fetch('files.json');
  if (!served.ok) {
    $('model').textContent = 'no model served: open one below';
    return;
  }
  const names = (await served.json()) as { model: string; tokenizer: string | null };
  const get = async (path: string, name: string) => ({
    name,
    bytes: new Uint8Array(await (await fetch(path)).arrayBuffer()),
  });
  const tokenizer = names.tokenizer ? await get('files/tokenizer', names.tokenizer) : null;
  loadModel(await get('files/model', names.model), tokenizer, 'served by sparq playground');
}

showControls();
fetchServed().catch((error: unknown) => fail(`could not fetch the model: ${String(error)}`));
