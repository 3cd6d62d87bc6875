/**
 * Reader for llama2.c's tokenizer file: int32 max_token_length, then per
 * token f32 score, int32 length, and that many bytes. The file does not store
 * the token count: pass the model's vocab size (then the file must hold
 * exactly that many tokens) or read to the end of the file. Pieces must be
 * UTF-8 (SentencePiece's are; byte values go in `<0xAB>` byte tokens); run.c
 * cuts each at its first NUL, and so do we.
 */
import { ByteReader } from './byte-reader.ts';
import { Tokenizer } from './tokenizer.ts';
import { sentencePieceVocab } from './vocab.ts';
import { decodeUtf8Strict } from './utf8.ts';

export function readLlama2cTokenizer(bytes: Uint8Array, file: string, vocabSize?: number): Tokenizer {
  const r = new ByteReader(bytes, file);
  const maxLen = r.i32('max_token_length');
  if (maxLen < 1) throw r.error('max_token_length', `${maxLen}, expected >= 1`, 0);
  // Each token takes at least 8 bytes: check the count fits before allocating for it.
  if (vocabSize !== undefined) r.need(`${vocabSize} tokens (8 bytes each at least)`, vocabSize * 8);
  const pieces: string[] = [];
  const scores: number[] = [];
  for (let id = 0; vocabSize === undefined ? r.remaining > 0 : id < vocabSize; id++) {
    scores.push(r.f32(`token ${id} score`));
    const lenAt = r.pos;
    const len = r.i32(`token ${id} length`);
    if (len < 0 || len > r.remaining)
      throw r.error(`token ${id} length`, `${len}, expected 0..${r.remaining} (bytes left in the file)`, lenAt);
    const bytesAt = r.pos;
    const raw = r.raw(`token ${id} bytes`, len);
    const nul = raw.indexOf(0);
    const text = decodeUtf8Strict(nul < 0 ? raw : raw.subarray(0, nul));
    if (text === null) throw r.error(`token ${id} bytes`, 'not valid UTF-8', bytesAt);
    pieces.push(text);
  }
  if (r.remaining > 0)
    throw r.error(
      'end of tokens',
      `${r.remaining} bytes left after ${vocabSize} tokens: the file holds more tokens than the model's vocab`,
    );
  return new Tokenizer(sentencePieceVocab(pieces, Float32Array.from(scores)));
}
