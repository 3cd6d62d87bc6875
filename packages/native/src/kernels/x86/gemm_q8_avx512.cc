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
// accumulators add f32(isum) * (dw * dx) (+ mw * dx sum q); for q4_k, q5_k and iq4_xs dx waits for the
// end of the super-block (tile_super). q2_k, q3_k and q6_k (16-element half-blocks, gemm_q8_halves):
// each half-block's 4 vpdpbusd start from 0 (q3_k, q6_k: from their offset's correction), vpmulld
// multiplies them by the half-block's integer scale and the super-block's 16 add up in int32 (exact,
// gemm_q8.h), as do q2_k's integer minimums' products (vpdpwssd), before one f32 step per 256 columns.
// vpdpbusd issues on the two pipes that also run the FMAs, multiplies and vpmulld (Zen 5: 2 per cycle
// alone, a third fewer with 6 FMAs per 12), so the kernels keep those few per vpdpbusd. Each weight is
// decoded once per call and each activation code read once per 32 weight rows.
#include "kernels/x86/intrinsics.h"

#include <cstring>
#include <vector>

#include "ops/gemm_q8.h"
#include "ops/matvec_q8.h"

namespace sparq {
namespace {

constexpr int NR = GEMM_Q8_NR;  // weight rows per panel: two vectors of 16 int32 lanes
// Activation rows per tile: 2 * MR int32 accumulators and 2 * MR f32 ones (or, with half-blocks, int32
// super-block sums), two vectors of weight codes and a broadcast within the 32 registers.
constexpr int MR = 6;

#define SPARQ_INLINE __attribute__((always_inline)) inline

// One step of 4 columns: the two vectors of rows' codes w0, w1 by the 4 activation codes of row m at
// xk + m * cols, added into the int32 lanes i0, i1.
template <int M>
SPARQ_INLINE void dot_step(__m512i w0, __m512i w1, const int8_t* xk, int64_t cols, __m512i (&i0)[M], __m512i (&i1)[M]) {
  for (int m = 0; m < M; ++m) {
    int32_t x4;
    std::memcpy(&x4, xk + m * cols, 4);
    const __m512i xb = _mm512_set1_epi32(x4);
    i0[m] = _mm512_dpbusd_epi32(i0[m], w0, xb);
    i1[m] = _mm512_dpbusd_epi32(i1[m], w1, xb);
  }
}

// K steps of 4 columns (their dwords at up, the activation codes of row m at xq + m * cols) added
// into the int32 lanes i0, i1 (the panel's two vectors of rows).
template <int M, int K>
SPARQ_INLINE void dot_steps(const uint8_t* up, const int8_t* xq, int64_t cols, __m512i (&i0)[M], __m512i (&i1)[M]) {
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k)
    dot_step<M>(_mm512_loadu_si512(up + k * NR * 4), _mm512_loadu_si512(up + k * NR * 4 + 64), xq + 4 * k, cols, i0, i1);
}

// Tests: the int32 sums i0, i1 of activation rows t0 .. t0 + M by the panel's nr rows, as sub-block s
// of sums (n, rows, per_row).
template <int M>
void store_sums(const __m512i (&i0)[M], const __m512i (&i1)[M], int32_t* sums, int64_t t0, int64_t rows, int64_t r0, int nr,
                int64_t per_row, int64_t s) {
  for (int m = 0; m < M; ++m) {
    alignas(64) int32_t lane[NR];
    _mm512_store_si512(lane, i0[m]);
    _mm512_store_si512(lane + 16, i1[m]);
    for (int i = 0; i < nr; ++i) sums[((t0 + m) * rows + r0 + i) * per_row + s] = lane[i];
  }
}

// Stores the f32 sums f0, f1 of activation rows t0 .. t0 + M by the panel's nr weight rows into out (n, rows).
template <int M>
SPARQ_INLINE void store_out(const __m512 (&f0)[M], const __m512 (&f1)[M], float* out, int64_t t0, int64_t rows, int64_t r0, int nr) {
  const __mmask16 k0 = static_cast<__mmask16>(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const __mmask16 k1 = static_cast<__mmask16>(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  for (int m = 0; m < M; ++m) {
    float* o = out + (t0 + m) * rows + r0;
    _mm512_mask_storeu_ps(o, k0, f0[m]);
    _mm512_mask_storeu_ps(o + 16, k1, f1[m]);
  }
}

// One minimum per sub-block sb: f += mw x, x of activation row m at x[m * stride].
template <int M>
SPARQ_INLINE void add_minimums(const Q8Panel& p, int64_t sb, const float* x, int64_t stride, __m512 (&f0)[M], __m512 (&f1)[M]) {
  const __m512 m0 = _mm512_loadu_ps(p.mw + sb * NR), m1 = _mm512_loadu_ps(p.mw + sb * NR + 16);
  for (int m = 0; m < M; ++m) {
    const __m512 xm = _mm512_set1_ps(x[m * stride]);
    f0[m] = _mm512_fmadd_ps(m0, xm, f0[m]);
    f1[m] = _mm512_fmadd_ps(m1, xm, f1[m]);
  }
}

// Activation rows [t0, t0 + M) by the panel's nr weight rows -> out (n, rows), the types of 32-element
// sub-blocks. With `sums` (tests: gemm_q8_vnni_sums), the int32 sub-block sums go there instead, (n, rows, cols / 32).
template <int M, bool MIN, bool SUMS>
void tile(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = f1[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < subs; ++sb) {
    __m512i i0[M], i1[M];  // the sub-block's int32 sums
    const uint8_t* up = p.u + sb * 8 * NR * 4;
    const int8_t* xq = a.q.data() + t0 * cols + sb * QK;
    for (int m = 0; m < M; ++m) i0[m] = i1[m] = _mm512_set1_epi32(a.corr[(t0 + m) * subs + sb]);
    dot_steps<M, 8>(up, xq, cols, i0, i1);
    if constexpr (SUMS) {
      store_sums<M>(i0, i1, sums, t0, rows, r0, nr, subs, sb);
      continue;
    }
    const __m512 d0 = _mm512_loadu_ps(p.dw + sb * NR), d1 = _mm512_loadu_ps(p.dw + sb * NR + 16);
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + sb]);
      f0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[m]), _mm512_mul_ps(d0, dx), f0[m]);
      f1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[m]), _mm512_mul_ps(d1, dx), f1[m]);
    }
    if (MIN) add_minimums<M>(p, sb, a.ds.data() + t0 * subs + sb, subs, f0, f1);  // against dx times the codes' sum
  }
  if constexpr (!SUMS) store_out<M>(f0, f1, out, t0, rows, r0, nr);
}

// The same for q4_k, q5_k and iq4_xs (gemm_q8_super), whose activation step dx is one per super-block
// of 256 columns: per sub-block F += f32(isum) dw (+ mw f32(sum q)), one or two FMAs where tile takes a
// multiply and two, and per super-block f += F dx (gemm_q8.h). vpdpbusd shares its two pipes with the
// FMAs and multiplies on Zen 5, so the f32 steps set how close the tile gets to vpdpbusd's peak. The
// finished super-blocks' sums f wait in L1 (registers hold F and the int32 sums).
template <int M, bool MIN>
void tile_super(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out) {
  const int64_t cols = a.cols, subs = cols / QK;
  alignas(64) float f[M][NR] = {};
  for (int64_t S = 0; S < subs / 8; ++S) {
    __m512 F0[M], F1[M];
    for (int m = 0; m < M; ++m) F0[m] = F1[m] = _mm512_setzero_ps();
    for (int64_t sb = 8 * S; sb < 8 * S + 8; ++sb) {
      __m512i i0[M], i1[M];
      for (int m = 0; m < M; ++m) i0[m] = i1[m] = _mm512_set1_epi32(a.corr[(t0 + m) * subs + sb]);
      dot_steps<M, 8>(p.u + sb * 8 * NR * 4, a.q.data() + t0 * cols + sb * QK, cols, i0, i1);
      const __m512 d0 = _mm512_loadu_ps(p.dw + sb * NR), d1 = _mm512_loadu_ps(p.dw + sb * NR + 16);
      for (int m = 0; m < M; ++m) {
        F0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[m]), d0, F0[m]);
        F1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[m]), d1, F1[m]);
      }
      if (MIN) add_minimums<M>(p, sb, a.qsum.data() + t0 * subs + sb, subs, F0, F1);  // against the codes' sum
    }
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      _mm512_store_ps(f[m], _mm512_fmadd_ps(F0[m], dx, _mm512_load_ps(f[m])));
      _mm512_store_ps(f[m] + 16, _mm512_fmadd_ps(F1[m], dx, _mm512_load_ps(f[m] + 16)));
    }
  }
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = _mm512_load_ps(f[m]), f1[m] = _mm512_load_ps(f[m] + 16);
  store_out<M>(f0, f1, out, t0, rows, r0, nr);
}

// The same for q2_k, q3_k and q6_k (gemm_q8_halves), a super-block of 256 columns at a time: each
// half-block's 4 vpdpbusd start from 0 (q2_k) or from its codes' offset, -off sum q (q3_k and q6_k, whose
// minimums are that offset: c_h = sc_h, gemm_q8_fold_offset), and vpmulld multiplies them by the
// half-block's integer scale sc_h into the super-block's int32 sums I; for q2_k vpdpwssd adds its integer
// minimums' products c_h (sum q) into C; then f += f32(I) (d dx) (+ f32(C) (mm dx)) (gemm_q8.h). The
// finished super-blocks' sums f wait in L1, as in tile_super. With `sums`, the half-blocks' sums of u q, (n, rows, cols / 16).
template <int M, bool FOLD, bool SUMS>
void tile_halves(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  alignas(64) float f[M][NR] = {};
  for (int64_t S = 0; S < cols / QK_K; ++S) {
    __m512i I0[M], I1[M];
    for (int m = 0; m < M; ++m) I0[m] = I1[m] = _mm512_setzero_si512();
    for (int64_t hb = 16 * S; hb < 16 * S + 16; ++hb) {  // half-block hb of the row
      __m512i i0[M], i1[M];
      for (int m = 0; m < M; ++m)
        i0[m] = i1[m] = FOLD && !SUMS ? _mm512_set1_epi32(a.corr16[(t0 + m) * 2 * subs + hb]) : _mm512_setzero_si512();
      dot_steps<M, 4>(p.u + hb * 4 * NR * 4, a.q.data() + t0 * cols + 16 * hb, cols, i0, i1);
      if constexpr (SUMS) {
        store_sums<M>(i0, i1, sums, t0, rows, r0, nr, 2 * subs, hb);
        continue;
      }
      // sc_h in both int16 halves of its lane: the high one, sign-extended.
      const __m512i s0 = _mm512_srai_epi32(_mm512_loadu_si512(p.sc + hb * NR), 16),
                    s1 = _mm512_srai_epi32(_mm512_loadu_si512(p.sc + hb * NR + 16), 16);
      for (int m = 0; m < M; ++m) {
        I0[m] = _mm512_add_epi32(I0[m], _mm512_mullo_epi32(i0[m], s0));
        I1[m] = _mm512_add_epi32(I1[m], _mm512_mullo_epi32(i1[m], s1));
      }
    }
    if constexpr (SUMS) continue;
    const __m512 d0 = _mm512_loadu_ps(p.dw + S * NR), d1 = _mm512_loadu_ps(p.dw + S * NR + 16);
    __m512 g0[M], g1[M];  // the super-block's sums
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      g0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I0[m]), _mm512_mul_ps(d0, dx), _mm512_load_ps(f[m]));
      g1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I1[m]), _mm512_mul_ps(d1, dx), _mm512_load_ps(f[m] + 16));
    }
    if constexpr (!FOLD) {
      // The minimums' products, 2 M independent sums (one chain of vpdpwssd would wait on its latency).
      __m512i c0[M], c1[M];
      for (int m = 0; m < M; ++m) c0[m] = c1[m] = _mm512_setzero_si512();
      for (int64_t sb = 8 * S; sb < 8 * S + 8; ++sb) {
        const __m512i cm0 = _mm512_loadu_si512(p.cm + sb * NR), cm1 = _mm512_loadu_si512(p.cm + sb * NR + 16);
        for (int m = 0; m < M; ++m) {
          const __m512i qs = _mm512_set1_epi32(a.qs16[(t0 + m) * subs + sb]);
          c0[m] = _mm512_dpwssd_epi32(c0[m], cm0, qs);
          c1[m] = _mm512_dpwssd_epi32(c1[m], cm1, qs);
        }
      }
      const __m512 mm0 = _mm512_loadu_ps(p.mw + S * NR), mm1 = _mm512_loadu_ps(p.mw + S * NR + 16);
      for (int m = 0; m < M; ++m) {
        const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
        g0[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0[m]), _mm512_mul_ps(mm0, dx), g0[m]);
        g1[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c1[m]), _mm512_mul_ps(mm1, dx), g1[m]);
      }
    }
    for (int m = 0; m < M; ++m) _mm512_store_ps(f[m], g0[m]), _mm512_store_ps(f[m] + 16, g1[m]);
  }
  if constexpr (SUMS) return;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = _mm512_load_ps(f[m]), f1[m] = _mm512_load_ps(f[m] + 16);
  store_out<M>(f0, f1, out, t0, rows, r0, nr);
}

// The same for packed q4_k (gemm_q8.h, gemm_q8_packs): per sub-block s the int32 sums i of u q (8
// vpdpbusd per vector of rows, the codes unpacked from nibbles by a mask and a shift, which do not take
// vpdpbusd's pipes), then I += i sc_s (vpmulld); per super-block C = sum_s mn_s (sum q) (4 vpdpwssd on the
// minimums' int16 pairs), then f += f32(I) (d dx) and f += f32(C) (mm dx). Against tile_super, that is one
// vpmulld per sub-block where it took two FMAs, and no panel decode. With `sums`, the sub-blocks' i.
template <int M, bool SUMS>
void tile_packed(const uint8_t* pp, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  alignas(64) float f[M][NR] = {};
  for (int64_t S = 0; S < cols / QK_K; ++S, pp += gemm_q8_packed_super(WeightType::q4_k)) {
    __m512i I0[M], I1[M];
    for (int m = 0; m < M; ++m) I0[m] = I1[m] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const uint8_t* up = pp + 512 * s;
      const int8_t* xq = a.q.data() + t0 * cols + QK_K * S + QK * s;
      gemm_q8_prefetch_packed(pp, WeightType::q4_k, s, 8);
      __m512i i0[M], i1[M];
      for (int m = 0; m < M; ++m) i0[m] = i1[m] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {  // step pair j: columns 8j .. 8j + 3 in the low nibbles, 8j + 4 .. 8j + 7 in the high
        const __m512i p0 = _mm512_loadu_si512(up + 128 * j), p1 = _mm512_loadu_si512(up + 128 * j + 64);
        const __m512i w0 = _mm512_and_si512(p0, low4), w1 = _mm512_and_si512(p1, low4);
        const __m512i v0 = _mm512_and_si512(_mm512_srli_epi16(p0, 4), low4), v1 = _mm512_and_si512(_mm512_srli_epi16(p1, 4), low4);
        for (int m = 0; m < M; ++m) {
          int32_t lo, hi;
          std::memcpy(&lo, xq + m * cols + 8 * j, 4);
          std::memcpy(&hi, xq + m * cols + 8 * j + 4, 4);
          const __m512i xl = _mm512_set1_epi32(lo), xh = _mm512_set1_epi32(hi);
          i0[m] = _mm512_dpbusd_epi32(i0[m], w0, xl);
          i1[m] = _mm512_dpbusd_epi32(i1[m], w1, xl);
          i0[m] = _mm512_dpbusd_epi32(i0[m], v0, xh);
          i1[m] = _mm512_dpbusd_epi32(i1[m], v1, xh);
        }
      }
      if constexpr (SUMS) {
        store_sums<M>(i0, i1, sums, t0, rows, r0, nr, subs, 8 * S + s);
        continue;
      }
      const __m512i s0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pp + 4096 + 32 * s)));
      const __m512i s1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pp + 4096 + 32 * s + 16)));
      for (int m = 0; m < M; ++m) {
        I0[m] = _mm512_add_epi32(I0[m], _mm512_mullo_epi32(i0[m], s0));
        I1[m] = _mm512_add_epi32(I1[m], _mm512_mullo_epi32(i1[m], s1));
      }
    }
    if constexpr (SUMS) continue;
    __m512i c0[M], c1[M];  // the minimums' products
    for (int m = 0; m < M; ++m) c0[m] = c1[m] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i m0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 4352 + 64 * p)));
      const __m512i m1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 4352 + 64 * p + 32)));
      for (int m = 0; m < M; ++m) {
        const __m512i qs = _mm512_set1_epi32(a.qs32[(t0 + m) * (subs / 2) + 4 * S + p]);
        c0[m] = _mm512_dpwssd_epi32(c0[m], m0, qs);
        c1[m] = _mm512_dpwssd_epi32(c1[m], m1, qs);
      }
    }
    const float* dm = reinterpret_cast<const float*>(pp + 4608);
    const __m512 d0 = _mm512_loadu_ps(dm), d1 = _mm512_loadu_ps(dm + 16), mm0 = _mm512_loadu_ps(dm + NR),
                 mm1 = _mm512_loadu_ps(dm + NR + 16);
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      __m512 g0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I0[m]), _mm512_mul_ps(d0, dx), _mm512_load_ps(f[m]));
      __m512 g1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I1[m]), _mm512_mul_ps(d1, dx), _mm512_load_ps(f[m] + 16));
      g0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0[m]), _mm512_mul_ps(mm0, dx), g0);
      g1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c1[m]), _mm512_mul_ps(mm1, dx), g1);
      _mm512_store_ps(f[m], g0), _mm512_store_ps(f[m] + 16, g1);
    }
  }
  if constexpr (SUMS) return;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = _mm512_load_ps(f[m]), f1[m] = _mm512_load_ps(f[m] + 16);
  store_out<M>(f0, f1, out, t0, rows, r0, nr);
}

// The same for packed q6_k: per half-block h its four steps' codes are put together in registers from
// the planes (a nibble, masked or shifted, ORed with two bits of the quad plane moved to bits 4-5:
// vpternlogd, no vpdpbusd pipe), then tile_halves' integer sums and f32 steps: i starts from the offset's
// correction -32 sum q, takes 4 vpdpbusd per vector of rows, I += i sc_h (vpmulld), and per super-block
// f += f32(I) (d dx). The panels' kernel over gemm_q8_unpack_panel's panels gives the same output bit
// for bit; this one reads 0.83 bytes per weight per tile instead of unpacking 1.6 per call, which at a
// few activation rows (a server's decode steps) was most of the product. With `sums`, the half-blocks' sums of u q.
template <int M, bool SUMS>
void tile_packed_q6(const uint8_t* pp, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  const __m512i low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
  // (nib & 0x0f) | (top & 0x30), the top bits already at 4-5: vpternlogd's (A & C) | B with B masked.
  auto code = [&](__m512i nib, __m512i top) { return _mm512_ternarylogic_epi32(nib, _mm512_and_si512(top, top2), low4, 0xEC); };
  alignas(64) float f[M][NR] = {};
  for (int64_t S = 0; S < cols / QK_K; ++S, pp += gemm_q8_packed_super(WeightType::q6_k)) {
    __m512i I0[M], I1[M];
    for (int m = 0; m < M; ++m) I0[m] = I1[m] = _mm512_setzero_si512();
    for (int h = 0; h < 16; ++h) {
      const int64_t hb = 16 * S + h;
      const int8_t* xq = a.q.data() + t0 * cols + 16 * hb;
      __m512i i0[M], i1[M];
      for (int m = 0; m < M; ++m) i0[m] = i1[m] = SUMS ? _mm512_setzero_si512() : _mm512_set1_epi32(a.corr16[(t0 + m) * 2 * subs + hb]);
      gemm_q8_prefetch_packed(pp, WeightType::q6_k, h, 16);
      const uint8_t* nib = pp + 256 * h;          // steps 4h, 4h + 1 in its first 128 bytes, 4h + 2, 4h + 3 in the next
      const uint8_t* quad = pp + 4096 + 128 * h;  // bits 2k, 2k + 1: step 4h + k's top two
      // Step k's codes of the panel's rows from byte v on (0: rows 0-15, 64: rows 16-31): the low (k
      // even) or high nibble of its step pair, and the quad plane's bits 2k, 2k + 1 moved to 4-5.
      auto step_codes = [&](int k, int v) {
        __m512i n = _mm512_loadu_si512(nib + 128 * (k / 2) + v), q = _mm512_loadu_si512(quad + v);
        if (k % 2) n = _mm512_srli_epi16(n, 4);
        q = k == 0 ? _mm512_slli_epi16(q, 4) : k == 1 ? _mm512_slli_epi16(q, 2) : k == 3 ? _mm512_srli_epi16(q, 2) : q;
        return code(n, q);
      };
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) dot_step<M>(step_codes(k, 0), step_codes(k, 64), xq + 4 * k, cols, i0, i1);
      if constexpr (SUMS) {
        store_sums<M>(i0, i1, sums, t0, rows, r0, nr, 2 * subs, hb);
        continue;
      }
      const uint8_t* sc = pp + 4096 + 2048 + 32 * h;  // the half-block's int8 scales, one per row
      const __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                    s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16)));
      for (int m = 0; m < M; ++m) {
        I0[m] = _mm512_add_epi32(I0[m], _mm512_mullo_epi32(i0[m], s0));
        I1[m] = _mm512_add_epi32(I1[m], _mm512_mullo_epi32(i1[m], s1));
      }
    }
    if constexpr (SUMS) continue;
    const float* d = reinterpret_cast<const float*>(pp + 4096 + 2048 + 512);
    const __m512 d0 = _mm512_loadu_ps(d), d1 = _mm512_loadu_ps(d + 16);
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      _mm512_store_ps(f[m], _mm512_fmadd_ps(_mm512_cvtepi32_ps(I0[m]), _mm512_mul_ps(d0, dx), _mm512_load_ps(f[m])));
      _mm512_store_ps(f[m] + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(I1[m]), _mm512_mul_ps(d1, dx), _mm512_load_ps(f[m] + 16)));
    }
  }
  if constexpr (SUMS) return;
  __m512 f0[M], f1[M];
  for (int m = 0; m < M; ++m) f0[m] = _mm512_load_ps(f[m]), f1[m] = _mm512_load_ps(f[m] + 16);
  store_out<M>(f0, f1, out, t0, rows, r0, nr);
}

template <WeightType T, bool SUMS, int M = MR>
void tiles_packed(int m, const uint8_t* pp, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) {
      if constexpr (T == WeightType::q6_k) return tile_packed_q6<M, SUMS>(pp, a, t0, rows, r0, nr, out, sums);
      else return tile_packed<M, SUMS>(pp, a, t0, rows, r0, nr, out, sums);
    }
    tiles_packed<T, SUMS, M - 1>(m, pp, a, t0, rows, r0, nr, out, sums);
  }
}

// The tile kinds: 32-element sub-blocks (tile), and q4_k, q5_k, iq4_xs (tile_super, but tile for the tests' sums), and half-blocks (tile_halves).
enum class Kind { sub, super, halves };  // halves: MIN says whether the minimums stay apart (q2_k), else their offset is folded

template <bool MIN, Kind K, bool SUMS, int M = MR>
void tiles(int m, const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int nr, float* out, int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) {
      if constexpr (K == Kind::halves) return tile_halves<M, !MIN, SUMS>(p, a, t0, rows, r0, nr, out, sums);
      else if constexpr (K == Kind::super && !SUMS) return tile_super<M, MIN>(p, a, t0, rows, r0, nr, out);
      else return tile<M, MIN, SUMS>(p, a, t0, rows, r0, nr, out, sums);
    }
    tiles<MIN, K, SUMS, M - 1>(m, p, a, t0, rows, r0, nr, out, sums);
  }
}

// One panel by activation rows [t_begin, t_end), MR rows at a time (Q8PanelKernel).
template <bool MIN, Kind K, bool SUMS>
void panel_vnni(WeightType, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0, int nr, float* out,
                int32_t* sums) {
  constexpr int mr = MR;
  for (int64_t t0 = t_begin; t0 < t_end; t0 += mr)
    tiles<MIN, K, SUMS>(static_cast<int>(t_end - t0 < mr ? t_end - t0 : mr), p, a, t0, rows, r0, nr, out, sums);
}

// gemm_q8_vnni, or with SUMS its integer sums into `sums` (tile).
template <bool SUMS>
void run(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end, uint8_t* scratch,
         int32_t* sums) {
  auto panels = [&](int mr, Q8PanelKernel kernel) { gemm_q8_panels(t, w, a, rows, out, row_begin, row_end, scratch, mr, kernel, sums); };
  if (gemm_q8_halves(t))  // q2_k keeps its minimums apart, q3_k and q6_k fold their offsets into the integer sums
    return t == WeightType::q2_k ? panels(MR, panel_vnni<true, Kind::halves, SUMS>) : panels(MR, panel_vnni<false, Kind::halves, SUMS>);
  if (gemm_q8_super(t))
    return q8_has_min(t) ? panels(MR, panel_vnni<true, Kind::super, SUMS>) : panels(MR, panel_vnni<false, Kind::super, SUMS>);
  if (q8_has_min(t)) return panels(MR, panel_vnni<true, Kind::sub, SUMS>);
  panels(MR, panel_vnni<false, Kind::sub, SUMS>);
}

}  // namespace

void gemm_q8_vnni(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch) {
  run<false>(t, w, a, rows, out, row_begin, row_end, scratch, nullptr);
}

void gemm_q8_vnni_packed(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                         uint8_t*, int32_t* sums) {
  auto blocks = [&](auto type) {
    constexpr WeightType T = decltype(type)::value;
    gemm_q8_packed_blocks(t, packed, a, row_begin, row_end, MR, [&](const uint8_t* pp, int64_t t0, int m, int64_t r0, int nr) {
      if (sums) tiles_packed<T, true>(m, pp, a, t0, rows, r0, nr, out, sums);
      else tiles_packed<T, false>(m, pp, a, t0, rows, r0, nr, out, sums);
    });
  };
  if (t == WeightType::q6_k) return blocks(WeightTypeTag<WeightType::q6_k>());
  blocks(WeightTypeTag<WeightType::q4_k>());
}

void gemm_q8_vnni_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums) {
  std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_scratch_bytes(t, rows, a.cols)));
  run<true>(t, w, a, rows, nullptr, 0, rows, scratch.data(), sums);
}

}  // namespace sparq
