// The wrapper layer's NEON traits (kernels/simd.h; included from there only): arm64 Advanced SIMD,
// 4 f32 lanes in a 128-bit register (NEON is part of the base AArch64 architecture: no CPU check).
//
// Comparisons keep x86's semantics where the kernels rely on them: max(a, b) is a > b ? a : b
// and min(a, b) is a < b ? a : b, so a NaN operand yields the second one as MAXPS / MINPS do
// (NEON's vmaxq / vminq would return the NaN), and reduce_max folds in the order the AVX2 one does.
#pragma once
#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sparq {
namespace {

struct Neon {
  using F = float32x4_t;
  struct D {
    float64x2_t lo, hi;
  };
  static constexpr int W = 4;
  static constexpr int kAccRegs = 16;  // 32 vector registers: accumulators plus loads and broadcasts
  static uint32x4_t lanes_below(size_t avail) {
    const uint32_t lane[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(lane), vdupq_n_u32(static_cast<uint32_t>(avail > 4 ? 4 : avail)));
  }
  static F zero() { return vdupq_n_f32(0.f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F load(const float* p) { return vld1q_f32(p); }
  static F load(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  // bf16 bits to f32: the 16 bits become the high half of the word (exact).
  static F load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  // Partial loads go through a zeroed copy: no lane past avail is read.
  template <class T>
  static F load_part(const T* p, size_t avail) {
    T tmp[4] = {};
    std::memcpy(tmp, p, (avail > 4 ? 4 : avail) * sizeof(T));
    return load(tmp);
  }
  static void store(float* p, F x) { vst1q_f32(p, x); }
  static void store_n(float* p, F x, size_t avail) {
    if (avail >= 4) return vst1q_f32(p, x);
    float tmp[4];
    vst1q_f32(tmp, x);
    std::memcpy(p, tmp, avail * sizeof(float));
  }
  // FCVTN rounds to nearest even under the default FPCR, as fp32_to_fp16_ref does.
  static void store_f16(uint16_t* p, F x, size_t avail) {
    const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(x));
    if (avail >= 4) return vst1_u16(p, h);
    uint16_t tmp[4];
    vst1_u16(tmp, h);
    std::memcpy(p, tmp, (avail > 4 ? 4 : avail) * sizeof(uint16_t));
  }
  template <class T>
  static F gather(const T* p, size_t stride, size_t avail) {
    T x[4] = {};
    for (size_t l = 0; l < avail && l < 4; l++) x[l] = p[l * stride];
    return load(x);
  }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F max(F a, F b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
  static F min(F a, F b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
  static F div(F a, F b) { return vdivq_f32(a, b); }
  static F div_f64(F x, double by) {
    const float64x2_t b = vdupq_n_f64(by);
    const float32x2_t lo = vcvt_f32_f64(vdivq_f64(vcvt_f64_f32(vget_low_f32(x)), b));
    return vcvt_high_f32_f64(lo, vdivq_f64(vcvt_high_f64_f32(x), b));
  }
  // a where x's sign bit is clear, b where it is set (-0 included).
  static F select_sign(F x, F a, F b) { return vbslq_f32(vcltzq_s32(vreinterpretq_s32_f32(x)), b, a); }
  // Block codes (kv_blocks.h), as the x86 wrappers read them: an f16 scale on every lane; 4 int8;
  // 4 nibbles (bits shift..shift+3) of 4 bytes; 4 codes of Bits bits packed from bit 0 (unsigned).
  // Loads read exactly the bytes the 4 lanes own (memcpy), never past them.
  static F set1_half(uint16_t h) { return vdupq_n_f32(fp16_to_fp32_ref(h)); }
  static F from_i8(const uint8_t* p) {
    uint32_t w = 0;
    std::memcpy(&w, p, 4);
    const int16x8_t wide = vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(wide)));
  }
  static F from_nibbles(const uint8_t* p, int shift) {
    uint32_t w = 0;
    std::memcpy(&w, p, 4);
    const uint32x4_t bytes = vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)))));
    return vcvtq_f32_u32(vandq_u32(vshlq_u32(bytes, vdupq_n_s32(-shift)), vdupq_n_u32(15)));
  }
  template <int Bits>
  static F from_packed(const uint8_t* p) {
    uint32_t w = 0;
    std::memcpy(&w, p, W * Bits / 8);
    const int32x4_t shifts = {0, -Bits, -2 * Bits, -3 * Bits};
    return vcvtq_f32_u32(vandq_u32(vshlq_u32(vdupq_n_u32(w), shifts), vdupq_n_u32((1u << Bits) - 1)));
  }
  static float reduce_add(F a) { return vaddvq_f32(a); }
  // Lane r = reduce_add(a[r]) for the W vectors a[0..4): two rounds of pairwise adds.
  static F reduce_add_w(const F* a) { return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3])); }
  static float reduce_max(F a) {
    float l[4];
    vst1q_f32(l, a);
    const float m0 = l[0] > l[2] ? l[0] : l[2], m1 = l[1] > l[3] ? l[1] : l[3];
    return m0 > m1 ? m0 : m1;
  }
  static F round(F x) { return vrndnq_f32(x); }  // to nearest, ties to even (as _MM_FROUND_TO_NEAREST_INT)
  static F pow2n(F p, F n) {
    // x >= kExpLow keeps n >= -126: the exponent field stays normal.
    return vmulq_f32(p, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23)));
  }
  static F below_to_zero(F x, float lo, F y) {
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), vcltq_f32(x, vdupq_n_f32(lo))));
  }
  static F exp(F x) { return exp_ps<Neon>(x); }
  static F mask_tail(F x, size_t avail) { return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), lanes_below(avail))); }
  static uint32_t ge_mask(F x, F t) {
    const uint32_t bit[4] = {1, 2, 4, 8};
    return vaddvq_u32(vandq_u32(vcgeq_f32(x, t), vld1q_u32(bit)));
  }
  static void store_lanes(int32_t* out, uint32_t mask, int32_t first) { Scalar::store_lanes(out, mask, first); }
  static D dzero() { return D{vdupq_n_f64(0.0), vdupq_n_f64(0.0)}; }
  static D dadd(D s, F x) { return D{vaddq_f64(s.lo, vcvt_f64_f32(vget_low_f32(x))), vaddq_f64(s.hi, vcvt_high_f64_f32(x))}; }
  static double dreduce(D s) { return vaddvq_f64(vaddq_f64(s.lo, s.hi)); }
  static void prefetch_row(const void* p, size_t bytes) { Scalar::prefetch_row(p, bytes); }
  static void prefetch_row_l2(const void* p, size_t bytes) { Scalar::prefetch_row_l2(p, bytes); }
};

}  // namespace
}  // namespace sparq
#endif
