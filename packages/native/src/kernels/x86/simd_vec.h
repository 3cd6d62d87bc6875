// The vector types the SIMD kernels are written over: Vec256 (AVX2 + FMA +
// F16C, 8 f32 lanes) and Vec512 (AVX-512, 16 lanes). Only for files compiled
// with those flags (matvec_avx2.cc, matvec_avx512.cc, int4_*.cc); everything
// has internal linkage, so the two instantiations never meet.
#pragma once
#include "kernels/x86/avx512_headers.h"

#include <cstdint>

#include "common/half.h"

namespace sparq {
namespace {

#if defined(__AVX512F__)
struct Vec512 {
  static constexpr int W = 16;
  using F = __m512;
  using Table = __m512;  // the 16 values (q - zero) a signed nibble stands for
  static F zero() { return _mm512_setzero_ps(); }
  static float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(F v) { return _mm512_reduce_add_ps(v); }
  static F load_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F load_bf16(const uint8_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static __m512i bytes(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_i8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // Low and high nibbles of W bytes, as floats in [0, 15].
  static void nibbles(const uint8_t* p, F& lo, F& hi) {
    const __m512i b = bytes(p);
    lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0f)));
    hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  }
  // Lane n holds (n ^ 8) - 8 - zero: the value of nibble n with the zero point removed.
  static Table int4_table(int zero) {
    return _mm512_cvtepi32_ps(
        _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1), _mm512_set1_epi32(zero)));
  }
  // W packed bytes -> the W even (low nibble) and W odd (high nibble) elements, minus zero, by table look-up.
  static void int4_pair(const uint8_t* p, Table t, F& even, F& odd) {
    const __m512i b = bytes(p);
    even = _mm512_permutexvar_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0f)), t);
    odd = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), t);
  }
};
#endif

struct Vec256 {
  static constexpr int W = 8;
  using F = __m256;
  using Table = __m256i;  // 8 + zero, subtracted from n ^ 8
  static F zero() { return _mm256_setzero_ps(); }
  static float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static F load_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F load_bf16(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static __m256i bytes(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static F load_i8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void nibbles(const uint8_t* p, F& lo, F& hi) {
    const __m256i b = bytes(p);
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0f)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }
  static Table int4_table(int zero) { return _mm256_set1_epi32(8 + zero); }
  // (n ^ 8) - (8 + zero) sign-extends the nibble and removes the zero point.
  static void int4_pair(const uint8_t* p, Table bias, F& even, F& odd) {
    const __m256i b = bytes(p), eight = _mm256_set1_epi32(8);
    even = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_xor_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x0f)), eight), bias));
    odd = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_xor_si256(_mm256_srli_epi32(b, 4), eight), bias));
  }
};

}  // namespace
}  // namespace sparq
