/** `sparq eval`'s library: the accuracy comparisons of issue 14 on a real model. */
export * from './corpus.ts';
export * from './nll.ts';
export * from './run-model.ts';
export * from './budget.ts';
export * from './perplexity.ts';
export * from './greedy.ts';
export * from './attention-stats.ts';
export * from './sweep.ts';
export * from './needle.ts';
export * from './needle-run.ts';
