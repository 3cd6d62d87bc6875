// The wrapper layer's AVX2 traits (kernels/simd.h; included from there only, in files built with
// -mavx2 -mfma -mf16c): 8 f32 lanes in a ymm register.
#pragma once
#include "kernels/x86/intrinsics.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/half.h"

namespace sparq {
namespace {

// The f16 at byte address p (any alignment) as a float: the scale and minimum fields of the blocks.
inline float f16_at(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

struct Avx2 {
  using F = __m256;
  struct D {
    __m256d lo, hi;
  };
  static constexpr int W = 8;
  static constexpr int kAccRegs = 8;  // 16 ymm: accumulators plus loads and broadcasts
  static __m256i lanes_below(size_t avail) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(avail > 8 ? 8 : avail)), lane);
  }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_part(const float* p, size_t avail) { return _mm256_maskload_ps(p, lanes_below(avail)); }
  static F load_part(const uint16_t* p, size_t avail) {
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tmp, p, (avail > 8 ? 8 : avail) * 2);
    return load(tmp);
  }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static void store_n(float* p, F x, size_t avail) {
    if (avail >= 8) _mm256_storeu_ps(p, x);
    else _mm256_maskstore_ps(p, lanes_below(avail), x);
  }
  static void store_f16(uint16_t* p, F x, size_t avail) {
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (avail >= 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
    else {
      uint16_t tmp[8];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), h);
      std::memcpy(p, tmp, avail * 2);
    }
  }
  // Lanes at a stride, loaded one by one and converted at once. Not vgatherdps:
  // it is no faster than eight scalar loads on the AMD cores we run on, qemu 7.2
  // (CI's AVX2-only CPU) mis-emulates it, and on f16 its 32-bit words could
  // reach 2 bytes past the buffer.
  template <class T>
  static F gather(const T* p, size_t stride, size_t avail) {
    alignas(32) T x[8] = {};
    for (size_t l = 0; l < avail && l < 8; l++) x[l] = p[l * stride];
    return load(x);
  }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F div_f64(F x, double by) {
    const __m256d b = _mm256_set1_pd(by);
    const __m128 lo = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), b));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), b));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
  }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F select_sign(F x, F a, F b) { return _mm256_blendv_ps(a, b, x); }
  static F set1_half(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }
  static F from_i8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F from_nibbles(const uint8_t* p, int shift) {
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(bytes(p), shift), _mm256_set1_epi32(15)));
  }
  // 8 codes from W * Bits / 8 bytes (2 or 4): the word on every lane, shifted by Bits per lane.
  template <int Bits>
  static F from_packed(const uint8_t* p) {
    uint32_t w = 0;
    std::memcpy(&w, p, W * Bits / 8);
    const __m256i shifts = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(Bits));
    const __m256i codes =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), shifts), _mm256_set1_epi32((1 << Bits) - 1));
    return _mm256_cvtepi32_ps(codes);
  }
  // bf16 bits to f32: the 16 bits become the high half of the word (exact).
  static F load_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static __m256i bytes(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  // Low and high nibbles of W bytes, as floats in [0, 15].
  static void nibbles(const uint8_t* p, F& lo, F& hi) {
    const __m256i b = bytes(p);
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0f)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }
  // INT4 nibbles n with a zero point: (n ^ 8) - (8 + zero) sign-extends the nibble and removes the zero.
  using Table = __m256i;  // 8 + zero on every lane
  static Table int4_table(int zero) { return _mm256_set1_epi32(8 + zero); }
  // W packed bytes -> the W even (low nibble) and W odd (high nibble) elements, minus zero.
  static void int4_pair(const uint8_t* p, Table bias, F& even, F& odd) {
    const __m256i b = bytes(p), eight = _mm256_set1_epi32(8);
    even = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_xor_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x0f)), eight), bias));
    odd = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_xor_si256(_mm256_srli_epi32(b, 4), eight), bias));
  }
  static float reduce_add(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Lane r = reduce_add(a[r]) for the W vectors a[0..8): a transposing tree, ~1 op per vector
  // instead of ~6 per reduce_add. hadd pairs within 128-bit halves, then the halves are added.
  static F reduce_add_w(const F* a) {
    const F f = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));  // rows 0-3 per half
    const F g = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));  // rows 4-7 per half
    return _mm256_add_ps(_mm256_permute2f128_ps(f, g, 0x20), _mm256_permute2f128_ps(f, g, 0x31));
  }
  static float reduce_max(F a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F pow2n(F p, F n) {
    // x >= kExpLow keeps n >= -126: the exponent field stays normal.
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));
  }
  static F below_to_zero(F x, float lo, F y) { return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(lo), _CMP_LT_OQ), y); }
  static F exp(F x) { return exp_ps<Avx2>(x); }
  static F mask_tail(F x, size_t avail) { return _mm256_and_ps(x, _mm256_castsi256_ps(lanes_below(avail))); }
  static uint32_t ge_mask(F x, F t) { return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(x, t, _CMP_GE_OQ))); }
  // Writes all W lanes (callers leave W entries of room): the set lanes' indices first, packed by a
  // permutation looked up from the 8-bit mask (the lane numbers of its set bits, 3 bits each).
  static void store_lanes(int32_t* out, uint32_t mask, int32_t first) {
    static constexpr std::array<uint32_t, 256> table = [] {
      std::array<uint32_t, 256> t{};
      for (uint32_t m = 0; m < 256; m++)
        for (uint32_t b = 0, o = 0; b < 8; b++)
          if (m >> b & 1) t[m] |= b << (3 * o++);
      return t;
    }();
    const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
    const __m256i perm =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(table[mask])), shifts), _mm256_set1_epi32(7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi32(perm, _mm256_set1_epi32(first)));
  }
  static D dzero() { return D{_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static D dadd(D s, F x) {
    return D{_mm256_add_pd(s.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x))),
             _mm256_add_pd(s.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)))};
  }
  static double dreduce(D s) {
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(s.lo, s.hi));
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
  static void prefetch_row(const void* p, size_t bytes) { Scalar::prefetch_row(p, bytes); }
  static void prefetch_row_l2(const void* p, size_t bytes) { Scalar::prefetch_row_l2(p, bytes); }
};

}  // namespace
}  // namespace sparq
