// The integer prefill product (gemm_q8.h) on AVX-512 VNNI.
//
// Per call of a row range, 32 weight rows at a time: every 32-element sub-block
// of those rows is decoded once to unsigned codes u, its scale dw and minimum mw,
// into a panel (gemm_q8.h, gemm_q8.cc) laid out for vpdpbusd: dword k of the
// panel's rows is 32 rows x 4 bytes (row i's codes of columns 4k .. 4k + 3), two
// vectors. All panels of the range are decoded first (about 1.25 bytes per
// weight, in L3), then the activation rows go in blocks that stay in L2 past
// every panel, MR rows at a time, per sub-block: int32 lanes start from -off * sum q (the
// activation's correction), take 8 vpdpbusd (u unsigned x q signed, 4 products
// per lane each: |u q| <= 255 * 128, 32 of them fit int32 easily), and the f32
// accumulators add f32(isum) * (dw * dx) (+ mw * dx sum q). Each weight is
// decoded once per call and each activation code read once per 32 weight rows.
#include "avx512_headers.h"

#include <cstring>
#include <vector>

#include "gemm_q8.h"
#include "matvec_q8.h"

namespace sparq {
namespace {

constexpr int NR = GEMM_Q8_NR;  // weight rows per panel: two vectors of 16 int32 lanes
constexpr int MR = 6;   // activation rows per tile: 2 * 6 int32 + 2 * 6 f32 accumulators

// Activation rows [t0, t0 + M) by the panel's nr weight rows -> out (n, rows). With `sums` (tests:
// gemm_q8_vnni_sums), the int32 sub-block sums go there instead, (n, rows, cols / 32).
template <int M, bool MIN>
void tile(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t subs = a.cols / QK;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = f1[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < subs; ++sb) {
    __m512i i0[M], i1[M];
    for (int m = 0; m < M; ++m) i0[m] = i1[m] = _mm512_set1_epi32(a.corr[(t0 + m) * subs + sb]);
    const uint8_t* up = p.u + sb * 8 * NR * 4;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i w0 = _mm512_loadu_si512(up + k * NR * 4), w1 = _mm512_loadu_si512(up + k * NR * 4 + 64);
      for (int m = 0; m < M; ++m) {
        int32_t xq;
        std::memcpy(&xq, a.q.data() + (t0 + m) * a.cols + sb * QK + 4 * k, 4);
        const __m512i xb = _mm512_set1_epi32(xq);
        i0[m] = _mm512_dpbusd_epi32(i0[m], w0, xb);
        i1[m] = _mm512_dpbusd_epi32(i1[m], w1, xb);
      }
    }
    if (sums) {
      for (int m = 0; m < M; ++m) {
        alignas(64) int32_t lane[NR];
        _mm512_store_si512(lane, i0[m]);
        _mm512_store_si512(lane + 16, i1[m]);
        for (int i = 0; i < nr; ++i) sums[((t0 + m) * rows + r0 + i) * subs + sb] = lane[i];
      }
      continue;
    }
    const __m512 d0 = _mm512_loadu_ps(p.dw + sb * NR), d1 = _mm512_loadu_ps(p.dw + sb * NR + 16);
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + sb]);
      f0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[m]), _mm512_mul_ps(d0, dx), f0[m]);
      f1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[m]), _mm512_mul_ps(d1, dx), f1[m]);
    }
    if (MIN) {
      const __m512 m0 = _mm512_loadu_ps(p.mw + sb * NR), m1 = _mm512_loadu_ps(p.mw + sb * NR + 16);
      for (int m = 0; m < M; ++m) {
        const __m512 s = _mm512_set1_ps(a.ds[(t0 + m) * subs + sb]);
        f0[m] = _mm512_fmadd_ps(m0, s, f0[m]);
        f1[m] = _mm512_fmadd_ps(m1, s, f1[m]);
      }
    }
  }
  if (sums) return;
  const __mmask16 k0 = static_cast<__mmask16>(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const __mmask16 k1 = static_cast<__mmask16>(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  for (int m = 0; m < M; ++m) {
    float* o = out + (t0 + m) * rows + r0;
    _mm512_mask_storeu_ps(o, k0, f0[m]);
    _mm512_mask_storeu_ps(o + 16, k1, f1[m]);
  }
}

template <bool MIN, int M = MR>
void tiles(int m, const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) return tile<M, MIN>(p, a, t0, rows, r0, nr, out, sums);
    tiles<MIN, M - 1>(m, p, a, t0, rows, r0, nr, out, sums);
  }
}

// One panel by activation rows [t_begin, t_end), MR rows at a time (Q8PanelKernel).
void panel_vnni(WeightType t, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0, int nr, float* out,
                int32_t* sums) {
  const bool has_min = q8_has_min(t);
  for (int64_t t0 = t_begin; t0 < t_end; t0 += MR) {
    const int m = static_cast<int>(t_end - t0 < MR ? t_end - t0 : MR);
    if (has_min) tiles<true>(m, p, a, t0, rows, r0, nr, out, sums);
    else tiles<false>(m, p, a, t0, rows, r0, nr, out, sums);
  }
}

}  // namespace

void gemm_q8_vnni(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch) {
  gemm_q8_panels(t, w, a, rows, out, row_begin, row_end, scratch, MR, panel_vnni, nullptr);
}

void gemm_q8_vnni_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums) {
  std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_scratch_bytes(rows, a.cols)));
  gemm_q8_panels(t, w, a, rows, nullptr, 0, rows, scratch.data(), MR, panel_vnni, sums);
}

}  // namespace sparq
