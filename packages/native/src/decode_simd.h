// SIMD decoders of the block types native only reads (q5_0, q5_1, iq4_nl: 32
// elements; q2_k .. q6_k, iq4_xs: 256), one block to f32, W elements per step,
// for the ISA files (over simd_vec.h's vector types). The layouts are the ones
// quant_k_ref.cc and quant_ref.cc read element by element; here each step takes
// W consecutive elements, whose codes sit at the same bit position of W
// consecutive bytes, so one widening load plus shifts and masks gives them.
//
// Values are the reference's bit for bit: every product of a scale and a code
// is exact in f32 (an f16 times a code of at most 8 bits), so
// fma(code, dl, -ml) rounds once, like the reference's dl * q - ml.
#pragma once
#include "quant.h"
#include "simd_vec.h"

namespace sparq {
namespace {

template <class V>
struct BlockDecoder {
  using F = typename V::F;
  using I = typename V::I;
  static constexpr int W = V::W;

  static void put(float* out, I code, float dl, float ml) { V::store(out, V::fma(V::to_float(code), V::set1(dl), V::set1(-ml))); }

  // q5_0 / q5_1: d | (m) | qh (bit j: element j's fifth bit) | qs[16] (elements j, j + 16 in byte j).
  static void q5(const uint8_t* x, float* y, bool with_min) {
    const float d = V::half(x), m = with_min ? V::half(x + 2) : 0.0f;
    const uint8_t* qh = x + (with_min ? 4 : 2);
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const I h = V::set1_i(static_cast<int>(bits));
    for (int j = 0; j < QK / 2; j += W) {
      const I b = V::bytes(qh + 4 + j);
      const I lo = V::or_(V::bits(b, 0, 4), V::shl(V::bits(V::shr_each(h, V::iota(j)), 0, 1), 4));
      const I hi = V::or_(V::bits(b, 4, 4), V::shl(V::bits(V::shr_each(h, V::iota(j + 16)), 0, 1), 4));
      // q5_0: (q - 16) d = q d - 16 d (both exact); q5_1: q d + m.
      put(y + j, lo, d, with_min ? -m : 16.0f * d);
      put(y + j + 16, hi, d, with_min ? -m : 16.0f * d);
    }
  }

  // 16 nibbles of qs (elements j and j + 16 of byte j) through the iq4 levels, times dl.
  static void iq4_block(const uint8_t* qs, float dl, float* y) {
    alignas(64) static const float levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    const F s = V::set1(dl);
    for (int j = 0; j < QK / 2; j += W) {
      const I b = V::bytes(qs + j);
      V::store(y + j, V::mul(V::lookup16(levels, V::bits(b, 0, 4)), s));
      V::store(y + j + 16, V::mul(V::lookup16(levels, V::bits(b, 4, 4)), s));
    }
  }

  // q2_k: scales[16] | qs[64] | d | dmin. Element e = 128 H + 32 k + l: bits 2k of qs[32 H + l]; 16-element sub-blocks.
  static void q2_k(const uint8_t* x, float* y) {
    const float d = V::half(x + 80), dmin = V::half(x + 82);
    for (int H = 0; H < 2; ++H)
      for (int l = 0; l < 32; l += W) {
        const I b = V::bytes(x + 16 + 32 * H + l);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * H + 32 * k + l, s = e / 16;
          // W <= 16 consecutive elements from e = a multiple of W lie in one sub-block.
          put(y + e, V::bits(b, 2 * k, 2), d * static_cast<float>(x[s] & 0x0f), dmin * static_cast<float>(x[s] >> 4));
        }
      }
  }

  // q3_k: hmask[32] | qs[64] | scales[12] | d. Low two bits as q2_k, third bit (4 H + k) of hmask[l]; code - 4.
  static void q3_k(const uint8_t* x, float* y) {
    const uint8_t* sc = x + 96;
    const float d = V::half(x + 108);
    for (int H = 0; H < 2; ++H)
      for (int l = 0; l < 32; l += W) {
        const I b = V::bytes(x + 32 + 32 * H + l), hm = V::bytes(x + l);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * H + 32 * k + l, s = e / 16;
          const int scale = ((s < 8 ? sc[s] & 0x0f : sc[s - 8] >> 4) | (((sc[8 + s % 4] >> (2 * (s >> 2))) & 3) << 4)) - 32;
          const float dl = d * static_cast<float>(scale);
          put(y + e, V::or_(V::bits(b, 2 * k, 2), V::shl(V::bits(hm, 4 * H + k, 1), 2)), dl, 4.0f * dl);
        }
      }
  }

  // q4_k / q5_k: d | dmin | scales[12] | (qh[32]) | qs[128]. Sub-blocks 2p and 2p + 1 are the low and
  // high nibbles of qs[32 p .. 32 p + 32); q5_k's fifth bits are bits 2p and 2p + 1 of qh[0 .. 32).
  static void qx_k(const uint8_t* x, float* y, bool five) {
    const float d = V::half(x), dmin = V::half(x + 2);
    const uint8_t* qs = x + (five ? 48 : 16);
    for (int p = 0; p < 4; ++p) {
      int sc0, mn0, sc1, mn1;
      scale_min_k(x + 4, 2 * p, sc0, mn0);
      scale_min_k(x + 4, 2 * p + 1, sc1, mn1);
      for (int l = 0; l < 32; l += W) {
        const I b = V::bytes(qs + 32 * p + l);
        I lo = V::bits(b, 0, 4), hi = V::bits(b, 4, 4);
        if (five) {
          const I h = V::bytes(x + 16 + l);
          lo = V::or_(lo, V::shl(V::bits(h, 2 * p, 1), 4));
          hi = V::or_(hi, V::shl(V::bits(h, 2 * p + 1, 1), 4));
        }
        put(y + 64 * p + l, lo, d * static_cast<float>(sc0), dmin * static_cast<float>(mn0));
        put(y + 64 * p + 32 + l, hi, d * static_cast<float>(sc1), dmin * static_cast<float>(mn1));
      }
    }
  }

  // q6_k: ql[128] | qh[64] | scales[16] int8 | d. Element e = 128 H + 32 k + l: low nibble of
  // ql[64 H + 32 (k % 2) + l] (the high one when k >= 2), high two bits 2k of qh[32 H + l]; code - 32.
  static void q6_k(const uint8_t* x, float* y) {
    const float d = V::half(x + 208);
    for (int H = 0; H < 2; ++H)
      for (int l = 0; l < 32; l += W) {
        const I b0 = V::bytes(x + 64 * H + l), b1 = V::bytes(x + 64 * H + 32 + l), h = V::bytes(x + 128 + 32 * H + l);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * H + 32 * k + l;
          const I code = V::or_(V::bits(k % 2 ? b1 : b0, k >= 2 ? 4 : 0, 4), V::shl(V::bits(h, 2 * k, 2), 4));
          const float dl = d * static_cast<float>(static_cast<int8_t>(x[192 + e / 16]));
          put(y + e, code, dl, 32.0f * dl);
        }
      }
  }

  // iq4_xs: d | scales_h | scales_l[4] | qs[128]: 8 iq4_nl-style sub-blocks with 6-bit scales (+ 32).
  static void iq4_xs(const uint8_t* x, float* y) {
    const float d = V::half(x);
    const int scales_h = load_u16(x + 2);
    for (int s = 0; s < 8; ++s) {
      const int low = (x[4 + (s >> 1)] >> (4 * (s & 1))) & 0x0f;
      iq4_block(x + 8 + 16 * s, d * static_cast<float>((low | (((scales_h >> (2 * s)) & 3) << 4)) - 32), y + 32 * s);
    }
  }

  static void iq4_nl(const uint8_t* x, float* y) { iq4_block(x + 2, V::half(x), y); }

  // One block of any read-only type (not q4_0, q4_1, q8_0) -> y.
  static void block(WeightType t, const uint8_t* x, float* y) { decode_read_only<BlockDecoder<V>>(t, x, y); }
};

}  // namespace
}  // namespace sparq
