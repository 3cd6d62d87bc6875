// The SIMD wrapper layer: one trait struct per instruction set, the float vector vocabulary every
// SIMD kernel template is written over (attention_kernels.h, x86/matvec_simd.h, x86/gemm_simd.h,
// x86/decode_simd.h's stage 2, the f32 ends of the int8 products). A kernel file includes this
// header only; it defines Scalar (always) and the traits its compile flags allow:
//   Avx2   x86/simd_avx2.h    AVX2 + FMA + F16C, 8 lanes
//   Avx512 x86/simd_avx512.h  AVX-512 F/BW/VL/DQ, 16 lanes (its files also have Avx2)
//   Neon   arm64/simd_neon.h  AArch64 Advanced SIMD, 4 lanes
// Everything has internal linkage, so the instantiations of two ISA files never meet.
//
// The vocabulary (V::F a vector of V::W floats, V::D f64 accumulators for sums of W floats):
//   zero set1 load store store_n load_part mask_tail gather  lanes in and out; load and load_part
//       also from f16 bits (const uint16_t*), store_f16 to them; load_bf16 (x86, NEON)
//   add sub mul div fma min max select_sign div_f64          arithmetic (min / max as MINPS /
//       MAXPS: a NaN operand gives the second one, on every ISA)
//   reduce_add reduce_add_w reduce_max dzero dadd dreduce    horizontal sums and maxima
//   exp, ge_mask, store_lanes                                softmax and top-k filtering (the
//       SIMD exp is exp_ps below, over round, pow2n and below_to_zero)
//   set1_half from_i8 from_nibbles from_packed nibbles       block codes to f32 lanes
//   int4_table int4_pair (x86)                               INT4 nibbles minus a zero point
//   prefetch_row prefetch_row_l2                             software prefetch
// and, for x86, f16_at(p): the f16 at byte address p as a float (F16C).
// What is not here: integer block products (vpmaddubsw, vpdpbusd, sdot), bit unpacking of the
// block layouts (decode_simd.h's stage 1, matvec_q8_simd.h's decoders), masks and shuffles one
// kernel needs: a wrapper there would only rename one intrinsic used in one place.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "common/half.h"

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

}  // namespace
}  // namespace sparq

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "kernels/x86/simd_avx2.h"
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include "kernels/x86/simd_avx512.h"
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
#include "kernels/arm64/simd_neon.h"
#endif
