// Vector traits for attention_kernels.h: Scalar (always), Avx2 (with FMA, F16C),
// Avx512 (F, BW, VL, DQ). Only the traits the including file's flags allow are
// defined. F = a vector of W floats, D = f64 accumulators for sums of W floats.
//   load / load_part (zero-fills lanes >= avail) from float or f16 bits,
//   store_n (first avail lanes), gather (lanes at a stride), exp, ge_mask ...
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "common/half.h"
#include "common/kv_blocks.h"

#if defined(__AVX2__) || defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own undefined-vector idiom.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#endif

namespace sparq {
namespace {

// exp polynomial (Cephes' expf coefficients) on r in [-ln2/2, ln2/2].
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpLow = -87.3f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f,
                kP5 = 5.0000001201e-1f;

// exp(x) for x <= 0 (softmax after the max is subtracted) on any vector traits V:
// range reduction x = n ln2 + r, the polynomial, then V::pow2n(p, n) = p * 2^n;
// x < kExpLow gives 0, NaN stays NaN (MAXPS returns its second operand on NaN).
template <class V>
typename V::F exp_ps(typename V::F x) {
  using F = typename V::F;
  const F xc = V::max(V::set1(kExpLow), x);
  const F n = V::round(V::mul(xc, V::set1(kLog2e)));
  F r = V::fma(n, V::set1(-kLn2Hi), xc);
  r = V::fma(n, V::set1(-kLn2Lo), r);
  F p = V::set1(kP0);
  for (const float c : {kP1, kP2, kP3, kP4, kP5}) p = V::fma(p, r, V::set1(c));
  p = V::fma(V::mul(p, r), r, V::add(r, V::set1(1.f)));
  return V::below_to_zero(x, kExpLow, V::pow2n(p, n));
}

struct Scalar {
  using F = float;
  using D = double;
  static constexpr int W = 1;
  static constexpr int kAccRegs = 32;
  static F zero() { return 0.f; }
  static F set1(float x) { return x; }
  static F load(const float* p) { return *p; }
  static F load(const uint16_t* p) { return fp16_to_fp32_ref(*p); }
  template <class T>
  static F load_part(const T* p, size_t avail) {
    return avail ? load(p) : 0.f;
  }
  static void store(float* p, F x) { *p = x; }
  static void store_n(float* p, F x, size_t avail) {
    if (avail) *p = x;
  }
  static void store_f16(uint16_t* p, F x, size_t avail) {
    if (avail) *p = fp32_to_fp16_ref(x);
  }
  template <class T>
  static F gather(const T* p, size_t stride, size_t avail) {
    return avail ? load(p) : 0.f;
  }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F add(F a, F b) { return a + b; }
  static F mul(F a, F b) { return a * b; }
  static F sub(F a, F b) { return a - b; }
  static F max(F a, F b) { return a > b ? a : b; }
  // f32(x / by) with the division in f64 (SparQ's logits over tau, as the reference divides).
  static F div_f64(F x, double by) { return static_cast<float>(static_cast<double>(x) / by); }
  static F min(F a, F b) { return a < b ? a : b; }
  static F div(F a, F b) { return a / b; }
  // a where x's sign bit is clear, b where it is set (-0 included).
  static F select_sign(F x, F a, F b) { return std::signbit(x) ? b : a; }
  // Block codes (kv_blocks.h): an f16 scale on every lane; W int8; W nibbles (bits shift..shift+3)
  // of W bytes; W codes of Bits bits packed from bit 0 (unsigned).
  static F set1_half(uint16_t h) { return fp16_to_fp32_ref(h); }
  static F from_i8(const uint8_t* p) { return static_cast<float>(static_cast<int8_t>(*p)); }
  static F from_nibbles(const uint8_t* p, int shift) { return static_cast<float>((*p >> shift) & 15); }
  template <int Bits>
  static F from_packed(const uint8_t* p) {
    return static_cast<float>(*p & ((1 << Bits) - 1));
  }
  static float reduce_add(F a) { return a; }
  static F reduce_add_w(const F* a) { return a[0]; }
  static float reduce_max(F a) { return a; }
  static F exp(F x) { return std::exp(x); }
  static F mask_tail(F x, size_t avail) { return avail ? x : 0.f; }
  static uint32_t ge_mask(F x, F t) { return x >= t ? 1u : 0u; }
  // out[0 .. popcount(mask)) = first + l for the set bits l of mask, ascending.
  static void store_lanes(int32_t* out, uint32_t mask, int32_t first) {
    for (; mask; mask &= mask - 1) *out++ = first + __builtin_ctz(mask);
  }
  static D dzero() { return 0.0; }
  static D dadd(D s, F x) { return s + x; }
  static double dreduce(D s) { return s; }
  static void prefetch_row(const void* p, size_t bytes) {
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b);
  }
  // The same into L2 (locality 2: prefetcht1), for gathered rows (attention_kernels.h, kGatherAhead).
  static void prefetch_row_l2(const void* p, size_t bytes) {
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b, 0, 2);
  }
};

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
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
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(b, shift), _mm256_set1_epi32(15)));
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
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
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
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(b, static_cast<unsigned>(shift)), _mm512_set1_epi32(15)));
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
#endif

}  // namespace
}  // namespace sparq
