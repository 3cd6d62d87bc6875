// SIMD decoders of the block types native only reads (q5_0, q5_1, iq4_nl: 32
// elements; q2_k .. q6_k, iq4_xs: 256), for the ISA files (stage 2 over the
// wrapper layer's vector traits, kernels/simd.h). The layouts are the ones block_codes.h and quant_ref.cc read
// element by element. Two stages per block:
//   1. codes<T>: the block's codes as int8, 32 at a time with byte shuffles,
//      shifts and masks (AVX2 integer ops, which every path here has), plus one
//      scale dl and offset ml per sub-block (block_codes.h's sub-blocks);
//   2. BlockDecoder<V>::weights: weight e = fma(code_e, dl, ml), W elements per
//      step (one widening load of W codes, a convert, an FMA by broadcasts).
//
// Values are the reference's bit for bit. dl = d * (sub-block scale) is exact
// (an f16 times at most 8 bits). Where ml != 0 (q5_1, q2_k, q4_k, q5_k) the
// product dl * code is exact too (at most 22 bits), so fma(code, dl, ml) rounds
// once, as the reference's dl * q - ml; where ml = 0 it is the one rounding of
// dl * code (q6_k's and iq4_xs's products may need 25 bits), as there. Offsets
// that scale a code by a power of two (q5_0's 16, q3_k's 4, q6_k's 32) are
// subtracted from the codes, so dl * (q - 16) is the reference's product.
#pragma once
#include <type_traits>

#include "common/block_codes.h"
#include "common/quant.h"
#include "kernels/simd.h"

namespace sparq {
namespace {

// The decoders must inline into the row loops, or the accumulators live in memory.
#define SPARQ_DECODE_INLINE __attribute__((always_inline)) inline

// One decoded block: weight e = dl[e / sub] * c[e] + ml[e / sub], sub = sub_block_elements(T).
// Holds one 256-element block or several 32-element ones.
struct BlockCodes {
  alignas(32) int8_t c[QK_K];  // (elements) codes
  float dl[16], ml[16];        // (elements / sub) per sub-block scale and offset
};

// 32-byte helpers of stage 1, in their own namespace (matvec_q8_simd.h, which includes this file,
// takes nibbles32 and iq4_levels from it).
namespace bytes32 {
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(int8_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
// Bits [n, n + width) of each of 32 bytes.
inline __m256i bits8(__m256i b, int n, int width) {
  return _mm256_and_si256(_mm256_srl_epi16(b, _mm_cvtsi32_si128(n)), _mm256_set1_epi8(static_cast<char>((1 << width) - 1)));
}
// 16 bytes holding elements j (low nibble) and j + 16 (high nibble) -> the 32 nibbles in element order.
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}
// IQ4_LEVELS[n] for 32 nibbles n.
inline __m256i iq4_levels(__m256i n) {
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(IQ4_LEVELS))), n);
}

// Sub-block scales: out[i] = scale * ints[i] for 8 int32 lanes (scale * code as the scalar code rounds it).
inline void scales8(float* out, __m256i ints, float scale) {
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(ints), _mm256_set1_ps(scale)));
}
inline void zeros(float* out, int count) {
  for (int i = 0; i < count; i += 8) _mm256_storeu_ps(out + i, _mm256_setzero_ps());
}
// Bits [n_i, n_i + width) of the 32-bit word w in lane i.
inline __m256i word_bits(uint32_t w, __m256i n, int width) {
  return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), n), _mm256_set1_epi32((1 << width) - 1));
}

}  // namespace bytes32

// Stage 1: block x of type T -> k's codes and scales; at = which block of k's (only 32-element blocks
// have more than one: at n 32-element blocks, k holds codes 32 at .. 32 at + 31, scale at).
template <WeightType T>
SPARQ_DECODE_INLINE void codes(const uint8_t* x, BlockCodes& k, int at = 0) {
  using namespace bytes32;
  const __m256i low = _mm256_set1_epi8(0x0f);
  if constexpr (T == WeightType::q5_0 || T == WeightType::q5_1) {
    // d | (m) | qh (bit j: element j's fifth bit) | qs[16]. Byte j of the fifth bits: byte j / 8 of qh,
    // spread over 8 bytes (vpshufb within each 128-bit lane), bit j % 8 tested.
    constexpr bool with_min = T == WeightType::q5_1;
    const uint8_t* qh = x + (with_min ? 4 : 2);
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
    const __m256i fifth = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
    const __m256i q = _mm256_or_si256(nibbles32(qh + 4), fifth);
    // q5_0: (q - 16) d; q5_1: q d + m.
    store32(k.c + 32 * at, with_min ? q : _mm256_sub_epi8(q, _mm256_set1_epi8(16)));
    k.dl[at] = f16_at(x);
    k.ml[at] = with_min ? f16_at(x + 2) : 0.0f;
  } else if constexpr (T == WeightType::iq4_nl) {
    // d | qs[16] through the iq4 levels.
    store32(k.c + 32 * at, iq4_levels(nibbles32(x + 2)));
    k.dl[at] = f16_at(x);
    k.ml[at] = 0.0f;
  } else if constexpr (T == WeightType::iq4_xs) {
    // d | scales_h | scales_l[4] | qs[128]: 8 iq4_nl-style sub-blocks with 6-bit scales (+ 32). Sub-blocks
    // s and s + 1 are the 128-bit lanes of 32 bytes: low nibbles then high nibbles of each lane.
    const float d = f16_at(x);
    const int scales_h = load_u16(x + 2);
    for (int s = 0; s < 8; s += 2) {
      const __m256i b = load32(x + 8 + 16 * s);
      const __m256i lo = _mm256_and_si256(b, low), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
      store32(k.c + 32 * s, iq4_levels(_mm256_permute2x128_si256(lo, hi, 0x20)));
      store32(k.c + 32 * s + 32, iq4_levels(_mm256_permute2x128_si256(lo, hi, 0x31)));
    }
    // Scale s: nibble s of scales_l (bits 4s), bits 2s of scales_h as its bits 4-5; minus 32.
    uint32_t scales_l;
    std::memcpy(&scales_l, x + 4, 4);
    const __m256i l = word_bits(scales_l, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), 4);
    const __m256i h = word_bits(static_cast<uint32_t>(scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), 2);
    scales8(k.dl, _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32)), d);
    zeros(k.ml, 8);
  } else if constexpr (T == WeightType::q2_k) {
    // scales[16] (low nibble scale, high nibble min) | qs[64] | d | dmin. Element 128 H + 32 j + l:
    // bits 2j of qs[32 H + l]; 16-element sub-blocks.
    for (int H = 0; H < 2; ++H) {
      const __m256i b = load32(x + 16 + 32 * H);
      for (int j = 0; j < 4; ++j) store32(k.c + 128 * H + 32 * j, bits8(b, 2 * j, 2));
    }
    const float d = f16_at(x + 80), dmin = f16_at(x + 82);
    for (int h = 0; h < 16; h += 8) {
      const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + h)));
      scales8(k.dl + h, _mm256_and_si256(sc, _mm256_set1_epi32(0x0f)), d);
      scales8(k.ml + h, _mm256_srli_epi32(sc, 4), -dmin);  // -(dmin m): f32 rounding is sign-symmetric
    }
  } else if constexpr (T == WeightType::q3_k) {
    // hmask[32] | qs[64] | scales[12] | d. Low two bits as q2_k, third bit (4 H + j) of hmask[l]; code - 4.
    const __m256i hm = load32(x);
    for (int H = 0; H < 2; ++H) {
      const __m256i b = load32(x + 32 + 32 * H);
      for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_or_si256(bits8(b, 2 * j, 2), _mm256_slli_epi16(bits8(hm, 4 * H + j, 1), 2));
        store32(k.c + 128 * H + 32 * j, _mm256_sub_epi8(q, _mm256_set1_epi8(4)));
      }
    }
    const uint8_t* sc = x + 96;
    const float d = f16_at(x + 108);
    // Scale s: low four bits in nibble s / 8 of sc[s % 8], high two bits 2 (s / 4) of sc[8 + s % 4]
    // (bits 8 (s % 4) + 2 (s / 4) of the word at sc + 8); minus 32.
    uint32_t high;
    std::memcpy(&high, sc + 8, 4);
    const __m256i lows = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
    for (int h = 0; h < 16; h += 8) {
      const __m256i l = _mm256_and_si256(h ? _mm256_srli_epi32(lows, 4) : lows, _mm256_set1_epi32(0x0f));
      const __m256i shifts = h ? _mm256_setr_epi32(4, 12, 20, 28, 6, 14, 22, 30) : _mm256_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26);
      scales8(k.dl + h, _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(word_bits(high, shifts, 2), 4)), _mm256_set1_epi32(32)), d);
    }
    zeros(k.ml, 16);
  } else if constexpr (T == WeightType::q4_k || T == WeightType::q5_k) {
    // d | dmin | scales[12] | (qh[32]) | qs[128]. Sub-blocks 2p and 2p + 1 are the low and high nibbles
    // of qs[32 p .. 32 p + 32); q5_k's fifth bits are bits 2p and 2p + 1 of qh[0 .. 32).
    constexpr bool five = T == WeightType::q5_k;
    const uint8_t* qs = x + (five ? 48 : 16);
    for (int p = 0; p < 4; ++p) {
      const __m256i b = load32(qs + 32 * p);
      __m256i lo = _mm256_and_si256(b, low), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
      if (five) {
        const __m256i h = load32(x + 16);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(bits8(h, 2 * p, 1), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(bits8(h, 2 * p + 1, 1), 4));
      }
      store32(k.c + 64 * p, lo);
      store32(k.c + 64 * p + 32, hi);
    }
    const float d = f16_at(x), dmin = f16_at(x + 2);
    // scale_min_k (quant.h) for the 8 sub-blocks j at once, bytes p[0 .. 12) = x[4 .. 16): j < 4: scale
    // p[j] & 63, min p[j + 4] & 63; j >= 4: scale (p[j + 4] & 15) | (p[j - 4] >> 6) << 4, min
    // (p[j + 4] >> 4) | (p[j] >> 6) << 4. Byte shuffles put each term in lane j ((b >> 6) << 4 is (b >> 2) & 0x30).
    const __m128i p = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 4));
    // Lanes 0-3: bytes a .. a + 3 (zeros when a < 0); lanes 4-7: bytes c .. c + 3.
    auto pick = [&](int a, int c) {
      const char z = -1;
      return _mm_shuffle_epi8(p, _mm_setr_epi8(a < 0 ? z : a, a < 0 ? z : a + 1, a < 0 ? z : a + 2, a < 0 ? z : a + 3, c, c + 1, c + 2,
                                               c + 3, z, z, z, z, z, z, z, z));
    };
    const __m128i top = _mm_set1_epi8(0x30);
    const __m128i lo_hi = pick(0, 8), c = pick(4, 8);
    const __m128i sc = _mm_or_si128(_mm_and_si128(lo_hi, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 0, 0, 0, 0, 0, 0, 0, 0)),
                                    _mm_and_si128(_mm_srli_epi16(pick(-1, 0), 2), top));
    const __m128i mn =
        _mm_or_si128(_mm_or_si128(_mm_and_si128(c, _mm_setr_epi8(63, 63, 63, 63, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                                  _mm_and_si128(_mm_srli_epi16(c, 4), _mm_setr_epi8(0, 0, 0, 0, 15, 15, 15, 15, 0, 0, 0, 0, 0, 0, 0, 0))),
                     _mm_and_si128(_mm_srli_epi16(pick(-1, 4), 2), top));
    scales8(k.dl, _mm256_cvtepu8_epi32(sc), d);
    scales8(k.ml, _mm256_cvtepu8_epi32(mn), -dmin);  // -(dmin m): f32 rounding is sign-symmetric
  } else if constexpr (T == WeightType::q6_k) {
    // ql[128] | qh[64] | scales[16] int8 | d. Element 128 H + 32 j + l: low nibble of
    // ql[64 H + 32 (j % 2) + l] (the high one when j >= 2), high two bits 2j of qh[32 H + l]; code - 32.
    for (int H = 0; H < 2; ++H) {
      const __m256i b0 = load32(x + 64 * H), b1 = load32(x + 64 * H + 32), h = load32(x + 128 + 32 * H);
      for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_or_si256(bits8(j % 2 ? b1 : b0, j >= 2 ? 4 : 0, 4), _mm256_slli_epi16(bits8(h, 2 * j, 2), 4));
        store32(k.c + 128 * H + 32 * j, _mm256_sub_epi8(q, _mm256_set1_epi8(32)));
      }
    }
    const float d = f16_at(x + 208);
    for (int h = 0; h < 16; h += 8)
      scales8(k.dl + h, _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 192 + h))), d);
    zeros(k.ml, 16);
  }
}

template <class V>
struct BlockDecoder {
  using F = typename V::F;
  static constexpr int W = V::W;

  // Stage 2: weights e .. e + W of a decoded block, in sub-block s (W divides the sub-block size).
  SPARQ_DECODE_INLINE static F weights(const BlockCodes& k, int e, int s) {
    return V::fma(V::from_i8(reinterpret_cast<const uint8_t*>(k.c + e)), V::set1(k.dl[s]), V::set1(k.ml[s]));
  }

  // One block of any read-only type (not q4_0, q4_1, q8_0) -> y.
  static void block(WeightType t, const uint8_t* x, float* y) {
    with_weight_type(t, [&](auto type) {
      constexpr WeightType T = decltype(type)::value;
      if constexpr (is_read_only_block(T)) {
        BlockCodes k;
        codes<T>(x, k);
        const int n = static_cast<int>(block_shape(T).elements), sub = sub_block_elements(T);
        for (int e = 0; e < n; e += W) V::store(y + e, weights(k, e, e / sub));
      }
    });
  }
};

}  // namespace
}  // namespace sparq
