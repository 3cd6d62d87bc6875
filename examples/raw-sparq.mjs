// A raw SparQ op on your own typed arrays, no model: one decode step over a KV
// cache of 4096 positions, SparQ against dense attention.
//   node raw-sparq.mjs
import { AttentionStats, KVCache, Tensor, selectBackend } from 'sparq';

const S = 4096; // cached positions
const nHeads = 8; // query heads
const nKvHeads = 2; // KV heads (grouped-query attention: 4 query heads per KV head)
const d = 64; // head dim

// A seeded generator, so every run sees the same numbers.
let seed = 1;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
const fill = (n) => Float32Array.from({ length: n }, random);

const engine = await selectBackend();
const cache = new KVCache({ nKvHeads, headDim: d, capacity: S }); // SparQ's layout: K stored twice
engine.kvAppend(
  cache,
  0,
  Tensor.f32([S, nKvHeads, d], fill(S * nKvHeads * d)),
  Tensor.f32([S, nKvHeads, d], fill(S * nKvHeads * d)),
);

const q = Tensor.f32([1, nHeads, d], fill(nHeads * d)); // one query token, batch 1
const dense = Tensor.zeros('f32', [1, nHeads, d]);
const sparq = Tensor.zeros('f32', [1, nHeads, d]);
const denseStats = new AttentionStats();
const sparqStats = new AttentionStats();
engine.attentionDecode(dense, q, cache, { stats: denseStats });
engine.sparqDecode(sparq, q, cache, { r: 16, k: 256, l: 64, reallocate: true }, { stats: sparqStats });

let err = 0;
let norm = 0;
for (let i = 0; i < dense.size; i++) {
  err += (sparq.data[i] - dense.data[i]) ** 2;
  norm += dense.data[i] ** 2;
}
console.log(
  `backend ${engine.name}: SparQ read ${sparqStats.total} elements, dense ${denseStats.total} (${(sparqStats.total / denseStats.total).toFixed(3)} of dense)`,
);
console.log(
  `relative L2 error of SparQ against dense: ${Math.sqrt(err / norm).toExponential(2)} (random keys are SparQ's worst case)`,
);
