// Choosing a backend: which ones load here and why not, then the same greedy
// text on each, with its speed.
//   node choose-backend.mjs MODEL
import { formatBackendReport, loadBackends, loadModel } from 'sparq';

const path = process.argv[2];
if (!path) {
  console.error('usage: node choose-backend.mjs MODEL');
  process.exit(2);
}

const { available } = await loadBackends();
console.log(formatBackendReport());
for (const { name } of available) {
  const model = await loadModel(path, { backend: name });
  const result = await model.createSession().generate('Once upon a time', { maxTokens: 40, temperature: 0 }).collect();
  console.log(`${name}: ${result.decodeTokensPerSecond.toFixed(0)} tok/s: ${JSON.stringify(result.text.slice(0, 60))}`);
}
