// f16 / bf16 <-> f32 in portable C++, bit-exact with F16C's VCVTPS2PH (round to
// nearest even) and a bf16 shift. `static inline` on purpose: every translation
// unit keeps its own copy, so the scalar build never links an AVX-512 instance.
#pragma once
#include <cstdint>
#include <cstring>

namespace sparq {

static inline uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

static inline float bits_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// f32 -> f16 bits, round to nearest even; overflow to infinity, NaN stays a quiet NaN.
static inline uint16_t fp32_to_fp16_ref(float f) {
  const uint32_t bits = f32_bits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff);
  const uint32_t mant = bits & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  const int32_t half_exp = exp - 127 + 15;
  if (half_exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t half, rest, halfway;
  if (half_exp <= 0) {
    // Subnormal half or zero: shift the mantissa with its implicit 1 into place.
    if (half_exp < -10) return static_cast<uint16_t>(sign);
    const uint32_t full = mant | 0x800000u;
    const int shift = 14 - half_exp;
    half = full >> shift;
    rest = full & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  } else {
    half = (static_cast<uint32_t>(half_exp) << 10) | (mant >> 13);
    rest = mant & 0x1fffu;
    halfway = 0x1000u;
  }
  // A carry out of the mantissa bumps the exponent, which is the right rounding.
  const bool up = rest > halfway || (rest == halfway && (half & 1u));
  return static_cast<uint16_t>(sign | (half + (up ? 1u : 0u)));
}

static inline float fp16_to_fp32_ref(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exact in f32.
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline float bf16_to_fp32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }
// f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN (ggml's fp32_to_bf16).
static inline uint16_t fp32_to_bf16_ref(float f) {
  const uint32_t b = f32_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

static inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

static inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace sparq
