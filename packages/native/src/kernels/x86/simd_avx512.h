// The wrapper layer's AVX-512 traits (kernels/simd.h; included from there only, in files built with
// AVX-512 F/BW/VL/DQ, which also have the AVX2 traits): 16 f32 lanes in a zmm register.
#pragma once
#include "kernels/x86/intrinsics.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/half.h"

namespace sparq {
namespace {

struct Avx512 {
  using F = __m512;
  struct D {
    __m512d lo, hi;
  };
  static constexpr int W = 16;
  static constexpr int kAccRegs = 16;  // 32 zmm
  static __mmask16 lanes_below(size_t avail) { return avail >= 16 ? 0xffff : static_cast<__mmask16>((1u << avail) - 1); }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_part(const float* p, size_t avail) { return _mm512_maskz_loadu_ps(lanes_below(avail), p); }
  static F load_part(const uint16_t* p, size_t avail) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes_below(avail), p)); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static void store_n(float* p, F x, size_t avail) { _mm512_mask_storeu_ps(p, lanes_below(avail), x); }
  static void store_f16(uint16_t* p, F x, size_t avail) {
    _mm256_mask_storeu_epi16(p, lanes_below(avail), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static __m512i lane_stride(size_t stride) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(static_cast<int>(stride)));
  }
  static F gather(const float* p, size_t stride, size_t avail) {
    return _mm512_mask_i32gather_ps(zero(), lanes_below(avail), lane_stride(stride), p, 4);
  }
  // f16 lanes: load each half on its own, then convert all at once. (A hardware
  // gather works on 32-bit words, which could reach 2 bytes past the buffer.)
  static F gather(const uint16_t* p, size_t stride, size_t avail) {
    alignas(32) uint16_t h[16] = {};
    for (size_t l = 0; l < avail && l < 16; l++) h[l] = p[l * stride];
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
  }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F div_f64(F x, double by) {
    const __m512d b = _mm512_set1_pd(by);
    const __m256 lo = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), b));
    const __m256 hi = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)), b));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F select_sign(F x, F a, F b) { return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), a, b); }
  static F set1_half(uint16_t h) { return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h))); }
  static F from_i8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F from_nibbles(const uint8_t* p, int shift) {
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(bytes(p), static_cast<unsigned>(shift)), _mm512_set1_epi32(15)));
  }
  // 16 codes from W * Bits / 8 bytes (4 or 8): lanes 0-7 from the first 8 codes' word, 8-15 from the next.
  template <int Bits>
  static F from_packed(const uint8_t* p) {
    uint64_t w = 0;
    std::memcpy(&w, p, W * Bits / 8);
    const __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(w)))),
                                             _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(w >> (8 * Bits)))), 1);
    const __m512i shifts = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi32(Bits));
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(words, shifts), _mm512_set1_epi32((1 << Bits) - 1)));
  }
  // bf16 bits to f32: the 16 bits become the high half of the word (exact).
  static F load_bf16(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static __m512i bytes(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // Low and high nibbles of W bytes, as floats in [0, 15].
  static void nibbles(const uint8_t* p, F& lo, F& hi) {
    const __m512i b = bytes(p);
    lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0f)));
    hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  }
  // INT4 nibbles with a zero point, by table look-up: lane n holds (n ^ 8) - 8 - zero.
  using Table = __m512;
  static Table int4_table(int zero) {
    return _mm512_cvtepi32_ps(
        _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1), _mm512_set1_epi32(zero)));
  }
  // W packed bytes -> the W even (low nibble) and W odd (high nibble) elements, minus zero.
  static void int4_pair(const uint8_t* p, Table t, F& even, F& odd) {
    const __m512i b = bytes(p);
    even = _mm512_permutexvar_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0f)), t);
    odd = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), t);
  }
  static float reduce_add(F a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Lane r = reduce_add(a[r]) for the W vectors a[0..16): a transposing tree of 15 pair
  // merges (2 shuffles + 1 add each), ~3 ops per vector instead of ~8 per reduce_add.
  static F reduce_add_w(const F* a) {
    // 16 -> 8: per 128-bit chunk of pair (x, y): [x0+x2, y0+y2, x1+x3, y1+y3].
    F b[8];
    for (int i = 0; i < 8; i++)
      b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    // 8 -> 4: per chunk, the chunk's partial sums of rows 4i .. 4i + 3, in order.
    F c[4];
    for (int i = 0; i < 4; i++) {
      const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
      c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    // 4 -> 2 -> 1: add the 128-bit chunks pairwise; chunk k of the result ends up holding rows 4k .. 4k + 3.
    F e[2];
    for (int i = 0; i < 2; i++)
      e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  static float reduce_max(F a) { return _mm512_reduce_max_ps(a); }
  static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F pow2n(F p, F n) { return _mm512_scalef_ps(p, n); }
  static F below_to_zero(F x, float lo, F y) {
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(lo), _CMP_LT_OQ), zero());
  }
  static F exp(F x) { return exp_ps<Avx512>(x); }
  static F mask_tail(F x, size_t avail) { return _mm512_maskz_mov_ps(lanes_below(avail), x); }
  static uint32_t ge_mask(F x, F t) { return _mm512_cmp_ps_mask(x, t, _CMP_GE_OQ); }
  // One compress-store, no loop over the bits (their count is data-dependent: mispredicted branches).
  // Writes all W lanes (callers leave W entries of room): compressing in a register and storing
  // the whole vector, because vpcompressd to memory is microcoded on AMD Zen 4 (measured there:
  // SparQ's filter pass took several times longer with the masked compress-store).
  static void store_lanes(int32_t* out, uint32_t mask, int32_t first) {
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm512_storeu_si512(out, _mm512_maskz_compress_epi32(static_cast<__mmask16>(mask), _mm512_add_epi32(_mm512_set1_epi32(first), lanes)));
  }
  static D dzero() { return D{_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static D dadd(D s, F x) {
    return D{_mm512_add_pd(s.lo, _mm512_cvtps_pd(_mm512_castps512_ps256(x))),
             _mm512_add_pd(s.hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)))};
  }
  static double dreduce(D s) { return _mm512_reduce_add_pd(_mm512_add_pd(s.lo, s.hi)); }
  static void prefetch_row(const void* p, size_t bytes) { Scalar::prefetch_row(p, bytes); }
  static void prefetch_row_l2(const void* p, size_t bytes) { Scalar::prefetch_row_l2(p, bytes); }
};

}  // namespace
}  // namespace sparq
