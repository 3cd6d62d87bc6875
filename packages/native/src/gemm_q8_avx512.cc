// The integer prefill product (gemm_q8.h) on AVX-512 VNNI.
//
// Per call of a row range, 32 weight rows at a time: every 32-element sub-block
// of those rows is decoded once to unsigned codes u, its scale dw and minimum mw,
// into a panel (gemm_q8.h, gemm_q8_pack_avx2.cc) laid out for vpdpbusd: dword k of the
// panel's rows is 32 rows x 4 bytes (row i's codes of columns 4k .. 4k + 3), two
// vectors. The panels of the range are decoded about 2 MB at a time (1.25 bytes per
// weight, gemm_q8.cc), then the activation rows go in blocks that stay in L2 past
// each of those panels, MR rows at a time, per sub-block: int32 lanes start from -off * sum q (the
// activation's correction), take 8 vpdpbusd (u unsigned x q signed, 4 products
// per lane each: |u q| <= 255 * 128, 32 of them fit int32 easily), and the f32
// accumulators add f32(isum) * (dw * dx) (+ mw * dx sum q). q2_k, q3_k and q6_k (16-element
// half-blocks, gemm_q8_halves): each half-block's 4 vpdpbusd start from 0, vpmulld multiplies them by
// the half-block's integer scale and the two add up (|sc u q| sums within 2^26, exact), then the same
// f32 steps with one minimum per half-block. Each weight is decoded once per call and each activation
// code read once per 32 weight rows.
#include "avx512_headers.h"

#include <cstring>
#include <vector>

#include "gemm_q8.h"
#include "matvec_q8.h"

namespace sparq {
namespace {

constexpr int NR = GEMM_Q8_NR;  // weight rows per panel: two vectors of 16 int32 lanes
// Activation rows per tile: 2 * MR int32 + 2 * MR f32 accumulators, and with half-blocks (gemm_q8_halves)
// 2 * MR int32 half-block sums besides, within the 32 registers.
template <bool HALVES>
constexpr int MR = HALVES ? 4 : 6;

#define SPARQ_INLINE __attribute__((always_inline)) inline

// K steps of 4 columns (their dwords at up, the activation codes of row m at xq + m * cols) added
// into the int32 lanes i0, i1 (the panel's two vectors of rows).
template <int M, int K>
SPARQ_INLINE void dot_steps(const uint8_t* up, const int8_t* xq, int64_t cols, __m512i (&i0)[M], __m512i (&i1)[M]) {
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    const __m512i w0 = _mm512_loadu_si512(up + k * NR * 4), w1 = _mm512_loadu_si512(up + k * NR * 4 + 64);
    for (int m = 0; m < M; ++m) {
      int32_t xq4;
      std::memcpy(&xq4, xq + m * cols + 4 * k, 4);
      const __m512i xb = _mm512_set1_epi32(xq4);
      i0[m] = _mm512_dpbusd_epi32(i0[m], w0, xb);
      i1[m] = _mm512_dpbusd_epi32(i1[m], w1, xb);
    }
  }
}

// Tests: the int32 sums i0, i1 of activation rows t0 .. t0 + M by the panel's nr rows, as sub-block s
// of sums (n, rows, per_row).
template <int M>
void store_sums(const __m512i (&i0)[M], const __m512i (&i1)[M], int32_t* sums, int64_t t0, int64_t rows, int64_t r0, int nr, int64_t per_row, int64_t s) {
  for (int m = 0; m < M; ++m) {
    alignas(64) int32_t lane[NR];
    _mm512_store_si512(lane, i0[m]);
    _mm512_store_si512(lane + 16, i1[m]);
    for (int i = 0; i < nr; ++i) sums[((t0 + m) * rows + r0 + i) * per_row + s] = lane[i];
  }
}

// Activation rows [t0, t0 + M) by the panel's nr weight rows -> out (n, rows). With `sums` (tests:
// gemm_q8_vnni_sums), the int32 sub-block sums go there instead, (n, rows, cols / 32, or cols / 16 with HALVES).
template <int M, bool MIN, bool HALVES, bool SUMS>
void tile(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = f1[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < subs; ++sb) {
    __m512i i0[M], i1[M];  // the sub-block's int32 sums (HALVES: sc_0 (half 0's) + sc_1 (half 1's))
    const uint8_t* up = p.u + sb * 8 * NR * 4;
    const int8_t* xq = a.q.data() + t0 * cols + sb * QK;
    if constexpr (HALVES) {
      // Half-block h's int32 sums (from 0) into i0, i1 for h = 0, then into h0, h1, each times its integer scale sc_h.
      __m512i h0[M], h1[M];
      for (int m = 0; m < M; ++m) i0[m] = i1[m] = h0[m] = h1[m] = _mm512_setzero_si512();
      dot_steps<M, 4>(up, xq, cols, i0, i1);
      dot_steps<M, 4>(up + 4 * NR * 4, xq + 16, cols, h0, h1);
      if constexpr (SUMS) {
        store_sums<M>(i0, i1, sums, t0, rows, r0, nr, 2 * subs, 2 * sb);
        store_sums<M>(h0, h1, sums, t0, rows, r0, nr, 2 * subs, 2 * sb + 1);
        continue;
      }
      // sc_h in both int16 halves of its lane: the high one, sign-extended.
      const int32_t* sc = p.sc + 2 * sb * NR;
      const __m512i s00 = _mm512_srai_epi32(_mm512_loadu_si512(sc), 16), s01 = _mm512_srai_epi32(_mm512_loadu_si512(sc + 16), 16);
      const __m512i s10 = _mm512_srai_epi32(_mm512_loadu_si512(sc + NR), 16), s11 = _mm512_srai_epi32(_mm512_loadu_si512(sc + NR + 16), 16);
      for (int m = 0; m < M; ++m) {
        i0[m] = _mm512_add_epi32(_mm512_mullo_epi32(i0[m], s00), _mm512_mullo_epi32(h0[m], s10));
        i1[m] = _mm512_add_epi32(_mm512_mullo_epi32(i1[m], s01), _mm512_mullo_epi32(h1[m], s11));
      }
    } else {
      for (int m = 0; m < M; ++m) i0[m] = i1[m] = _mm512_set1_epi32(a.corr[(t0 + m) * subs + sb]);
      dot_steps<M, 8>(up, xq, cols, i0, i1);
      if constexpr (SUMS) {
        store_sums<M>(i0, i1, sums, t0, rows, r0, nr, subs, sb);
        continue;
      }
    }
    const __m512 d0 = _mm512_loadu_ps(p.dw + sb * NR), d1 = _mm512_loadu_ps(p.dw + sb * NR + 16);
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + sb]);
      f0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[m]), _mm512_mul_ps(d0, dx), f0[m]);
      f1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[m]), _mm512_mul_ps(d1, dx), f1[m]);
    }
    if (!MIN) continue;
    // One minimum per sub-block, or per half-block in order (against dx times its codes' sum).
    for (int h = 0; h < (HALVES ? 2 : 1); ++h) {
      const int64_t s = HALVES ? 2 * sb + h : sb;
      const __m512 m0 = _mm512_loadu_ps(p.mw + s * NR), m1 = _mm512_loadu_ps(p.mw + s * NR + 16);
      for (int m = 0; m < M; ++m) {
        const __m512 x = _mm512_set1_ps(HALVES ? a.ds16[(t0 + m) * 2 * subs + s] : a.ds[(t0 + m) * subs + s]);
        f0[m] = _mm512_fmadd_ps(m0, x, f0[m]);
        f1[m] = _mm512_fmadd_ps(m1, x, f1[m]);
      }
    }
  }
  if constexpr (SUMS) return;
  const __mmask16 k0 = static_cast<__mmask16>(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const __mmask16 k1 = static_cast<__mmask16>(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  for (int m = 0; m < M; ++m) {
    float* o = out + (t0 + m) * rows + r0;
    _mm512_mask_storeu_ps(o, k0, f0[m]);
    _mm512_mask_storeu_ps(o + 16, k1, f1[m]);
  }
}

template <bool MIN, bool HALVES, bool SUMS, int M = MR<HALVES>>
void tiles(int m, const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) return tile<M, MIN, HALVES, SUMS>(p, a, t0, rows, r0, nr, out, sums);
    tiles<MIN, HALVES, SUMS, M - 1>(m, p, a, t0, rows, r0, nr, out, sums);
  }
}

// One panel by activation rows [t_begin, t_end), MR rows at a time (Q8PanelKernel).
template <bool MIN, bool HALVES, bool SUMS>
void panel_vnni(WeightType, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0, int nr, float* out,
                int32_t* sums) {
  constexpr int mr = MR<HALVES>;
  for (int64_t t0 = t_begin; t0 < t_end; t0 += mr) tiles<MIN, HALVES, SUMS>(static_cast<int>(t_end - t0 < mr ? t_end - t0 : mr), p, a, t0, rows, r0, nr, out, sums);
}

// gemm_q8_vnni, or with SUMS its integer sums into `sums` (tile).
template <bool SUMS>
void run(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end, uint8_t* scratch,
         int32_t* sums) {
  auto panels = [&](int mr, Q8PanelKernel kernel) { gemm_q8_panels(t, w, a, rows, out, row_begin, row_end, scratch, mr, kernel, sums); };
  if (gemm_q8_halves(t)) return panels(MR<true>, panel_vnni<true, true, SUMS>);  // q2_k, q3_k, q6_k: all have minimums
  if (q8_has_min(t)) return panels(MR<false>, panel_vnni<true, false, SUMS>);
  panels(MR<false>, panel_vnni<false, false, SUMS>);
}

}  // namespace

void gemm_q8_vnni(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch) {
  run<false>(t, w, a, rows, out, row_begin, row_end, scratch, nullptr);
}

void gemm_q8_vnni_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums) {
  std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_scratch_bytes(t, rows, a.cols)));
  run<true>(t, w, a, rows, nullptr, 0, rows, scratch.data(), sums);
}

}  // namespace sparq
