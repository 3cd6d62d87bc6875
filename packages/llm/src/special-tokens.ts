/**
 * Special tokens written in the text. Before any model-specific encoding,
 * llama.cpp cuts the text at every occurrence of a special token's text and
 * keeps the token's id there; only the stretches between are encoded:
 *
 * - control and unknown tokens (`<|begin_of_text|>`, `<unk>`) only when the
 *   caller asks for it (parseSpecial): otherwise "<|im_end|>" in a user's
 *   message is just characters;
 * - user-defined tokens (added tokens that are not special, e.g. Qwen's
 *   `<think>`) always, as Hugging Face does with its added tokens.
 *
 * Longer tokens are cut first, so a token that contains a shorter one wins.
 */
import { TOKEN_TYPE } from './vocab.ts';

/** A stretch of plain text, or a special token's id. */
export type Fragment = string | number;

export class SpecialTokens {
  /** Ids of the tokens to look for, longest text first, each with whether it is always parsed. */
  private readonly list: { id: number; text: string; always: boolean }[] = [];

  /** `tokens` (n) texts and `types` (n) TOKEN_TYPEs of the vocab. */
  constructor(tokens: readonly string[], types: Int32Array) {
    types.forEach((type, id) => {
      if (type === TOKEN_TYPE.control || type === TOKEN_TYPE.unknown || type === TOKEN_TYPE.userDefined) {
        this.list.push({ id, text: tokens[id], always: type === TOKEN_TYPE.userDefined });
      }
    });
    // Stable sort: among equal lengths the lower id is cut first.
    this.list.sort((a, b) => b.text.length - a.text.length);
  }

  /** `text` cut into plain stretches (never empty) and special token ids, in order. */
  split(text: string, parseSpecial: boolean): Fragment[] {
    let fragments: Fragment[] = text === '' ? [] : [text];
    for (const { id, text: special, always } of this.list) {
      if (!always && !parseSpecial) continue;
      if (special === '' || !fragments.some((f) => typeof f === 'string' && f.includes(special))) continue;
      const cut: Fragment[] = [];
      for (const f of fragments) {
        if (typeof f !== 'string') {
          cut.push(f);
          continue;
        }
        let from = 0;
        for (let at = f.indexOf(special); at >= 0; at = f.indexOf(special, from)) {
          if (at > from) cut.push(f.slice(from, at));
          cut.push(id);
          from = at + special.length;
        }
        if (from < f.length) cut.push(f.slice(from));
      }
      fragments = cut;
    }
    return fragments;
  }
}
