/**
 * Needle-in-a-haystack prompts (issue 25), built at the token level so that
 * the haystack has exactly the requested length:
 *
 *   passkey   the passkey retrieval test (Mohtashami and Jaggi, 2023): filler text with, at depth
 *             D, " The pass key is 71432. Remember it. 71432 is the pass key." and at the end
 *             " What is the pass key? The pass key is"; the answer is the key's digits.
 *   multikey  RULER's multi-key needle (Hsieh et al., 2024): MULTIKEY_NEEDLES needles
 *             " One of the special magic numbers for WORD is NUMBER." with different words and
 *             7-digit numbers, the asked one at depth D and the distractors at seeded random depths;
 *             the question ends " The special magic number for WORD is". Two changes from RULER,
 *             both so that an n-gram match can find the answer: RULER's answer prefix ends
 *             "... mentioned in the provided text is", here it ends as the needle does; and RULER's
 *             needle has "is: NUMBER", whose 4-gram " is: " is the same in every needle, so a
 *             4-gram match could not tell the needles apart at the number's first digit.
 *
 * Prompt = BOS, filler with the needles inserted, the question; `length` tokens in all. Depth 0
 * puts the needle right after BOS, depth 1 right before the question.
 * Each case checks that the answer is determined by the text: every n-gram the answer's greedy
 * continuation ends on occurs before it, followed only by the answer's next token (else other
 * numbers are drawn).
 */
import { mulberry32 } from '../random-model.ts';
import type { Tokenizer } from '../tokenizer.ts';

export type NeedleTask = 'passkey' | 'multikey';
export const NEEDLE_TASKS: readonly NeedleTask[] = ['passkey', 'multikey'];
/** Needles in a multikey prompt: the asked one and three distractors. */
export const MULTIKEY_NEEDLES = 4;
/** Keys of the multikey needles. */
const WORDS = [
  'apple',
  'river',
  'candle',
  'garden',
  'pencil',
  'rabbit',
  'window',
  'silver',
  'forest',
  'button',
  'ocean',
  'tiger',
  'violin',
  'castle',
  'meadow',
  'rocket',
];

export interface NeedleCase {
  task: NeedleTask;
  length: number;
  depth: number;
  prompt: number[];
  /** The expected answer text (digits) and its tokens. */
  answer: string;
  answerTokens: number[];
  /** Prompt positions of the asked needle's answer tokens: the keys layer 2 must find. */
  answerPositions: number[];
  /** [start, end) of the asked needle in the prompt. */
  needle: [number, number];
  /** The other needles (multikey): their numbers and [start, end) in the prompt. */
  distractors: { value: string; needle: [number, number] }[];
}

const BOS = 1;

/**
 * Context the needle sweep builds the retrieval model for, given its longest prompt: the model's
 * default 128k, or the prompt and its answer (64 positions is more than any answer) when longer.
 * The RoPE base follows from it (retrievalRopeBase), so a run compared with another must use the same.
 */
export function needleModelContext(longest: number): number {
  return Math.max(131072, longest + 64);
}

/** What a needle sweep's case list is drawn from; `skip` leaves out cases (a resumed sweep's finished ones). */
export interface NeedleCaseOptions {
  tasks: readonly NeedleTask[];
  depths: readonly number[];
  ngram: number;
  /** Seed of the keys and distractor depths: the case at depth index i uses seed + i (default 1). */
  seed?: number;
  skip?: (task: NeedleTask, length: number, depth: number) => boolean;
}

/** One case of a sweep: `at` is its index in task x depth order, the order of the sweep's records. */
export interface PlannedNeedleCase {
  at: number;
  case: NeedleCase;
}

/**
 * The sweep's cases of one length, in the order they run: by their first needle's position, so each
 * prompt begins with the filler the one before it began with, up to that needle (the shared prefix
 * a runner can prefill once).
 */
export function needleCases(
  tokenizer: Tokenizer,
  filler: readonly number[],
  length: number,
  o: NeedleCaseOptions,
): PlannedNeedleCase[] {
  const planned = o.tasks
    .flatMap((task) => o.depths.map((depth, i) => ({ task, depth, i })))
    .map((x, at) => ({ ...x, at }))
    .filter((x) => !o.skip?.(x.task, length, x.depth))
    .map(({ task, depth, i, at }) => ({
      at,
      case: needleCase(tokenizer, filler, task, length, depth, (o.seed ?? 1) + i, o.ngram),
    }));
  const firstNeedle = (c: NeedleCase) => Math.min(c.needle[0], ...c.distractors.map((x) => x.needle[0]));
  return planned.sort((a, b) => firstNeedle(a.case) - firstNeedle(b.case) || a.at - b.at);
}

/**
 * Greedy answer tokens scored as the sweep scores them: decoded, and exact when the trimmed text is
 * the answer. Tokenizer.decode prints each token after its predecessor (run.c's decode(prev, token)),
 * so the first token, the answer's leading space, is not in the output and not checked: compare the
 * tokens with c.answerTokens for that.
 */
export function needleAnswer(
  tokenizer: Tokenizer,
  c: NeedleCase,
  tokens: readonly number[],
): { output: string; exact: boolean } {
  const output = tokenizer.decode(tokens);
  return { output, exact: output.trim() === c.answer };
}

/** Length of the common prefix of two token lists. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** The first `count` tokens of `text` (no BOS), encoded in pieces of 4,000 characters at spaces. */
export function fillerTokens(tokenizer: Tokenizer, text: string, count: number): number[] {
  const out: number[] = [];
  let at = 0;
  while (out.length < count && at < text.length) {
    let end = Math.min(text.length, at + 4000);
    const space = text.lastIndexOf(' ', end);
    if (end < text.length && space > at) end = space;
    out.push(...tokenizer.encode(text.slice(at, end), { addSpecial: false }));
    at = end;
  }
  if (out.length < count)
    throw new RangeError(`needle: the filler text gives ${out.length} tokens, expected at least ${count}`);
  return out.slice(0, count);
}

/** One needle prompt of `length` tokens with the needle at `depth` (0..1); `seed` draws keys and distractor depths. */
export function needleCase(
  tokenizer: Tokenizer,
  filler: readonly number[],
  task: NeedleTask,
  length: number,
  depth: number,
  seed: number,
  ngram: number,
): NeedleCase {
  const enc = (s: string) => tokenizer.encode(s, { addSpecial: false });
  const random = mulberry32(seed);
  const digits = (n: number) =>
    Array.from({ length: n }, (_, i) => String(Math.floor(random() * (i === 0 ? 9 : 10)) + (i === 0 ? 1 : 0))).join('');
  for (let attempt = 0; attempt < 64; attempt++) {
    let needles: { text: number[]; depth: number; value: string; asked: boolean }[];
    let question: number[];
    if (task === 'passkey') {
      const key = digits(5);
      needles = [
        { text: enc(` The pass key is ${key}. Remember it. ${key} is the pass key.`), depth, value: key, asked: true },
      ];
      question = enc(' What is the pass key? The pass key is');
    } else {
      const words = [...WORDS].sort(() => random() - 0.5).slice(0, MULTIKEY_NEEDLES);
      needles = words.map((w, i) => {
        const value = digits(7);
        return {
          text: enc(` One of the special magic numbers for ${w} is ${value}.`),
          depth: i === 0 ? depth : random(),
          value,
          asked: i === 0,
        };
      });
      question = enc(
        ` What is the special magic number for ${words[0]} mentioned in the provided text? The special magic number for ${words[0]} is`,
      );
    }
    const needleTokens = needles.reduce((s, x) => s + x.text.length, 0);
    const fill = length - 1 - needleTokens - question.length;
    if (fill < 0)
      throw new RangeError(
        `needle: length ${length} is shorter than the needles and question (${length - fill} tokens)`,
      );
    if (filler.length < fill) throw new RangeError(`needle: ${filler.length} filler tokens, expected at least ${fill}`);
    // Insert the needles in order of depth; each at its share of the filler.
    const order = needles
      .map((x, i) => ({ ...x, i, at: Math.round(x.depth * fill) }))
      .sort((a, b) => a.at - b.at || a.i - b.i);
    const prompt = [BOS];
    let from = 0;
    let asked: [number, number] = [0, 0];
    const distractors: NeedleCase['distractors'] = [];
    for (const x of order) {
      append(prompt, filler, from, x.at);
      from = x.at;
      const at: [number, number] = [prompt.length, prompt.length + x.text.length];
      if (x.asked) asked = at;
      else distractors.push({ value: x.value, needle: at });
      prompt.push(...x.text);
    }
    append(prompt, filler, from, fill);
    prompt.push(...question);
    const value = needles[0].value;
    const answerTokens = answerAfter(tokenizer, prompt, asked, question.slice(-ngram), value);
    if (answerTokens === null || !determined(prompt, answerTokens, ngram)) continue;
    const first = asked[0] + indexOfRun(prompt.slice(asked[0], asked[1]), answerTokens);
    return {
      task,
      length,
      depth,
      prompt,
      answer: value,
      answerTokens,
      answerPositions: answerTokens.map((_, i) => first + i),
      needle: asked,
      distractors,
    };
  }
  throw new RangeError(
    `needle: no ${task} case of length ${length} at depth ${depth} whose answer the text determines (64 draws)`,
  );
}

/**
 * The needle's tokens after the question's last n tokens, up to where they spell `value` (the
 * leading space token, when there is one, is part of what the model must generate); null when the
 * needle does not hold them.
 */
function answerAfter(
  tokenizer: Tokenizer,
  prompt: readonly number[],
  [start, end]: [number, number],
  tail: readonly number[],
  value: string,
): number[] | null {
  const at = indexOfRun(prompt.slice(start, end), tail);
  if (at < 0) return null;
  for (let j = start + at + tail.length + 1; j <= end; j++) {
    const run = prompt.slice(start + at + tail.length, j);
    if (tokenizer.decode(run).trim() === value) return run;
  }
  return null;
}

/**
 * Appends xs[from, to) to out one by one: spreading them as push's arguments overflows the call
 * stack at about 10^5 tokens (the filler of a 128k prompt).
 */
function append(out: number[], xs: readonly number[], from: number, to: number): void {
  for (let i = from; i < to; i++) out.push(xs[i]);
}

/** First index where `run` occurs in `xs`, or -1. */
function indexOfRun(xs: readonly number[], run: readonly number[]): number {
  for (let p = 0; p + run.length <= xs.length; p++) if (run.every((t, i) => xs[p + i] === t)) return p;
  return -1;
}

/**
 * True when every step of the answer's greedy continuation ends on an n-gram that occurs before it
 * in the text so far, and every occurrence is followed by the answer's next token: the answer is
 * then what an n-gram copy of the text gives (the passkey needle repeats its key, so some n-grams
 * inside the key occur twice, followed alike).
 */
function determined(prompt: readonly number[], answer: readonly number[], n: number): boolean {
  const text = [...prompt];
  for (const next of answer) {
    const end = text.length;
    let count = 0;
    for (let p = n - 1; p < end - 1; p++) {
      let same = true;
      for (let i = 0; i < n && same; i++) same = text[p - i] === text[end - 1 - i];
      if (!same) continue;
      if (text[p + 1] !== next) return false;
      count++;
    }
    if (count === 0) return false;
    text.push(next);
  }
  return true;
}
