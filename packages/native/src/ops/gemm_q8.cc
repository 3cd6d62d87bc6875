// The portable parts of the integer prefill product (gemm_q8.h): the crossovers, and the loop over
// panels and blocks of activation rows that the SIMD kernels share (the activation quantization and
// the panel decode are AVX2 code, gemm_q8_pack_avx2.cc).
#include "ops/gemm_q8.h"

#include <cstddef>
#include <cstdint>
#include <limits>

namespace sparq {

// Measured on a 2-core AMD EPYC (Zen 4), one thread, a 2048 x 4096 weight, CPU time of both kernels
// at n = 8, 16, .. 96 (`pnpm bench:gemm-crossover`, and with `--kernel avx2`): the first of those n
// where the blocked product was as fast (8 = GEMM_MIN_N: from there on). The K-quants' panel decode
// (their scales per sub-block) needs more rows to repay it; AVX2's blocked kernels gain less per row
// over their per-row ones than VNNI's. The VNNI K-quants' were measured again on a Zen 5 (load ~17) after
// tile_super, the folded offsets and the once-per-super-block scale decode (docs/int8-products.md):
// q4_k, q5_k 24 -> 16, q3_k, q6_k 32 -> 24. The crossovers are BLOCK_TRAITS' gemm_min_n columns.
// q4_k and q6_k, both layouts, were measured again on the Zen 5 (load 14-15, three rounds, n = 1, 2, 4,
// 6, 8, 12, 16, 24, 32, 40, 48, 64; docs/int8-products.md, "Crossovers per weight layout") after the
// per-row kernels took several rows per pass: over the file's layout VNNI q4_k 24, q6_k 48, AVX2
// q4_k 24, q6_k 40 (BLOCK_TRAITS' gemm_min_n); over the weights repacked at load (packed_min_n), which
// no call decodes, VNNI q4_k 8 (as fast at 6-8 rows, 1.6x faster at 12), q6_k 12, AVX2 q4_k 16, q6_k 12.
// Command: pnpm bench:gemm-crossover --types q4_k,q6_k --ns 1,2,4,6,8,12,16,24,32,40,48,64 [--kernel avx2]
// Once the packed kernels prefetched their panels (gemm_q8_prefetch_packed) and VNNI q6_k put its codes
// together per tile, a few rows streaming a model-sized weight from memory (14336 x 4096 q4_k, 4096 x
// 14336 and 32768 x 4096 q6_k; `pnpm exec tsx bench/packed-rows.ts`, docs/int8-products.md, "Packed
// from 2 rows") ran on the packed weights as fast as per row or faster from 2 rows on (2 threads), except
// AVX2 q6_k (its per-call unpack) below 8-12: VNNI q4_k and q6_k 2, AVX2 q4_k 2, q6_k 12.
int64_t gemm_q8_min_n(WeightType t, bool vnni, bool packed) {
  const BlockTraits& b = block_traits(t);
  if (packed) return vnni ? b.packed_min_n_vnni : b.packed_min_n_avx2;
  return vnni ? b.gemm_min_n_vnni : b.gemm_min_n_avx2;
}

void size_q8_acts(WeightType t, int64_t n, int64_t cols, Q8Acts& a) {
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * (cols / QK)));
  a.ds.resize(a.d.size());
  a.corr.resize(a.d.size());
  a.qs16.resize(gemm_q8_halves(t) ? a.d.size() : 0);
  a.qsum.resize(gemm_q8_super(t) ? a.d.size() : 0);
  a.corr16.resize(gemm_q8_fold_offset(t) ? 2 * a.d.size() : 0);
  a.qs32.resize(gemm_q8_packs(t) && gemm_q8_super(t) ? a.d.size() / 2 : 0);
}

void gemm_q8_panels(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                    uint8_t* scratch, int mr, Q8PanelKernel kernel, int32_t* sums, const uint8_t* packed) {
  constexpr int NR = GEMM_Q8_NR;
  const int64_t cols = a.cols, panel_bytes = gemm_q8_panel_bytes(t, cols), chunk_rows = gemm_q8_chunk_panels(t, cols) * NR;
  // 64-byte aligned panels inside the scratch buffer, one per 32 rows of the chunk starting at c0.
  uint8_t* base = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64;
  auto panel = [&](int64_t c0, int64_t r0) {
    uint8_t* u = base + (r0 - c0) / NR * panel_bytes;
    float* dw = reinterpret_cast<float*>(u + NR * cols);
    float* mw = dw + gemm_q8_steps(t, cols) * NR;
    int32_t* sc = reinterpret_cast<int32_t*>(mw + gemm_q8_steps(t, cols) * NR);
    return Q8Panel{u, dw, mw, sc, sc + cols / 16 * NR};
  };
  auto height = [&](int64_t r0) { return static_cast<int>(row_end - r0 < NR ? row_end - r0 : NR); };
  // Token blocks of about 256 KB of codes stay in L2 while every panel of the chunk passes.
  const int64_t block = (262144 / cols / mr > 1 ? 262144 / cols / mr : 1) * mr;
  for (int64_t c0 = row_begin; c0 < row_end; c0 += chunk_rows) {
    const int64_t c1 = row_end - c0 < chunk_rows ? row_end : c0 + chunk_rows;
    for (int64_t r0 = c0; r0 < c1; r0 += NR) {
      if (packed) gemm_q8_unpack_panel(t, packed + r0 / NR * (cols / QK_K) * gemm_q8_packed_super(t), cols, height(r0), panel(c0, r0));
      else gemm_q8_decode_panel(t, w, cols, r0, height(r0), panel(c0, r0));
    }
    for (int64_t tb = 0; tb < a.n; tb += block) {
      const int64_t tend = a.n - tb < block ? a.n : tb + block;
      for (int64_t r0 = c0; r0 < c1; r0 += NR) kernel(t, panel(c0, r0), a, tb, tend, rows, r0, height(r0), out, sums);
    }
  }
}

}  // namespace sparq
