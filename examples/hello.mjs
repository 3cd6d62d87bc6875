// Hello world: load a model, stream a story to stdout.
//   node hello.mjs path/to/model.bin   (a llama2.c checkpoint or a GGUF llama model)
import { loadModel } from 'sparq';

const path = process.argv[2];
if (!path) {
  console.error('usage: node hello.mjs MODEL');
  process.exit(2);
}

const model = await loadModel(path);
const session = model.createSession();
for await (const piece of session.generate('Once upon a time', { maxTokens: 60, temperature: 0 })) {
  process.stdout.write(piece);
}
process.stdout.write('\n');
console.error(`backend ${model.backend}: ${session.stats.attention.decodeSteps} decode steps`);
