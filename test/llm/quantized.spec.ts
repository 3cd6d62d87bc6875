/**
 * Quantized weights give sensible text. Measure: teacher-forced agreement,
 * i.e. feed the f32 greedy 200 tokens and count the positions where the
 * quantized model's argmax is the f32 token (free-running greedy text
 * diverges after the first divergence, so position-wise matching of free
 * text mostly measures where that happened).
 *
 * Measured on the reference backend: Q4_0 172/200 with the dequant path and
 * 171/200 with the int8 path (activations quantized to 8 bits per 32, the
 * runtime's default), INT4 (group 32) 180/200 and 181/200; free-running, the
 * first 20-27 tokens match on the dequant path ("Once upon a time, there was a
 * little girl named Lily. She loved to play"), and the test checks the opening
 * sentence on every path. Floor: 160/200 (80%). Why: at group 32 the spec.md
 * bounds matvec NMSE by 1e-2, so logits move by a few percent and argmax flips
 * only where f32's top-two margin is small; this 64-wide, 260K-parameter model
 * has many such positions, hence 10-14% flips. 80% leaves room for another
 * backend's rounding while a broken quantizer (wrong scale, swapped nibbles)
 * lands near chance (a few of 200).
 */
import { describe, expect, it } from 'vitest';
import { forEachBackend } from '../support/backends.ts';
import { greedy, lacking, stories, storiesMissing, teacherForced, GENERATE_OPS } from './support.ts';

const FLOOR = 160;
const describeStories = storiesMissing ? describe.skip : describe;

describeStories(`stories260K with quantized weights${storiesMissing ? ` skipped: ${storiesMissing}` : ''}`, () => {
  forEachBackend('quantized weights', (engine) => {
    // The f32 greedy tokens, computed once per backend.
    let f32Tokens: number[] | null = null;
    const f32Greedy = () => {
      if (!f32Tokens) {
        const f32 = stories(engine);
        f32Tokens = greedy(engine, f32.model, f32.tokenizer).tokens;
      }
      return f32Tokens;
    };
    const cases = [
      { weights: 'q4_0', path: 'dequant', ops: ['quantize'] },
      { weights: 'q4_0', path: 'int8', ops: ['quantize'] },
      { weights: 'int4', path: 'dequant', ops: ['quantizeInt4', 'matvecInt4', 'matmulInt4'] },
      { weights: 'int4', path: 'int8', ops: ['quantizeInt4', 'matvecInt4', 'matmulInt4'] },
    ] as const;
    for (const c of cases) {
      const skip = lacking(engine, [...GENERATE_OPS, ...c.ops]);
      (skip ? it.skip : it)(
        `${c.weights} (${c.path}): at least ${FLOOR}/200 greedy tokens agree with f32, teacher-forced${skip ? ` (skipped: ${skip})` : ''}`,
        () => {
          const reference = f32Greedy();
          const { model, tokenizer } = stories(engine, c.weights);
          expect(model.notes).toEqual(['blk.*.ffn_down.weight kept f32: 172 columns are not whole 32-element groups']);
          const same = teacherForced(engine, model, reference, c.path);
          console.log(`[${engine.name}] ${c.weights}/${c.path}: ${same}/200 teacher-forced tokens agree with f32`);
          expect(same).toBeGreaterThanOrEqual(FLOOR);
          // Free-running, the opening sentence survives quantization, on either path.
          const text = Buffer.from(greedy(engine, model, tokenizer, {}, 40, c.path).text).toString();
          expect(text.startsWith('Once upon a time, there was a little girl named Lily.')).toBe(true);
        },
      );
    }
  });
});
