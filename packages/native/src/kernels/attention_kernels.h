// The attention kernels, written once over the wrapper layer's vector traits V (kernels/simd.h:
// Scalar, Avx2, Avx512, Neon) and instantiated by attention_ref.cc / _avx2.cc / _avx512.cc /
// _neon.cc, each compiled with its own ISA flags. Everything sits in an anonymous namespace
// so the three instantiations never merge at link time (they differ in ISA).
//
// Memory-minded shapes: every K / V row is read once per KV head and used by all g
// query heads of the group (heads in blocks of G in registers, rows in blocks of R);
// weighted V sums keep (G heads x C vectors) accumulators in registers per pass.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/kv_blocks.h"
#include "kernels/attention_int8_simd.h"
#include "kernels/simd.h"
#include "ops/attention.h"

namespace sparq {
namespace {

// Position j of a list or of the range first .. first + n - 1.
struct Positions {
  const int32_t* pos;
  int64_t first;
  int64_t operator[](size_t j) const { return pos ? pos[j] : first + static_cast<int64_t>(j); }
};

// row[r] = the row of position j0 + r of `base`, r < R. The test of pos.pos is made once per block:
// made per row (Positions::operator[]), GCC 12 vectorizes the loop into a masked load of pos.pos
// whose mask is all clear when pos.pos is null, and a masked load at an unmapped address costs an
// AMD core a microcode assist per block. Zen 5 VM, AVX2 f16 dense q·K (blocks of 8 rows), one
// thread, S = 16k, CPU time: 0.39 -> 0.13 ms per head (10.9 -> 31 GB/s).
template <int R, class P>
inline void rows_at(P* row, P base, size_t d, Positions pos, size_t j0) {
  if (pos.pos)
    for (int r = 0; r < R; r++) row[r] = row_at(base, static_cast<size_t>(pos.pos[j0 + r]), d);
  else
    for (int r = 0; r < R; r++) row[r] = row_at(base, static_cast<size_t>(pos.first) + j0 + r, d);
}

template <class V, class P>
inline typename V::F load_n(P p, size_t avail) {
  return avail >= static_cast<size_t>(V::W) ? row_load<V>(p) : row_load_part<V>(p, avail);
}

// Contiguous K / V rows are read as one long stream, prefetched kStreamAhead bytes ahead into L1
// on every vendor. Zen 5 VM (AMD family 26), one head of f16 rows, d 128, S = 16k, CPU time per
// call, one thread: a plain q·K row loop 31-38 -> 48 GB/s on AVX2 (4 KB ahead 41-43, 16 KB alike)
// and 40 -> 50 on AVX-512; pv_rows on AVX2 24-29 -> 35-43; two threads at once 23 -> 33 GB/s each
// (q·K) against a one-thread read probe of 41-47 GB/s. The gain depends on the core: an AMD VM
// reported as Zen 4 read slower with them (qk 29 -> 20 GB/s, pv 32 -> 26 at 4 KB); re-measure on
// a new CPU with bench/attention-ab.ts --cpu.
constexpr size_t kStreamAhead = 8192;
// SparQ step 1 reads r columns of K transposed at once: a shorter distance per column stream, into
// L2 (r streams of lines into L1 keep fewer misses in flight). Measured on the Zen 4 VM, one thread,
// 16 columns of f16 at S = 32k: about 7% faster than into L1 at 1 KB; 1-4 KB ahead alike.
constexpr size_t kColsAhead = 2048;
// Gathered rows (SparQ step 3, the baselines) are prefetched about kGatherAhead bytes ahead, into
// L2 (prefetch_row_l2), not L1: one core keeps more L2 misses than L1 misses in flight, and the
// time per gathered row is mostly latency, so short rows need more of them in flight. Measured on
// an AMD EPYC (Zen 4), one thread, 4096 random rows out of 32k per head: 512-byte rows 9.6 GB/s
// with L1 prefetches 8 rows ahead, 12.5 GB/s into L2 (4-16 KB ahead alike); 256-byte rows
// 11.1 GB/s 8 rows ahead, 16.2 GB/s 32 rows (8 KB) ahead.
constexpr size_t kGatherAhead = 8192;
template <class P>
inline size_t gather_ahead_rows(size_t d) {
  return std::max<size_t>(8, kGatherAhead / (RowTraits<P>::bytes(d)));
}
template <class P>
inline size_t stream_ahead_rows(size_t d) {
  const size_t row = RowTraits<P>::bytes(d);
  return row >= kStreamAhead ? 1 : (kStreamAhead + row - 1) / row;
}
// A GQA group's G heads give each row G times the arithmetic of one head. Past some work per row
// the core no longer runs far enough ahead for the hardware prefetchers to keep the stream at the
// read bandwidth, and the kernels prefetch contiguous rows kHeavyAhead bytes ahead into L2, on
// every vendor (measured on AMD only). Where a kernel keeps up without them they cost: the
// thresholds are where the Zen 4 VM measured gains. One thread, S = 32k, against a 30-35 GB/s
// read probe, best of 3-4, without -> with. qk from 4 fmas per vector of a row read (groups of 4+
// heads on 16 lanes, of 2+ on 8), d 128: AVX-512 groups of 4 f32 17.7 -> 28.2 GB/s, f16 14.8 ->
// 19.6, of 8 (tiles) f32 8.2 -> 13.4; AVX2 groups of 4 f32 17.6 -> 23.9; d 64: AVX-512 groups of 4
// f32 21 -> 28; groups of 2 on 16 lanes lose (d 128 f32 24 -> 17). pv from 32 fmas per row:
// AVX2 groups of 2, d 128: f32 25 -> 28, f16 22 -> 27; d 64 (16 fmas a row) they lose, f32 32 ->
// 26.7, f16 30 -> 25, as AVX-512 groups of 4 at d 64 do (one register pass: 33 -> 23); groups of
// 4+ see pv_rows. Into L1 at kStreamAhead: no faster.
constexpr size_t kHeavyAhead = 32768;  // 16-64 KB measured alike
template <class V, int G>
constexpr bool qk_prefetch_l2() {
  return G * 16 >= 4 * V::W;
}
template <class V, int G>
inline bool pv_prefetch_l2(size_t d) {
  return G * d >= 32 * static_cast<size_t>(V::W);
}
template <class P>
inline size_t heavy_ahead_rows(size_t d) {
  return std::max<size_t>(1, kHeavyAhead / (RowTraits<P>::bytes(d)));
}
// Rows converted on load (f16, q8_0, q4_0) on 8-lane vectors (AVX2): qk takes them in its own
// shapes (see qk_head_block; measured with f16, where the block types follow it).
template <class V, class P>
constexpr bool converted_on_8_lanes() {
  return V::W == 8 && RowTraits<P>::kConverted;
}

// Calls body(std::integral_constant<size_t, D>) with D = d for the common head sizes (Llama,
// Mistral, Qwen: 128; small models: 64), so that loops over a row unroll whole and each load
// instruction steps by whole rows, a stride the prefetchers follow; else with D = 0 (d at run time).
template <class Body>
inline void with_head_size(size_t d, Body body) {
  if (d == 128) body(std::integral_constant<size_t, 128>{});
  else if (d == 64) body(std::integral_constant<size_t, 64>{});
  else body(std::integral_constant<size_t, 0>{});
}

// scores[t * ld + j0 + r] = scale * (the lanes' sum of acc[r * G + t]) for R rows x G heads:
// W accumulators per batched reduction (V::reduce_add_w, lane k = flat accumulator k = r * G + t)
// when R * G is a multiple of W, else one by one.
template <class V, int R, int G>
inline void store_logits(float* scores, size_t ld, size_t j0, const typename V::F* acc, float scale) {
  using F = typename V::F;
  if constexpr ((R * G) % V::W == 0) {
    const F sv = V::set1(scale);
    for (int c = 0; c < R * G; c += V::W) {
      const F sums = V::mul(V::reduce_add_w(acc + c), sv);
      if constexpr (G == 1) {
        V::store(scores + j0 + c, sums);
      } else {
        float tmp[V::W];
        V::store(tmp, sums);
        for (int l = 0; l < V::W; l++) scores[((c + l) % G) * ld + j0 + (c + l) / G] = tmp[l];
      }
    }
  } else {
    for (int r = 0; r < R; r++)
      for (int t = 0; t < G; t++) scores[t * ld + j0 + r] = V::reduce_add(acc[r * G + t]) * scale;
  }
}

// ---- q · K rows: R rows x G heads per block ----
// Logits are reduced W accumulators at a time (V::reduce_add_w, lane k = flat
// accumulator k = r * G + t): a per-accumulator horizontal sum would cost more
// than the FMAs themselves for d = 128 and keep the core from keeping up with the
// memory stream. Blocks whose R * G is not a multiple of W (row tails) reduce one by one.
// `Resident`: the rows are in L1 (a tile, see qk_tiles), so the loads, not the prefetchers, set the pace.
// Inlined into qk_run's loop over blocks, which (like pv_pass) is not inlined further: inlined into
// qk / pv, GCC 12 made the dense decode loop about 20% slower (f32, S = 32k, one thread, 25 against
// 32 ms per step on the Zen 4 VM).
template <class V, class P, int R, int G, bool Resident>
__attribute__((always_inline)) inline void qk_block(float* scores, size_t ld, P k, size_t d, Positions pos, size_t j0, const float* q,
                                                    float scale) {
  using F = typename V::F;
  F acc[R * G];
  P row[R];
  rows_at<R>(row, k, d, pos, j0);
  for (int r = 0; r < R; r++)
    for (int t = 0; t < G; t++) acc[r * G + t] = V::zero();
  const size_t full = d - d % V::W;  // whole vectors; a partial one (d % W lanes) after them
  if constexpr (Resident) {
    // Rows in L1: all R at once, one vector of each per step (R + G loads per R * G fmas).
    // The loops are unrolled whole: an accumulator array indexed by a loop counter would live on the stack.
    auto step = [&](size_t i, auto load) {
      F qv[G];
#pragma GCC unroll 16
      for (int t = 0; t < G; t++) qv[t] = load(q + t * d + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        const F x = load(row[r] + i);
#pragma GCC unroll 16
        for (int t = 0; t < G; t++) acc[r * G + t] = V::fma(x, qv[t], acc[r * G + t]);
      }
    };
    for (size_t i = 0; i < full; i += V::W) step(i, [](auto x) { return row_load<V>(x); });
    if (full < d) step(full, [&](auto x) { return row_load_part<V>(x, d - full); });
  } else {
    // Rows from memory: one whole row after the other, its vectors' fmas in K chains per head: two
    // for one head (one chain of 8 dependent fmas a row left f32 qk at 12 GB/s, four measured 19),
    // one when the group's heads give independent fmas, except two for groups of 2 over f32 rows
    // (AVX-512 24 -> 28 GB/s, AVX2 25 -> 26.5; over f16 rows two measured slower, 30.5 -> 23).
    // With the usual head sizes the loop over a row's vectors is unrolled whole, so each load
    // instruction steps by whole rows, a stride the prefetchers follow. Measured on Zen 4, one thread, S = 32k, against a 31 GB/s read probe
    // (best of 8): f32 16.5 -> 22 GB/s, f16 19 -> 31.5; GQA groups of 2: 10 -> 27 (f32), 16 -> 31
    // (f16); of 4: 13 -> 18, 11 -> 15. Before: sub-blocks of 4 rows interleaved vector by vector
    // over a loop of runtime length, with software prefetches (without them it was slower still).
    constexpr int K = G >= 3 || (G == 2 && RowTraits<P>::kConverted) ? 1 : 2;
    auto rows = [&](auto dc) {
      constexpr size_t DC = decltype(dc)::value;
      const size_t dd = DC ? DC : d, whole = dd - dd % V::W;
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        F part[K][G];
#pragma GCC unroll 16
        for (int c = 0; c < K; c++)
#pragma GCC unroll 16
          for (int t = 0; t < G; t++) part[c][t] = V::zero();
        size_t i = 0;
#pragma GCC unroll 16
        for (; i + K * V::W <= whole; i += K * V::W) {
#pragma GCC unroll 16
          for (int c = 0; c < K; c++) {
            const F x = row_load<V>(row[r] + (i + c * V::W));
#pragma GCC unroll 16
            for (int t = 0; t < G; t++) part[c][t] = V::fma(x, V::load(q + t * dd + i + c * V::W), part[c][t]);
          }
        }
#pragma GCC unroll 16
        for (; i < whole; i += V::W) {
          const F x = row_load<V>(row[r] + i);
#pragma GCC unroll 16
          for (int t = 0; t < G; t++) part[0][t] = V::fma(x, V::load(q + t * dd + i), part[0][t]);
        }
        if (i < dd) {
          const F x = row_load_part<V>(row[r] + i, dd - i);
#pragma GCC unroll 16
          for (int t = 0; t < G; t++) part[K - 1][t] = V::fma(x, V::load_part(q + t * dd + i, dd - i), part[K - 1][t]);
        }
#pragma GCC unroll 16
        for (int t = 0; t < G; t++) {
          F sum = part[0][t];
#pragma GCC unroll 16
          for (int c = 1; c < K; c++) sum = V::add(sum, part[c][t]);
          acc[r * G + t] = sum;
        }
      }
    };
    with_head_size(d, rows);
  }
  store_logits<V, R, G>(scores, ld, j0, acc, scale);
}

// The prefetches of q · K before its block of R rows from j (rows up to `known` may be read), `ahead` rows ahead.
// Gathered rows (SparQ step 3, baselines): the prefetcher cannot guess them; into L2, gather_ahead_rows
// ahead as pv's (kGatherAhead). Two blocks ahead (16 rows of 256 bytes on AVX2), SparQ's gathered q · K
// ran at about half pv's rate over the same rows.
// Contiguous rows: into L2 when `heavy` (kHeavyAhead), else L1 (kStreamAhead).
template <class V, class P, int R>
inline void qk_prefetch(P k, size_t d, Positions pos, size_t j, size_t known, bool heavy, size_t ahead) {
  if (pos.pos) {
    for (int r = 0; r < R && j + ahead + r < known; r++)
      V::prefetch_row_l2(row_address(row_at(k, static_cast<size_t>(pos.pos[j + ahead + r]), d)), RowTraits<P>::bytes(d));
  } else if (j + ahead + R <= known) {
    const void* next = row_address(row_at(k, static_cast<size_t>(pos[j + ahead]), d));
    if (heavy) V::prefetch_row_l2(next, R * RowTraits<P>::bytes(d));
    else V::prefetch_row(next, R * RowTraits<P>::bytes(d));
  }
}

// Blocks of R rows from j while they fit in n; returns the first row not done.
template <class V, class P, int R, int G, bool Resident>
__attribute__((noinline)) size_t qk_run(float* scores, size_t ld, P k, size_t d, Positions pos, size_t j, size_t n, size_t known,
                                        const float* q, float scale) {
  const bool heavy = !pos.pos && qk_prefetch_l2<V, G>();
  const size_t ahead = pos.pos ? gather_ahead_rows<P>(d) : heavy ? heavy_ahead_rows<P>(d) : stream_ahead_rows<P>(d);
  for (; j + R <= n; j += R) {
    qk_prefetch<V, P, R>(k, d, pos, j, known, heavy, ahead);
    qk_block<V, P, R, G, Resident>(scores, ld, k, d, pos, j, q, scale);
  }
  return j;
}

// One head over contiguous rows from memory (dense decode without GQA), 16-lane vectors and f16 rows
// on 8: a plain loop, a row per iteration with its own horizontal sum. qk_block's blocks of 16 rows
// were slower there: f32 22 -> 32 GB/s, f16 alike (31), one thread, S = 32k, Zen 4, against a 32 GB/s
// read probe. AVX2 f16 blocks of 8 rows: 26-27 GB/s against 36-38 for this loop (Zen 5, S = 16k, no
// prefetches). AVX2 f32 keeps the blocks (35 against 28 GB/s on Zen 4; not re-measured).
template <class V, class P>
__attribute__((noinline)) void qk_stream(float* scores, P k, size_t d, int64_t first, size_t n, size_t known, const float* q, float scale) {
  using F = typename V::F;
  const size_t ahead = stream_ahead_rows<P>(d);
  with_head_size(d, [&](auto dc) {
    constexpr size_t DC = decltype(dc)::value;
    const size_t dd = DC ? DC : d, whole = dd - dd % V::W;
    for (size_t j = 0; j < n; j++) {
      const P row = row_at(k, static_cast<size_t>(first) + j, dd);
      if (j + ahead < known) V::prefetch_row(row_address(row_at(row, ahead, dd)), RowTraits<P>::bytes(dd));  // see kStreamAhead
      F a = V::zero(), b = V::zero();
      size_t i = 0;
#pragma GCC unroll 16
      for (; i + 2 * V::W <= whole; i += 2 * V::W) {
        a = V::fma(row_load<V>(row + i), V::load(q + i), a);
        b = V::fma(row_load<V>(row + (i + V::W)), V::load(q + i + V::W), b);
      }
      if (i < whole) {
        a = V::fma(row_load<V>(row + i), V::load(q + i), a);
        i += V::W;
      }
      if (i < dd) b = V::fma(row_load_part<V>(row + i, dd - i), V::load_part(q + i, dd - i), b);
      scores[j] = V::reduce_add(V::add(a, b)) * scale;
    }
  });
}

// Rows up to `known` (>= n) may be prefetched: those of the next tile (see qk_tiles).
template <class V, class P, int G, bool Resident>
inline void qk_heads(float* scores, size_t ld, P k, size_t d, Positions pos, size_t n, size_t known, const float* q, float scale) {
  if constexpr (G == 1 && !Resident && (V::W == 16 || std::is_same_v<P, const uint16_t*>)) {
    if (!pos.pos) return qk_stream<V, P>(scores, k, d, pos.first, n, known, q, scale);
  }
  // R * G = max(W, G) accumulators: one batched reduction per block.
  constexpr int R = G >= V::W ? 1 : V::W / G;
  // Converted rows on 8-lane vectors: a block's rows at once also from memory (see qk_head_block).
  constexpr bool AllRows = Resident || (G >= 2 && converted_on_8_lanes<V, P>());
  const size_t j = qk_run<V, P, R, G, AllRows>(scores, ld, k, d, pos, 0, n, known, q, scale);
  qk_run<V, P, 1, G, AllRows>(scores, ld, k, d, pos, j, n, known, q, scale);
}

// With more heads than one block of registers holds (GQA groups of more than 4, or a prefill's
// block of tokens, see dense_prefill), the rows go in tiles of about kTileBytes: every head block
// reads a tile from L1, and each row comes from memory once, not once per head block.
constexpr size_t kTileBytes = 16384;
// Heads per block of registers in qk and pv; more heads than that take tiles.
constexpr size_t kHeadBlock = 4;
// qk over converted rows (f16, blocks) on 8-lane vectors (AVX2) takes blocks of 2 heads, each over all R rows of its
// block at once (the Resident shape) also when they come from memory; 4 heads take tiles. The
// fmas per row are the same, with fewer q reloads per converted row vector. Measured on the Zen 4
// VM, one thread, S = 32k, d 128, against a 32-35 GB/s read probe: groups of 2 heads 22 -> 30.5
// GB/s (one row after the other: 24.5, both with kHeavyAhead's prefetches), of 4 13 -> 17.5, of
// 8 6 -> 9. With f32 rows, or 16 lanes, the shape of one row after the other stays faster.
// Block rows (q8_0, q4_0) take blocks of 4 heads in that shape instead: their decode (widen,
// convert, scale: 3 instructions a vector) is then shared by 4 heads' fmas, not 2. AVX2, q8_0, one
// thread, S = 32k, d 128, on the shared 2-core VM (family 26), best of 25: groups of 4 0.58 ->
// 0.50 ms per KV head, of 8 1.18 -> 1.02 ms; with f16 rows blocks of 4 measured slower (groups of 8 0.69 -> 1.0).
template <class V, class P>
constexpr size_t qk_head_block() {
  return converted_on_8_lanes<V, P>() && !kBlockRows<P> ? 2 : kHeadBlock;
}
template <class P>
inline size_t tile_rows(size_t d) {
  return std::max<size_t>(16, kTileBytes / (RowTraits<P>::bytes(d)) / 16 * 16);  // whole blocks of up to 16 rows
}

// Calls body(at, j0, m) for the tiles of rows [j0, j0 + m) (positions `at`); one tile unless
// `tiles` (the heads take several blocks), and one empty call when n = 0 (pv still writes its zeros).
template <class P, class Body>
inline void for_each_tile(Positions pos, size_t n, size_t d, bool tiles, Body body) {
  const size_t tile = tiles ? tile_rows<P>(d) : std::max<size_t>(n, 1);
  size_t j0 = 0;
  do {
    body(Positions{pos.pos ? pos.pos + j0 : nullptr, pos.first + static_cast<int64_t>(j0)}, j0, std::min(tile, n - j0));
    j0 += tile;
  } while (j0 < n);
}

template <class V, class P, bool Resident>
void qk_tiles(float* scores, size_t ld, P k, size_t d, Positions pos, size_t n, const float* q, size_t g, float scale) {
  // Heads in blocks of 4 (see qk_head_block), 2, 1, each over the tile while it is in L1.
  for_each_tile<P>(pos, n, d, Resident, [&](Positions at, size_t j0, size_t m) {
    float* s = scores + j0;
    size_t t = 0;
    if constexpr (qk_head_block<V, P>() >= 4)
      for (; t + 4 <= g; t += 4) qk_heads<V, P, 4, Resident>(s + t * ld, ld, k, d, at, m, n - j0, q + t * d, scale);
    for (; t + 2 <= g; t += 2) qk_heads<V, P, 2, Resident>(s + t * ld, ld, k, d, at, m, n - j0, q + t * d, scale);
    for (; t < g; t++) qk_heads<V, P, 1, Resident>(s + t * ld, ld, k, d, at, m, n - j0, q + t * d, scale);
  });
}

template <class V, class P>
void qk_t(float* scores, size_t ld, P k, size_t d, Positions pos, size_t n, const float* q, size_t g, float scale) {
  if (g > qk_head_block<V, P>()) qk_tiles<V, P, true>(scores, ld, k, d, pos, n, q, g, scale);
  else qk_tiles<V, P, false>(scores, ld, k, d, pos, n, q, g, scale);
}

template <class V>
void qk(float* scores, size_t ld, const void* k, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n, const float* q,
        size_t g, float scale) {
  with_rows(type, k, [&](auto rows) { qk_t<V>(scores, ld, rows, d, Positions{pos, first}, n, q, g, scale); });
}

// ---- q · K over block rows in integers (QueryBlocks, attention_int8_simd.h) ----
// The reference's int8-key-scores.ts: per block, the exact int32 sum of the key's codes times the
// query's Q8_0 codes, scaled by dk dq in f32. Dense decode over q8_0 rows in f32 spends g multiply-
// adds per element (one per head of the group) after widening, converting and scaling it, and is
// bound by that arithmetic, not the memory, once g >= 4 (docs/kv-cache.md); the integer product
// takes 32 (AVX2) or 64 (VNNI) products per instruction from the codes as stored, and its f32 work
// is per block and head. Rows go as in qk_block from memory: one whole row after the other, each
// key block loaded and converted once for the G heads of a block (up to 8: GQA groups of 8 read
// each row once), R rows x G heads of f32 lanes reduced W at a time (store_logits).

// The heads t .. of q (the block's first head t).
inline QueryBlocks query_heads(const QueryBlocks& q, size_t t, size_t d) {
  return QueryBlocks{q.x + t * d, q.dq + t * d / 4, q.bias + t * d / 4};
}

template <class V, class B, int R, int G>
__attribute__((always_inline)) inline void qk_q8_block(float* scores, size_t ld, BlockPtr<B> k, size_t d, Positions pos, size_t j0,
                                                       const QueryBlocks& q, float scale) {
  using I = I8<V>;
  typename V::F acc[R * G];
  BlockPtr<B> at[R];
  rows_at<R>(at, k, d, pos, j0);
  auto rows = [&](auto dc) {
    constexpr size_t DC = decltype(dc)::value;
    const size_t dd = DC ? DC : d, blocks = dd / QK, lanes = dd / 4;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      const uint8_t* row = at[r].blk;
#pragma GCC unroll 16
      for (int t = 0; t < G; t++) acc[r * G + t] = V::zero();
#pragma GCC unroll 8
      for (size_t b = 0; b < blocks; b += I::kBlocks) {
        const bool two = I::kBlocks == 2 && b + 1 < blocks;
        const auto key = I::template key<B, G>(row + b * B::kBytes, two);
#pragma GCC unroll 16
        for (int t = 0; t < G; t++)
          acc[r * G + t] =
              I::template dot<B>(key, q.x + t * dd + b * QK, q.bias + t * lanes + b * 8, q.dq + t * lanes + b * 8, two, acc[r * G + t]);
      }
    }
  };
  with_head_size(d, rows);
  store_logits<V, R, G>(scores, ld, j0, acc, scale);
}

// Blocks of R rows from j while they fit in n, prefetched as qk_run's (qk_prefetch); returns the first row not done.
template <class V, class B, int R, int G>
__attribute__((noinline)) size_t qk_q8_run(float* scores, size_t ld, BlockPtr<B> k, size_t d, Positions pos, size_t j, size_t n,
                                           size_t known, const QueryBlocks& q, float scale) {
  const bool heavy = !pos.pos && qk_prefetch_l2<V, G>();
  using P = BlockPtr<B>;
  const size_t ahead = pos.pos ? gather_ahead_rows<P>(d) : heavy ? heavy_ahead_rows<P>(d) : stream_ahead_rows<P>(d);
  for (; j + R <= n; j += R) {
    qk_prefetch<V, BlockPtr<B>, R>(k, d, pos, j, known, heavy, ahead);
    qk_q8_block<V, B, R, G>(scores, ld, k, d, pos, j, q, scale);
  }
  return j;
}

template <class V, class B, int G>
inline void qk_q8_heads(float* scores, size_t ld, BlockPtr<B> k, size_t d, Positions pos, size_t n, size_t known, const QueryBlocks& q,
                        float scale) {
  constexpr int R = G >= V::W ? 1 : V::W / G;
  const size_t j = qk_q8_run<V, B, R, G>(scores, ld, k, d, pos, 0, n, known, q, scale);
  qk_q8_run<V, B, 1, G>(scores, ld, k, d, pos, j, n, known, q, scale);
}

// The portable loop (Scalar, NEON): per block the int32 sum, then acc += (dk dq) sum in f32.
template <class B>
void qk_q8_portable(float* scores, size_t ld, BlockPtr<B> k, size_t d, Positions pos, size_t n, const QueryBlocks& q, size_t g,
                    float scale) {
  const size_t blocks = d / QK, lanes = d / 4;
  for (size_t j = 0; j < n; j++) {
    const uint8_t* row = row_at(k, static_cast<size_t>(pos[j]), d).blk;
    for (size_t t = 0; t < g; t++) {
      float acc = 0;
      for (size_t b = 0; b < blocks; b++) {
        const uint8_t* blk = row + b * B::kBytes;
        int32_t isum = 0;
        for (size_t i = 0; i < QK; i++) isum += B::code(blk, i) * q.x[t * d + b * QK + i];
        acc += fp16_to_fp32_ref(load_u16(blk)) * q.dq[t * lanes + b * 8] * static_cast<float>(isum);
      }
      scores[t * ld + j] = acc * scale;
    }
  }
}

template <class V, class B>
void qk_q8_t(float* scores, size_t ld, BlockPtr<B> k, size_t d, Positions pos, size_t n, const QueryBlocks& q, size_t g, float scale) {
  if constexpr (!I8<V>::kSimd) {
    qk_q8_portable(scores, ld, k, d, pos, n, q, g, scale);
  } else {
    // Heads in blocks of 8, 4, 2, 1; more than 8 (a prefill's block of query rows) take tiles of rows from L1.
    for_each_tile<BlockPtr<B>>(pos, n, d, g > 8, [&](Positions at, size_t j0, size_t m) {
      float* s = scores + j0;
      size_t t = 0;
      for (; t + 8 <= g; t += 8) qk_q8_heads<V, B, 8>(s + t * ld, ld, k, d, at, m, n - j0, query_heads(q, t, d), scale);
      for (; t + 4 <= g; t += 4) qk_q8_heads<V, B, 4>(s + t * ld, ld, k, d, at, m, n - j0, query_heads(q, t, d), scale);
      for (; t + 2 <= g; t += 2) qk_q8_heads<V, B, 2>(s + t * ld, ld, k, d, at, m, n - j0, query_heads(q, t, d), scale);
      for (; t < g; t++) qk_q8_heads<V, B, 1>(s + t * ld, ld, k, d, at, m, n - j0, query_heads(q, t, d), scale);
    });
  }
}

template <class V>
void qk_q8(float* scores, size_t ld, const void* k, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n,
           const QueryBlocks& q, size_t g, float scale) {
  if constexpr (I8<V>::kRuntimeCheck) {
    // The AVX-512 table's kernel needs VNNI; an AVX-512 CPU without it takes the AVX2 one.
    if (!I8<V>::available()) return attn_kernels_avx2().qk_q8(scores, ld, k, type, d, pos, first, n, q, g, scale);
  }
  const auto* bytes = static_cast<const uint8_t*>(k);
  if (type == KvType::q8_0) qk_q8_t<V>(scores, ld, BlockPtr<Q8_0Rows>{bytes, 0}, d, Positions{pos, first}, n, q, g, scale);
  else qk_q8_t<V>(scores, ld, BlockPtr<Q4_0Rows>{bytes, 0}, d, Positions{pos, first}, n, q, g, scale);
}

// ---- weighted sum of V rows: G heads x C vectors of accumulators per pass over the rows ----
// One pass over rows [0, n) for the C vectors of output columns from i0; with `Full` all are
// whole vectors, else only `cols` columns are valid (masked loads read zeros past them).
// `add`: start from out's values (earlier rows' sums), else from zero. Only the first pass
// (i0 == 0) prefetches, whole rows. Rows up to `known` (>= n) may be prefetched: those of the next tile.
template <class V, class P, int G, int C, bool Full>
__attribute__((noinline)) void pv_pass(float* out, P v, size_t d, Positions pos, size_t n, size_t known, const float* p, size_t ldp,
                                       size_t i0, size_t cols, bool add) {
  using F = typename V::F;
  auto avail = [&](int c) {
    const size_t at = static_cast<size_t>(c) * V::W;
    return cols > at ? cols - at : 0;
  };
  // Gathered rows: the prefetcher cannot guess them (kGatherAhead); else see kHeavyAhead, kStreamAhead.
  const bool heavy = !pos.pos && pv_prefetch_l2<V, G>(d), l2 = pos.pos || heavy;
  const size_t ahead = pos.pos ? gather_ahead_rows<P>(d) : heavy ? heavy_ahead_rows<P>(d) : stream_ahead_rows<P>(d);
  const size_t prefetch_end = i0 == 0 ? known : 0;
  F acc[G][C];
#pragma GCC unroll 16
  for (int t = 0; t < G; t++)
#pragma GCC unroll 16
    for (int c = 0; c < C; c++) acc[t][c] = add ? load_n<V>(out + t * d + i0 + c * V::W, Full ? V::W : avail(c)) : V::zero();
  const size_t row_bytes = RowTraits<P>::bytes(d);
  for (size_t j = 0; j < n; j++) {
    const P row = row_at(v, static_cast<size_t>(pos[j]), d) + i0;
    if (j + ahead < prefetch_end) {
      const void* next = row_address(row_at(v, static_cast<size_t>(pos[j + ahead]), d));
      if (l2) V::prefetch_row_l2(next, row_bytes);
      else V::prefetch_row(next, row_bytes);
    }
    F w[G];
#pragma GCC unroll 16
    for (int t = 0; t < G; t++) w[t] = V::set1(p[t * ldp + j]);
#pragma GCC unroll 16
    for (int c = 0; c < C; c++) {
      if constexpr (kBlockRows<P> && G == 1 && Full) {
        // One head over block rows: the scale folded into the weight, once per block (see pv_rows).
        const P at = row + c * V::W;
        acc[0][c] = V::fma(V::mul(w[0], row_scale<V>(at)), row_codes<V>(at), acc[0][c]);
        continue;
      }
      const F x = Full ? row_load<V>(row + c * V::W) : row_load_part<V>(row + c * V::W, avail(c));
#pragma GCC unroll 16
      for (int t = 0; t < G; t++) acc[t][c] = V::fma(w[t], x, acc[t][c]);
    }
  }
  for (int t = 0; t < G; t++)
    for (int c = 0; c < C; c++) V::store_n(out + t * d + i0 + c * V::W, acc[t][c], Full ? V::W : avail(c));
}

// Columns [i0, d) in passes of C whole vectors while they fit, then C / 2, ... (at most one
// pass of each smaller width), then one partial vector: no per-vector bounds checks in the row loop.
template <class V, class P, int G, int C>
inline void pv_passes(float* out, P v, size_t d, Positions pos, size_t n, size_t known, const float* p, size_t ldp, size_t i0, bool add) {
  constexpr size_t step = static_cast<size_t>(C) * V::W;
  for (; i0 + step <= d; i0 += step) pv_pass<V, P, G, C, true>(out, v, d, pos, n, known, p, ldp, i0, step, add);
  if constexpr (C > 1) pv_passes<V, P, G, C / 2>(out, v, d, pos, n, known, p, ldp, i0, add);
  else if (i0 < d) pv_pass<V, P, G, 1, false>(out, v, d, pos, n, known, p, ldp, i0, d - i0, add);
}

// When G heads' sums of a row do not fit one pass of register accumulators (f32 or f16 d 128
// on AVX2, groups of 4 heads on AVX-512), they live in out (L1) instead: U rows at a time, each
// output vector is loaded, takes the U rows' fmas in row order and is stored back. Every row is
// read once, whole and in address order, where passes over L1-sized chunks of rows read each
// row's columns in several sweeps. The fma sequence per output element is a pass's, so the
// results are bit-identical. Measured on Zen 4, one thread, S = 32k, against a 32-36 GB/s read
// probe (best of 8, passes before -> rows): AVX2 one head f32 15.6 -> 33.6 GB/s, f16 16.3 -> 31.8;
// groups of 2 heads 14.7 -> 25.7 and 10.4 -> 22.6; of 4: 7.8 -> 13.3 and 7.1 -> 12.6; AVX-512
// groups of 4 f32 10.6 -> 15.8, f16 13.9 -> 12.6 (the one loss). Then with pv_prefetch_l2's
// prefetches and U (below), same setup, 30-34 GB/s probe, best of 6: AVX-512 groups of 4 f32
// 16 -> 28 GB/s, f16 12.3 -> 26, of 8 (tiles) 7.4 -> 22, 6 -> 13; AVX2 groups of 2 f32 24.6 ->
// 29, f16 23 -> 28-30, of 4 13.4 -> 26, 12.5 -> 21.6, of 8 6.4 -> 18, 6 -> 11.
// Rows up to `known` (>= n) may be prefetched; `add`: out holds the sums of earlier rows.
template <class V, class P, int G, bool Resident>
__attribute__((noinline)) void pv_rows(float* out, P v, size_t d, Positions pos, size_t n, size_t known, const float* p, size_t ldp,
                                       bool add) {
  using F = typename V::F;
  // Rows per step: f32 rows of one head or two: one (interleaving rows' addresses slowed the
  // stream: AVX2 G = 1 33 -> 14 GB/s with 2 rows). Else more rows share each sum's L1 round trip,
  // with the rows prefetched into L2 (pv_prefetch_l2) and f16 rows converted on load: 4 f16 rows
  // (AVX-512 groups of 4: 2 rows 13.5 GB/s, 3 24, 4 25; AVX2 13, 19, 21.6; groups of 2 on AVX2,
  // no prefetch, 16 -> 24 with 4); f32 groups of 4+ heads 2 rows from memory, 4 from a tile in L1
  // (groups of 4 with 2 rows against 4: AVX-512 27 against 22 GB/s, AVX2 26 against 23; groups of
  // 8, tiles: 15 against 22, 13 against 18). Zen 4 VM, one thread, S = 32k, d 128, 30-34 GB/s probe.
  // f16 rows of one head (AVX2 at d 128: the dense decode without GQA): 2 rows. Zen 5 VM, the 2-thread
  // decode with the builds' calls interleaved one by one (as bench/attention-ab.ts --interleave), S =
  // 16k / 32k, 8 runs each, geometric mean time against 4 rows: 2 rows 0.96 / 0.95 (faster in every
  // run; AVX-512 0.89 / 0.91); 1 row 1.02 / 0.98, slower in the runs whose probe read 70+ GB/s (4.2 ->
  // 4.9 ms) though on one thread over 4 KB pages it took pv from 0.85x to 1.0x the rate of q·K; 3 rows
  // between; two passes of 8 register vectors over 16 KB tiles of rows 0.96 / 0.98. Block rows keep 4
  // (q8_0 with 1 row alike). The loads and conversions bind what is left: AVX2 converts and multiplies
  // 8 lanes an instruction where AVX-512 takes 16 (from L2, one thread: q·K 53 against 75 GB/s).
  constexpr int U = !RowTraits<P>::kConverted ? (G >= 4 ? (Resident ? 4 : 2) : 1) : G == 1 && std::is_same_v<P, const uint16_t*> ? 2 : 4;
  if (!add)
    for (int t = 0; t < G; t++) std::memset(out + t * d, 0, d * sizeof(float));
  // Gathered rows: see kGatherAhead; else kHeavyAhead, kStreamAhead.
  const bool heavy = !pos.pos && pv_prefetch_l2<V, G>(d), l2 = pos.pos || heavy;
  const size_t ahead = pos.pos ? gather_ahead_rows<P>(d) : heavy ? heavy_ahead_rows<P>(d) : stream_ahead_rows<P>(d);
  const size_t row_bytes = RowTraits<P>::bytes(d);
  auto rows = [&](auto dc) {
    constexpr size_t DC = decltype(dc)::value;
    const size_t dd = DC ? DC : d, whole = dd - dd % V::W;
    auto group = [&](size_t j, auto m) {
      constexpr int M = decltype(m)::value;
      P row[M];
      F w[G][M];
      rows_at<M>(row, v, dd, pos, j);
#pragma GCC unroll 16
      for (int u = 0; u < M; u++) {
        if (j + u + ahead < known) {
          const void* next = row_address(row_at(v, static_cast<size_t>(pos[j + u + ahead]), dd));
          if (l2) V::prefetch_row_l2(next, row_bytes);
          else V::prefetch_row(next, row_bytes);
        }
#pragma GCC unroll 16
        for (int t = 0; t < G; t++) w[t][u] = V::set1(p[t * ldp + j + u]);
      }
      if constexpr (kBlockRows<P> && G == 1) {
        // One head over block rows (d a multiple of 32): each row's f16 scale is converted once per
        // block and folded into its weight, (w * d) * q for w * (d * q): one rounding more per term,
        // far inside the tolerances. Decoded per vector (row_load), the stores to out between
        // vectors made the compiler read and convert the scale again, and multiply, for every vector.
        // AVX2, q8_0, one thread, S = 32k, d 128, best of 25 on the shared VM: 0.23 -> 0.16 ms per
        // head. Groups keep the exact d * q, one product per vector shared by their heads: hoisting
        // the scales there spilled registers (AVX2 groups of 4: 0.41 -> 0.58 ms).
#pragma GCC unroll 4
        for (size_t b = 0; b < dd; b += QK) {
          F ws[M];
#pragma GCC unroll 16
          for (int u = 0; u < M; u++) ws[u] = V::mul(w[0][u], row_scale<V>(row[u] + b));
#pragma GCC unroll 4
          for (size_t i = b; i < b + QK; i += V::W) {
            float* o = out + i;
            F a = V::load(o);
#pragma GCC unroll 16
            for (int u = 0; u < M; u++) a = V::fma(ws[u], row_codes<V>(row[u] + i), a);
            V::store(o, a);
          }
        }
      } else {
        auto column = [&](size_t i, size_t avail) {
          F x[M];
#pragma GCC unroll 16
          for (int u = 0; u < M; u++) x[u] = load_n<V>(row[u] + i, avail);
#pragma GCC unroll 16
          for (int t = 0; t < G; t++) {
            float* o = out + t * dd + i;
            F a = load_n<V>(o, avail);
#pragma GCC unroll 16
            for (int u = 0; u < M; u++) a = V::fma(w[t][u], x[u], a);
            V::store_n(o, a, avail);
          }
        };
#pragma GCC unroll 16
        for (size_t i = 0; i < whole; i += V::W) column(i, V::W);
        if (whole < dd) column(whole, dd - whole);
      }
    };
    size_t j = 0;
    for (; j + U <= n; j += U) group(j, std::integral_constant<int, U>{});
    for (; j < n; j++) group(j, std::integral_constant<int, 1>{});
  };
  with_head_size(d, rows);
}

// One pass of register accumulators when the G heads' sums fit (whole vectors in one pass of
// C, C / 2, ... or a single partial vector), else pv_rows.
template <class V, class P, int G, bool Resident>
inline void pv_heads(float* out, P v, size_t d, Positions pos, size_t n, size_t known, const float* p, size_t ldp, bool add) {
  constexpr int C = V::kAccRegs / G > 0 ? V::kAccRegs / G : 1;
  const size_t vecs = d / V::W;
  const bool one_pass = d % V::W == 0 ? vecs <= static_cast<size_t>(C) && (vecs & (vecs - 1)) == 0 : vecs == 0;
  if (one_pass) pv_passes<V, P, G, C>(out, v, d, pos, n, known, p, ldp, 0, add);
  else pv_rows<V, P, G, Resident>(out, v, d, pos, n, known, p, ldp, add);
}

// Several head blocks (`Resident`): each tile of rows (for_each_tile) serves all of them from L1.
template <class V, class P, bool Resident>
void pv_tiles(float* out, P v, size_t d, Positions pos, size_t n, const float* p, size_t ldp, size_t g, bool add) {
  for_each_tile<P>(pos, n, d, Resident, [&](Positions at, size_t j0, size_t m) {
    const float* pt = p + j0;
    const bool more = add || j0 > 0;
    size_t t = 0;
    for (; t + 4 <= g; t += 4) pv_heads<V, P, 4, Resident>(out + t * d, v, d, at, m, n - j0, pt + t * ldp, ldp, more);
    for (; t + 2 <= g; t += 2) pv_heads<V, P, 2, Resident>(out + t * d, v, d, at, m, n - j0, pt + t * ldp, ldp, more);
    for (; t < g; t++) pv_heads<V, P, 1, Resident>(out + t * d, v, d, at, m, n - j0, pt + t * ldp, ldp, more);
  });
}

template <class V, class P>
void pv_t(float* out, P v, size_t d, Positions pos, size_t n, const float* p, size_t ldp, size_t g, bool add) {
  if (g > kHeadBlock) pv_tiles<V, P, true>(out, v, d, pos, n, p, ldp, g, add);
  else pv_tiles<V, P, false>(out, v, d, pos, n, p, ldp, g, add);
}

template <class V>
void pv(float* out, const void* v, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n, const float* p, size_t ldp, size_t g,
        bool add) {
  with_rows(type, v, [&](auto rows) { pv_t<V>(out, rows, d, Positions{pos, first}, n, p, ldp, g, add); });
}

// ---- SparQ step 1: approximate logits over the r components i1 ----
// Both layouts sum the components in i1's order with one fma per component, so the
// K-transposed and the gathered (single-k) paths give bit-identical logits.
// A `Load` gives component i1[c] of positions j .. j + W - 1: load(c, j) when all W are valid,
// load.part(c, j) for the last vector (lanes at n and past read as zero); load.prefetch(c, j, m) is
// told of each block of m positions before it is read.
// Each head's sums are divided by its tau (in f64, as the reference divides) and their max is
// kept while they are still in registers: step 1 waits on memory, so this costs no extra pass
// over the logits (perf, S = 32k f16, one thread: the separate division and max passes took
// about a third as long as the column reads themselves).
template <class V, int G, int U, bool Tail, class Load>
inline void cols_block(float* logits, size_t ld, size_t j, size_t n, size_t r, const float* qs, const double* tau, typename V::F* mx,
                       const Load& load) {
  using F = typename V::F;
  F acc[G][U];
  for (int t = 0; t < G; t++)
    for (int u = 0; u < U; u++) acc[t][u] = V::zero();
  for (size_t c = 0; c < r; c++) {
    load.prefetch(c, j, U * V::W);
    F x[U];
    // Whole vectors load unchecked: a bounds test per load kept GCC from holding x and acc in registers (AVX2).
    for (int u = 0; u < U; u++) x[u] = Tail ? load.part(c, j + u * V::W) : load(c, j + u * V::W);
    for (int t = 0; t < G; t++) {
      const F qv = V::set1(qs[t * r + c]);
      for (int u = 0; u < U; u++) acc[t][u] = V::fma(qv, x[u], acc[t][u]);
    }
  }
  for (int t = 0; t < G; t++)
    for (int u = 0; u < U; u++) {
      const size_t jj = j + u * V::W;
      const F y = V::div_f64(acc[t][u], tau[t]);
      if constexpr (Tail) {
        // Lanes up to n only; NaN skipped as below.
        if (jj >= n) continue;
        float* out = logits + t * ld + jj;
        V::store_n(out, y, n - jj);
        float m = V::reduce_max(mx[t]);
        for (size_t l = 0; l < n - jj && l < static_cast<size_t>(V::W); l++) m = out[l] > m ? out[l] : m;
        mx[t] = V::set1(m);
      } else {
        V::store(logits + t * ld + jj, y);
        mx[t] = V::max(y, mx[t]);  // max(new, running): a NaN logit yields the running max (skipped)
      }
    }
}

template <class V, int G, class Load>
inline void cols_heads(float* logits, size_t ld, size_t n, size_t r, const float* qs, const double* tau, float* mx, const Load& load) {
  constexpr int U = G >= 4 ? 1 : 4 / G;
  typename V::F m[G];
  for (int t = 0; t < G; t++) m[t] = V::set1(-INFINITY);
  size_t j = 0;
  for (; j + U * V::W <= n; j += U * V::W) cols_block<V, G, U, false>(logits, ld, j, n, r, qs, tau, m, load);
  // Tail: partial vectors; the loader zero-fills lanes past n, the same arithmetic per lane.
  for (; j < n; j += V::W) cols_block<V, G, 1, true>(logits, ld, j, n, r, qs, tau, m, load);
  for (int t = 0; t < G; t++) mx[t] = V::reduce_max(m[t]);
}

template <class V, class Load>
inline void cols_groups(float* logits, size_t ld, size_t n, size_t r, const float* qs, size_t g, const double* tau, float* mx,
                        const Load& load) {
  size_t t = 0;
  for (; t + 4 <= g; t += 4) cols_heads<V, 4>(logits + t * ld, ld, n, r, qs + t * r, tau + t, mx + t, load);
  for (; t + 2 <= g; t += 2) cols_heads<V, 2>(logits + t * ld, ld, n, r, qs + t * r, tau + t, mx + t, load);
  for (; t < g; t++) cols_heads<V, 1>(logits + t * ld, ld, n, r, qs + t * r, tau + t, mx + t, load);
}

// The r float columns of K transposed (valid positions from `first`), each a stream prefetched
// kColsAhead bytes ahead, the lines of a block's loads at once. The columns' addresses are
// computed once per call, not per load.
template <class V, class T>
struct ColumnLoads {
  static constexpr size_t kAhead = kColsAhead / sizeof(T);
  const T* const* col;
  size_t n;
  typename V::F operator()(size_t c, size_t j) const { return V::load(col[c] + j); }
  typename V::F part(size_t c, size_t j) const { return load_n<V>(col[c] + j, n - j); }
  void prefetch(size_t c, size_t j, size_t count) const {
    for (size_t b = 0; b < count * sizeof(T) && j + kAhead < n; b += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(col[c] + j + kAhead) + b, 0, 2);  // prefetcht1: L2
  }
};

// Integer columns of Bits-bit codes (kv_blocks.h), from position 0: position p reads as
// scale[p / KT_BLOCK] * code, exact in f32 (an f16 times at most 7 bits), so the sums are the
// reference's. Whole vectors start at multiples of W (code_cols splits off an unaligned start):
// their W codes share one scale and begin on a byte.
template <class V, int Bits>
struct CodeColumnLoads {
  static constexpr size_t kAhead = kColsAhead * 8 / Bits;  // positions
  const uint8_t* const* col;
  const uint16_t* const* scale;
  int64_t first;
  size_t n;
  typename V::F operator()(size_t c, size_t j) const {
    if constexpr (V::W == 1) {
      return part(c, j);
    } else {
      constexpr float qmax = static_cast<float>((1 << (Bits - 1)) - 1);
      const size_t p = static_cast<size_t>(first) + j;
      typename V::F codes;
      if constexpr (Bits == 8) codes = V::from_i8(col[c] + p);
      else codes = V::sub(V::template from_packed<Bits>(col[c] + p * Bits / 8), V::set1(qmax));
      return V::mul(codes, V::set1_half(scale[c][p / KT_BLOCK]));
    }
  }
  typename V::F part(size_t c, size_t j) const {
    float x[V::W] = {};
    for (size_t l = 0; l < n - j && l < static_cast<size_t>(V::W); l++) {
      const int64_t p = first + static_cast<int64_t>(j + l);
      x[l] = fp16_to_fp32_ref(scale[c][p / KT_BLOCK]) * static_cast<float>(kt_code_at(col[c], p, Bits));
    }
    return V::load(x);
  }
  void prefetch(size_t c, size_t j, size_t count) const {
    const size_t at = (static_cast<size_t>(first) + j + kAhead) * Bits / 8;
    for (size_t b = 0; b < count * Bits / 8 && j + kAhead < n; b += 64) __builtin_prefetch(col[c] + at + b, 0, 2);  // prefetcht1: L2
  }
};

template <class V, class T>
void float_cols(float* logits, size_t ld, const KtHead& kt, const int32_t* i1, size_t r, int64_t first, size_t n, const float* qs, size_t g,
                const double* tau, float* mx) {
  std::vector<const T*> cols(r);  // one allocation per KV head, beside r column streams of n positions
  for (size_t c = 0; c < r; c++)
    cols[c] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(kt.codes) + static_cast<size_t>(i1[c]) * kt.col_bytes) + first;
  cols_groups<V>(logits, ld, n, r, qs, g, tau, mx, ColumnLoads<V, T>{cols.data(), n});
}

template <class V, int Bits>
void code_cols(float* logits, size_t ld, const KtHead& kt, const int32_t* i1, size_t r, int64_t first, size_t n, const float* qs, size_t g,
               const double* tau, float* mx) {
  std::vector<const uint8_t*> cols(r);
  std::vector<const uint16_t*> scales(r);
  for (size_t c = 0; c < r; c++) {
    cols[c] = static_cast<const uint8_t*>(kt.codes) + static_cast<size_t>(i1[c]) * kt.col_bytes;
    scales[c] = kt.scales + static_cast<size_t>(i1[c]) * kt.scale_blocks;
  }
  // Left padding can start the valid positions off a multiple of W: those first ones go alone, by parts.
  const size_t head = std::min(n, (V::W - static_cast<size_t>(first) % V::W) % V::W);
  std::vector<float> head_mx(g, -INFINITY);
  if (head > 0)
    cols_groups<V>(logits, ld, head, r, qs, g, tau, head_mx.data(), CodeColumnLoads<V, Bits>{cols.data(), scales.data(), first, head});
  cols_groups<V>(logits + head, ld, n - head, r, qs, g, tau, mx,
                 CodeColumnLoads<V, Bits>{cols.data(), scales.data(), first + static_cast<int64_t>(head), n - head});
  for (size_t t = 0; t < g; t++) mx[t] = std::max(mx[t], head_mx[t]);
}

template <class V>
void qk_cols(float* logits, size_t ld, const KtHead& kt, const int32_t* i1, size_t r, int64_t first, size_t n, const float* qs, size_t g,
             const double* tau, float* mx) {
  // The column kernel of each KtType, indexed by it (kv_blocks.h's KT_BITS order).
  using Cols =
      void (*)(float*, size_t, const KtHead&, const int32_t*, size_t, int64_t, size_t, const float*, size_t, const double*, float*);
  static constexpr Cols COLS[] = {float_cols<V, float>, float_cols<V, uint16_t>, code_cols<V, 8>, code_cols<V, 4>, code_cols<V, 2>};
  static_assert(sizeof(COLS) / sizeof(COLS[0]) == sizeof(KT_BITS) / sizeof(KT_BITS[0]), "one column kernel per KtType");
  COLS[static_cast<int>(kt.type)](logits, ld, kt, i1, r, first, n, qs, g, tau, mx);
}

// The same components read from K's rows (the single-k layout): a gather per vector, no prefetch.
template <class V, class P>
struct RowComponentLoads {
  P rows;
  size_t d;
  const int32_t* i1;
  size_t n;
  typename V::F operator()(size_t c, size_t j) const { return row_gather<V>(row_at(rows, j, d) + static_cast<size_t>(i1[c]), d, V::W); }
  typename V::F part(size_t c, size_t j) const { return row_gather<V>(row_at(rows, j, d) + static_cast<size_t>(i1[c]), d, n - j); }
  void prefetch(size_t, size_t, size_t) const {}
};

template <class V>
void qk_gather(float* logits, size_t ld, const void* k, KvType type, size_t d, const int32_t* i1, size_t r, int64_t first, size_t n,
               const float* qs, size_t g, const double* tau, float* mx) {
  with_rows(type, k, [&](auto rows) {
    using P = decltype(rows);
    cols_groups<V>(logits, ld, n, r, qs, g, tau, mx, RowComponentLoads<V, P>{row_at(rows, static_cast<size_t>(first), d), d, i1, n});
  });
}

// ---- row-wise helpers of the softmax and the selection ----
template <class V>
float vmax(const float* x, size_t n) {
  typename V::F m = V::set1(-INFINITY);
  size_t j = 0;
  for (; j + V::W <= n; j += V::W) m = V::max(m, V::load(x + j));
  float best = V::reduce_max(m);
  for (; j < n; j++) best = x[j] > best ? x[j] : best;
  // A NaN logit is skipped here but still poisons the row: exp(NaN - max) enters the sum.
  return best;
}

template <class V>
double exp_sum(float* x, size_t n, float m, bool store) {
  const typename V::F mv = V::set1(m);
  typename V::D s0 = V::dzero(), s1 = V::dzero();
  size_t j = 0;
  for (; j + 2 * V::W <= n; j += 2 * V::W) {
    const auto e0 = V::exp(V::sub(V::load(x + j), mv));
    const auto e1 = V::exp(V::sub(V::load(x + j + V::W), mv));
    if (store) {
      V::store(x + j, e0);
      V::store(x + j + V::W, e1);
    }
    s0 = V::dadd(s0, e0);
    s1 = V::dadd(s1, e1);
  }
  for (; j < n; j += V::W) {
    const auto e = V::exp(V::sub(V::load_part(x + j, n - j), mv));
    if (store) V::store_n(x + j, e, n - j);
    s0 = V::dadd(s0, V::mask_tail(e, n - j));
  }
  return V::dreduce(s0) + V::dreduce(s1);
}

template <class V>
void scale(float* y, const float* x, size_t n, float s, bool accumulate) {
  const typename V::F sv = V::set1(s);
  size_t j = 0;
  if (accumulate) {
    for (; j + V::W <= n; j += V::W) V::store(y + j, V::fma(V::load(x + j), sv, V::load(y + j)));
    for (; j < n; j++) y[j] += x[j] * s;
  } else {
    for (; j + V::W <= n; j += V::W) V::store(y + j, V::mul(V::load(x + j), sv));
    for (; j < n; j++) y[j] = x[j] * s;
  }
}

template <class V>
size_t filter_ge(const float* x, size_t n, float t, int32_t* out, size_t cap, int32_t base) {
  const typename V::F tv = V::set1(t);
  size_t count = 0;
  size_t j = 0;
  // One compare per vector. No branch on the mask: SparQ's thresholds keep a few percent of the
  // positions, scattered, so "empty or not" is unpredictable. store_lanes writes a whole vector,
  // the indices in its first popcount lanes; the next store overwrites the rest (out has
  // kFilterSlack entries of room past cap).
  for (; j + V::W <= n; j += V::W) {
    const uint32_t mask = V::ge_mask(V::load(x + j), tv);
    const size_t c = static_cast<size_t>(__builtin_popcount(mask));
    if (count + c > cap) return cap + 1;
    V::store_lanes(out + count, mask, base + static_cast<int32_t>(j));
    count += c;
  }
  for (; j < n; j++) {
    if (x[j] >= t) {
      if (count == cap) return cap + 1;
      out[count++] = base + static_cast<int32_t>(j);
    }
  }
  return count;
}

template <class V>
double sum(const float* x, size_t n) {
  typename V::F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  size_t j = 0;
  for (; j + 4 * V::W <= n; j += 4 * V::W) {
    a0 = V::add(a0, V::load(x + j));
    a1 = V::add(a1, V::load(x + j + V::W));
    a2 = V::add(a2, V::load(x + j + 2 * V::W));
    a3 = V::add(a3, V::load(x + j + 3 * V::W));
  }
  double s = V::reduce_add(V::add(V::add(a0, a1), V::add(a2, a3)));
  for (; j < n; j++) s += x[j];
  return s;
}

// out = silu(gate) * up, silu(v) = v / (1 + e^-v) (the reference's ops/swiglu.ts). exp_ps takes
// arguments <= 0 only, so with e = e^-|v| and r = 1 / (1 + e) the sigmoid is r for v >= 0 and
// e^v / (1 + e^v) = e * r for v < 0: no overflow for either sign. out may be gate or up.
template <class V>
void swiglu(float* out, const float* gate, const float* up, size_t n) {
  using F = typename V::F;
  const F one = V::set1(1.f);
  for (size_t j = 0; j < n; j += V::W) {
    const F v = load_n<V>(gate + j, n - j);
    const F e = V::exp(V::min(v, V::sub(V::zero(), v)));
    const F r = V::div(one, V::add(one, e));
    const F sigmoid = V::select_sign(v, r, V::mul(e, r));
    V::store_n(out + j, V::mul(V::mul(v, sigmoid), load_n<V>(up + j, n - j)), n - j);
  }
}

template <class V>
void add(float* out, const float* a, const float* b, size_t n) {
  for (size_t j = 0; j < n; j += V::W) V::store_n(out + j, V::add(load_n<V>(a + j, n - j), load_n<V>(b + j, n - j)), n - j);
}

// Both comparisons are ordered: a NaN fails them, so it counts as outside. Four vectors a step,
// their masks or-ed (one branch per step: the scan is a read at the memory's speed); the lane is
// found again only in the step that has one.
template <class V>
size_t first_outside(const float* x, size_t n, float limit) {
  using F = typename V::F;
  const F hi = V::set1(limit), lo = V::set1(-limit);
  const auto outside = [&](size_t j) {
    const F v = V::load(x + j);
    return ~(V::ge_mask(hi, v) & V::ge_mask(v, lo)) & ((1u << V::W) - 1);  // W <= 16 lanes
  };
  size_t j = 0;
  for (; j + 4 * V::W <= n; j += 4 * V::W) {
    if ((outside(j) | outside(j + V::W) | outside(j + 2 * V::W) | outside(j + 3 * V::W)) == 0) continue;
    for (size_t k = j;; k += V::W)
      if (const uint32_t m = outside(k)) return k + static_cast<size_t>(__builtin_ctz(m));
  }
  for (; j < n; j++)
    if (!(x[j] <= limit && x[j] >= -limit)) return j;
  return n;
}

template <class V>
void to_f16(uint16_t* out, const float* x, size_t n) {
  for (size_t j = 0; j < n; j += V::W) V::store_f16(out + j, load_n<V>(x + j, n - j), n - j);
}

template <class V>
void from_f16(float* out, const uint16_t* x, size_t n) {
  for (size_t j = 0; j < n; j += V::W) V::store_n(out + j, load_n<V>(x + j, n - j), n - j);
}

template <class V>
AttnKernels make_kernels(const char* name) {
  return AttnKernels{name,     qk<V>,        qk_q8<V>, pv<V>,     qk_cols<V>,  qk_gather<V>, vmax<V>, exp_sum<V>,
                     scale<V>, filter_ge<V>, sum<V>,   to_f16<V>, from_f16<V>, swiglu<V>,    add<V>,  first_outside<V>};
}

}  // namespace
}  // namespace sparq
