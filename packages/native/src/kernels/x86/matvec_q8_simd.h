// The integer per-row product of matvec_q8.h, written once for matvec_q8_avx2.cc (AVX2) and
// matvec_q8_avx512.cc (AVX-512 VNNI's vpdpbusd for the integer sums, vpternlogd and byte masks for
// some bit merges), each compiled with its ISA flags; everything here has internal linkage. The
// block types' codes are unpacked into bytes and multiplied with the int8 activation codes:
// - 32-element blocks (q4_0 .. q8_0, iq4_nl): G blocks at once (Group: 2 in 256 bits with AVX2, 4 in
//   512 bits with AVX-512), the activation codes laid out per call to match the codes' order, into
//   4 int32 lanes per block (lane i sums 8 elements), then one conversion and one f32 FMA per G
//   blocks with their scales dl dx (AVX2: vpmaddubsw, the two halves' int16 pair sums added, vpmaddwd
//   against ones; VNNI: two vpdpbusd).
// - 256-element super-blocks (the K-quants, iq4_xs): vpmaddubsw into 16 int16 pair sums per chunk,
//   multiplied by the sub-block's integer scale and added into one int32 vector per super-block
//   (AVX2: vpmaddwd against the scales and vpaddd; VNNI: one vpdpwssd), so that a chunk costs two or
//   three instructions per activation row, and the f32 work (one conversion, one FMA with d dx) is
//   per 256 elements. The scales' int16 lanes are shuffled once per chunk, for all activation rows.
//
// Both take an unsigned and a signed operand (and vpmaddubsw saturates its int16 pair sums), so:
// - types whose codes are u - off with u >= 0 multiply u itself: q4_0 and q5_0
//   (off 8, 16) start each int32 lane from -off * (its activation codes'
//   sum), precomputed per call (GroupActs); q3_k and q6_k (off 4, 32) subtract
//   off * sum_s sc_s (the half-block's activation code sum, RowActs::isum16) once per super-block;
//   u <= 63 and |q| <= 127 keep a pair within 2 * 63 * 127 = 16002;
// - signed codes (q8_0, iq4_*): AVX2, and every super-block type, multiply |c| by q with c's sign
//   moved onto q (vpsignb); |c| <= 128 keeps a pair within 2 * 128 * 127 = 32512 < 32767;
//   VNNI's 32-element blocks (no int16 step to saturate) multiply c + 128 (c with its sign bit
//   flipped) by q, starting each lane from -128 * (its activation codes' sum), as q4_0;
// - minimums (q4_1, q5_1, q2_k, q4_k, q5_k) are added in f32 against dx * (the half- or
//   sub-block's code sum), precomputed per call (q2_k: the int16 code sums times its integer
//   minimums, then f32).
// The 32-element blocks' int32 lanes (8 products each) stay below 2^24 (at most 8 * 128 * 127), so
// their conversion to f32 is exact; a super-block's scaled sum reaches 2^25 (q6_k: 8 chunks of 2 * 16002 * 128 per lane),
// so its one conversion may round, by one f32 rounding of that term (as any f32 addition of it would).
#pragma once
#include <array>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "ops/matvec.h"
#include "ops/matvec_q8.h"
#include "kernels/x86/matvec_simd.h"

namespace sparq {
namespace {

// The sink and block decoders must inline into the row loop, or the accumulators live in memory.
#define SPARQ_INLINE __attribute__((always_inline)) inline
#define SPARQ_LAMBDA __attribute__((always_inline))

// 16 bytes of nibbles -> 32 codes (byte j's low nibble is element j, its high nibble element j + 16)
// and iq4 nibbles -> their signed levels: decode_simd.h's (via matvec_simd.h). An f16 field is the
// wrapper layer's f16_at (one value) or Avx2::set1_half (all 8 lanes, kernels/simd.h).
using bytes32::iq4_levels;
using bytes32::nibbles32;

// The bits of each byte moved from bit `from` to bit `to` and kept where `mask` is set (its bits at
// `to` and up): one 16-bit shift, whose spill from the neighbouring byte lands outside the mask.
inline __m256i bits_at(__m256i b, int from, int to, int mask) {
  const __m256i moved = to > from ? _mm256_slli_epi16(b, to - from) : to < from ? _mm256_srli_epi16(b, from - to) : b;
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(mask)));
}
// (lo & mask) | hi, for hi with no bit of mask set: one bitwise select (vpternlogd) with AVX-512VL.
inline __m256i or_masked(__m256i lo, int mask, __m256i hi) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(mask));
#if defined(__AVX512VL__)
  return _mm256_ternarylogic_epi32(m, lo, hi, 0xca);  // m ? lo : hi, bit by bit
#else
  return _mm256_or_si256(_mm256_and_si256(lo, m), hi);
#endif
}

// 8 unsigned bytes -> 8 floats times s.
inline __m256 scaled_u8(__m128i b, float s) { return _mm256_mul_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b))); }

// Per type: ELEMENTS and BYTES of a block, BIAS (codes are u - BIAS, subtracted in the integer sums),
// SIGNED (codes stored signed), MIN (has minimums); the 32-element types FLIPPED (group() gives signed
// codes as c + 128, vpdpbusd's unsigned operand) and group(x, lo, hi) (below);
// the super-block types, for the half-block types OFFSET8 (codes are u - OFFSET8, subtracted per
// super-block through offsets()), and block(x, sink), which hands the sink every chunk c (32 elements
// from element 32 c of the block) as scaled_chunk(c, codes, scales) with the chunk's integer scales in 16
//   int16 lanes (lane i multiplies elements 2i and 2i + 1: chunk_scale or HalfScales::chunk), for the
//   half-block types with an offset offsets(the 16 half-block scales as int16), then end_block(d),
//   the f32 super-block scale (in all 8 lanes);
// and the minimums as mins32 (8 sub-blocks of 32) or mins16 (16 half-blocks:
// integer factors as int16 lanes, times the activation's int16 code sums RowActs::isum16, times one
// f32 factor per super-block, subtracted). Layouts: block_codes.h and quant_ref.cc (decode_simd.h reads them the same way).
// The 32-element block types are decoded G blocks at a time (Group: 2 in 256 bits with AVX2, 4 in 512
// bits with AVX-512), block h's codes in 128-bit lane h of two vectors:
//   lo = [elements 0-15 of each block],  hi = [elements 16-31 of each block]
// (for the nibble types the low and the high nibbles of the blocks' qs side by side: G - 1 inserts, one
// shift, two ands for 32 G codes), and the activation codes are laid out the same way once per call
// (GroupActs). Each type gives group(x, lo, hi) for the blocks at x[0 .. G), the f16 scale at byte 0
// and, with MIN, the f16 minimum at M_AT.
// The iq4 levels with the sign bit flipped, c + 128: vpdpbusd's unsigned operand, looked up at once
// (the AVX-512 iq4_nl group and iq4_xs super-block decoders).
inline constexpr std::array<int8_t, 16> IQ4_LEVELS_FLIPPED = [] {
  std::array<int8_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(IQ4_LEVELS[i] ^ 0x80);
  return t;
}();

#if defined(__AVX512VNNI__)
struct Group {
  static constexpr int G = 4;
  using I = __m512i;
  using F = __m512;
  // The 16 bytes at x[h] + at in 128-bit lane h.
  SPARQ_INLINE static I halves(const uint8_t* const* x, int at) {
    auto two = [&](int h) SPARQ_LAMBDA {
      return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[h] + at))),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[h + 1] + at)), 1);
    };
    return _mm512_inserti64x4(_mm512_castsi256_si512(two(0)), two(2), 1);
  }
  SPARQ_INLINE static I bytes(char c) { return _mm512_set1_epi8(c); }
  SPARQ_INLINE static I low4(I b) { return _mm512_and_si512(b, bytes(0x0f)); }
  SPARQ_INLINE static I high4(I b) { return _mm512_and_si512(_mm512_srli_epi16(b, 4), bytes(0x0f)); }
  // The iq4 levels as lanes() takes signed codes, c + 128 (FLIPPED_LEVELS): the table lookup flips the
  // sign bit that lanes() would flip with one more instruction per vector.
  static constexpr bool FLIPPED_LEVELS = true;
  SPARQ_INLINE static I levels(I n) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(IQ4_LEVELS_FLIPPED.data()))), n);
  }
  // 16 added to the codes whose fifth bit is set: byte j of lane h in lo (hi) takes bit j (16 + j) of
  // dword h of qh, spread to its byte (byte j / 8 of the word) and tested into a byte mask.
  SPARQ_INLINE static void add16(I& lo, I& hi, __m128i qh) {
    constexpr long long R = 0x0101010101010101LL;  // byte b of the word in 8 bytes: b R
    const I words = _mm512_broadcast_i32x4(qh), bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ULL));
    const I spread_lo = _mm512_setr_epi64(0, R, 4 * R, 5 * R, 8 * R, 9 * R, 12 * R, 13 * R);
    const I spread_hi = _mm512_setr_epi64(2 * R, 3 * R, 6 * R, 7 * R, 10 * R, 11 * R, 14 * R, 15 * R);
    const __mmask64 set_lo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(words, spread_lo), bit);
    const __mmask64 set_hi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(words, spread_hi), bit);
    lo = _mm512_mask_add_epi8(lo, set_lo, lo, bytes(16));
    hi = _mm512_mask_add_epi8(hi, set_hi, hi, bytes(16));
  }
  SPARQ_INLINE static I load(const void* p) { return _mm512_loadu_si512(p); }
  SPARQ_INLINE static I zero() { return _mm512_setzero_si512(); }
  // Signed codes as c + 128 (the sign bit flipped: already so from levels()), against start lanes
  // holding -128 times the codes' sums.
  template <class T>
  SPARQ_INLINE static I lanes(I lo, I hi, const int8_t* x, I start) {
    if constexpr (T::SIGNED && !T::FLIPPED) {
      lo = _mm512_xor_si512(lo, bytes(static_cast<char>(0x80)));
      hi = _mm512_xor_si512(hi, bytes(static_cast<char>(0x80)));
    }
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, load(x)), hi, load(x + 64));
  }
  // The shared layout (GroupActs::shared): the activation codes x + 128 are the unsigned operand, the
  // weights' codes c (signed: u - BIAS) the signed one, and each lane starts from -128 (the sum of its
  // c), which all the activation rows share: sum c (x + 128) - 128 sum c = sum c x, exact.
  template <class T>
  SPARQ_INLINE static I shared_start(I& lo, I& hi) {
    if constexpr (T::FLIPPED) {  // levels() gave c + 128
      lo = _mm512_xor_si512(lo, bytes(static_cast<char>(0x80)));
      hi = _mm512_xor_si512(hi, bytes(static_cast<char>(0x80)));
    }
    if constexpr (T::BIAS != 0) {
      lo = _mm512_sub_epi8(lo, bytes(T::BIAS));
      hi = _mm512_sub_epi8(hi, bytes(T::BIAS));
    }
    const I c128 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero(), bytes(static_cast<char>(0x80)), lo), bytes(static_cast<char>(0x80)), hi);
    return _mm512_sub_epi32(zero(), c128);
  }
  SPARQ_INLINE static I shared_lanes(I lo, I hi, const int8_t* x, I start) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, load(x), lo), load(x + 64), hi);
  }
  SPARQ_INLINE static F fzero() { return _mm512_setzero_ps(); }
  // lanes * (scale8[G i + h] in the lanes of block h) + acc.
  SPARQ_INLINE static F fma(I lanes, __m256 scale8, int i, F acc) {
    const __m512i pick = _mm512_setr_epi32(4 * i, 4 * i, 4 * i, 4 * i, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 2, 4 * i + 2,
                                           4 * i + 2, 4 * i + 2, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), _mm512_permutexvar_ps(pick, _mm512_castps256_ps512(scale8)), acc);
  }
  SPARQ_INLINE static F add(F a, F b) { return _mm512_add_ps(a, b); }
  SPARQ_INLINE static __m256 fold(F v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
};
#else
struct Group {
  static constexpr int G = 2;
  using I = __m256i;
  using F = __m256;
  SPARQ_INLINE static I halves(const uint8_t* const* x, int at) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[0] + at))),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[1] + at)), 1);
  }
  SPARQ_INLINE static I bytes(char c) { return _mm256_set1_epi8(c); }
  SPARQ_INLINE static I low4(I b) { return _mm256_and_si256(b, bytes(0x0f)); }
  SPARQ_INLINE static I high4(I b) { return _mm256_and_si256(_mm256_srli_epi16(b, 4), bytes(0x0f)); }
  static constexpr bool FLIPPED_LEVELS = false;
  SPARQ_INLINE static I levels(I n) { return iq4_levels(n); }
  // 16 added to the codes whose fifth bit is set: byte j of lane h in lo (hi) takes bit j (16 + j) of
  // dword h of qh, spread to its byte (byte j / 8 of the word) and compared into 0x10 or 0.
  SPARQ_INLINE static void add16(I& lo, I& hi, __m128i qh) {
    constexpr long long R = 0x0101010101010101LL;  // byte b of the word in 8 bytes: b R
    const I words = _mm256_broadcastsi128_si256(qh), bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    auto fifth = [&](long long a, long long b) SPARQ_LAMBDA {  // bytes a, a + 1 (lane 0) and b, b + 1 (lane 1)
      const I spread = _mm256_shuffle_epi8(words, _mm256_setr_epi64x(a * R, (a + 1) * R, b * R, (b + 1) * R));
      return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), bytes(16));
    };
    lo = _mm256_or_si256(lo, fifth(0, 4));
    hi = _mm256_or_si256(hi, fifth(2, 6));
  }
  SPARQ_INLINE static I load(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  SPARQ_INLINE static I zero() { return _mm256_setzero_si256(); }
  // vpmaddubsw takes the codes unsigned: u <= 31 keeps its pair sums within 2 * 31 * 127, lo's and hi's
  // together within 15748; signed codes go in as |c| against x with c's sign, pairs up to 32512, so
  // lo's and hi's are widened apart.
  template <class T>
  SPARQ_INLINE static I lanes(I lo, I hi, const int8_t* x, I start) {
    const I xl = load(x), xh = load(x + 32), ones = _mm256_set1_epi16(1);
    if constexpr (T::SIGNED)
      return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(xl, lo)), ones),
                              _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(xh, hi)), ones));
    const I sums = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)), ones);
    return T::BIAS ? _mm256_add_epi32(sums, start) : sums;
  }
  SPARQ_INLINE static F fzero() { return _mm256_setzero_ps(); }
  SPARQ_INLINE static F fma(I lanes, __m256 scale8, int i, F acc) {
    const __m256i pick = _mm256_setr_epi32(2 * i, 2 * i, 2 * i, 2 * i, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_permutevar8x32_ps(scale8, pick), acc);
  }
  SPARQ_INLINE static F add(F a, F b) { return _mm256_add_ps(a, b); }
  SPARQ_INLINE static __m256 fold(F v) { return v; }
};
#endif
using GroupI = Group::I;
// Nibbles: the 16 bytes at x[h] + at.
SPARQ_INLINE void nibble_group(const uint8_t* const* x, int at, GroupI& lo, GroupI& hi) {
  const GroupI b = Group::halves(x, at);
  lo = Group::low4(b);
  hi = Group::high4(b);
}
// q5_0 / q5_1: the nibbles at x[h] + at + 4, plus 16 where the fifth bit (bit e of the 32-bit qh at
// x[h] + at, element e) is set.
SPARQ_INLINE void fifth_group(const uint8_t* const* x, int at, GroupI& lo, GroupI& hi) {
  nibble_group(x, at + 4, lo, hi);
  // The G words qh in the dwords of one 128-bit vector, then Group::add16.
  auto word = [&](int h) SPARQ_LAMBDA {
    uint32_t qh;
    std::memcpy(&qh, x[h] + at, 4);
    return static_cast<int>(qh);
  };
  // Lane indices spelled as constants: an insert's selector must be one even where the loop would
  // not be unrolled (the sanitizers' build).
  static_assert(Group::G == 2 || Group::G == 4, "a group is 2 or 4 blocks");
  __m128i qh;
  if constexpr (Group::G == 4) qh = _mm_setr_epi32(word(0), word(1), word(2), word(3));
  else qh = _mm_setr_epi32(word(0), word(1), 0, 0);
  Group::add16(lo, hi, qh);
}
struct Q4_0 {  // d | qs[16]
  static constexpr WeightType TYPE = WeightType::q4_0;
  static constexpr int ELEMENTS = 32, BYTES = 18, BIAS = q8_bias(WeightType::q4_0), M_AT = 0;
  static constexpr bool SIGNED = q8_signed(WeightType::q4_0), MIN = q8_has_min(WeightType::q4_0), FLIPPED = false;
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) { nibble_group(x, 2, lo, hi); }
};
struct Q4_1 {  // d | m | qs[16]
  static constexpr WeightType TYPE = WeightType::q4_1;
  static constexpr int ELEMENTS = 32, BYTES = 20, BIAS = q8_bias(WeightType::q4_1), M_AT = 2;
  static constexpr bool SIGNED = q8_signed(WeightType::q4_1), MIN = q8_has_min(WeightType::q4_1), FLIPPED = false;
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) { nibble_group(x, 4, lo, hi); }
};
struct Q5_0 {  // d | qh[4] | qs[16]
  static constexpr WeightType TYPE = WeightType::q5_0;
  static constexpr int ELEMENTS = 32, BYTES = 22, BIAS = q8_bias(WeightType::q5_0), M_AT = 0;
  static constexpr bool SIGNED = q8_signed(WeightType::q5_0), MIN = q8_has_min(WeightType::q5_0), FLIPPED = false;
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) { fifth_group(x, 2, lo, hi); }
};
struct Q5_1 {  // d | m | qh[4] | qs[16]
  static constexpr WeightType TYPE = WeightType::q5_1;
  static constexpr int ELEMENTS = 32, BYTES = 24, BIAS = q8_bias(WeightType::q5_1), M_AT = 2;
  static constexpr bool SIGNED = q8_signed(WeightType::q5_1), MIN = q8_has_min(WeightType::q5_1), FLIPPED = false;
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) { fifth_group(x, 4, lo, hi); }
};
struct Q8_0 {  // d | qs[32] signed
  static constexpr WeightType TYPE = WeightType::q8_0;
  static constexpr int ELEMENTS = 32, BYTES = 34, BIAS = q8_bias(WeightType::q8_0), M_AT = 0;
  static constexpr bool SIGNED = q8_signed(WeightType::q8_0), MIN = q8_has_min(WeightType::q8_0), FLIPPED = false;
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) {
    lo = Group::halves(x, 2);
    hi = Group::halves(x, 18);
  }
};
struct IQ4_NL {  // d | qs[16] through the iq4 levels (signed)
  static constexpr WeightType TYPE = WeightType::iq4_nl;
  static constexpr int ELEMENTS = 32, BYTES = 18, BIAS = q8_bias(WeightType::iq4_nl), M_AT = 0;
  static constexpr bool SIGNED = q8_signed(WeightType::iq4_nl), MIN = q8_has_min(WeightType::iq4_nl);
  static constexpr bool FLIPPED = Group::FLIPPED_LEVELS;  // codes c + 128 from Group::levels()
  SPARQ_INLINE static void group(const uint8_t* const* x, GroupI& lo, GroupI& hi) {
    nibble_group(x, 2, lo, hi);
    lo = Group::levels(lo);
    hi = Group::levels(hi);
  }
};
// Sub-block scales as vpmaddwd operands. 32-element sub-blocks: the 8 scales (int32 lanes of sc32)
// as int16 in both 128-bit halves, then chunk c's in all 16 lanes (one byte shuffle).
SPARQ_INLINE __m256i scales16(__m256i sc32) { return _mm256_permute4x64_epi64(_mm256_packs_epi32(sc32, sc32), 0x88); }
SPARQ_INLINE __m256i chunk_scale(__m256i sc16, int c) {
  return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(static_cast<short>(2 * c + ((2 * c + 1) << 8))));
}
// Of 8 int16 scales in both 128-bit halves, scale 2p in lanes 0-7 and scale 2p + 1 in lanes 8-15 (p < 4).
SPARQ_INLINE __m256i scale_pair(__m256i sc8, int p) {
  const char a = static_cast<char>(4 * p), b = static_cast<char>(a + 2);
  return _mm256_shuffle_epi8(sc8, _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, b, b + 1,
                                                   b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1));
}
// 16-element half-blocks: the 16 int8 scales sc as int16 (all), and scales 0-7 / 8-15 in both 128-bit
// halves (low / high); chunk c's: half-block 2c's scale in lanes 0-7, 2c + 1's in lanes 8-15.
struct HalfScales {
  __m256i all, low, high;
  explicit HalfScales(__m128i sc)
      : all(_mm256_cvtepi8_epi16(sc)), low(_mm256_permute2x128_si256(all, all, 0x00)), high(_mm256_permute2x128_si256(all, all, 0x11)) {}
  SPARQ_INLINE __m256i chunk(int c) const { return scale_pair(c < 4 ? low : high, c % 4); }
};

#if defined(__AVX512BW__)
// The 512-bit super-block decoders (matvec_q8_avx512.cc): T::block512(x, sink) hands the sink the four
// 64-byte units u of a super-block, two chunks per vector, as wide(u, codes, scales) (iq4_xs:
// wide_signed(p, codes of units 2p and 2p + 1, int32 scales)). Unit u holds the 16-element groups
// T::SLOTS[4 u .. 4 u + 4) in its four 128-bit lanes, in the order the type's bytes decode with the
// fewest operations; ActCodes lays the activation codes out the same way once per call, so that a unit
// meets one 64-byte load per activation row. Half the instructions of the 256-bit chunks per element.
constexpr bool WIDE_BLOCKS = true;
using WideInt = __m512i;
SPARQ_INLINE __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }
// The 32 bytes at p in both 256-bit halves.
SPARQ_INLINE __m512i twice32(const uint8_t* p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
// The bytes of m with bit `lo` set (low 256-bit half) or bit `hi` set (high half).
SPARQ_INLINE __mmask64 bit_per_half(__m512i m, int lo, int hi) {
  const long long l = 0x0101010101010101LL << lo, h = 0x0101010101010101LL << hi;
  return _mm512_test_epi8_mask(m, _mm512_set_epi64(h, h, h, h, l, l, l, l));
}
// The 16-bit lanes of each 256-bit half shifted by `lo` (low half) or `hi` (high half), left (> 0) or right.
SPARQ_INLINE __m512i shift_per_half(__m512i v, int lo, int hi) {
  const auto count = [](int n) { return static_cast<long long>(0x0001000100010001ULL * static_cast<unsigned>(n < 0 ? -n : n)); };
  const __m512i c = _mm512_set_epi64(count(hi), count(hi), count(hi), count(hi), count(lo), count(lo), count(lo), count(lo));
  return lo >= 0 && hi >= 0 ? _mm512_sllv_epi16(v, c) : _mm512_srlv_epi16(v, c);
}
// (a & 0x0f) | b, one bitwise merge (vpternlogd).
SPARQ_INLINE __m512i low4_or(__m512i a, __m512i b) { return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x0f), 0xec); }
// The int16 scale of each pair of elements of unit u: the lanes of sc (one per sub-block of SUB
// elements, in lanes 0-15) that the unit's groups (T::SLOTS) belong to.
template <class T, int SUB>
SPARQ_INLINE __m512i unit_scales(__m512i sc, int u) {
  static constexpr auto index = [] {
    std::array<std::array<int16_t, 32>, 4> t{};
    for (int v = 0; v < 4; ++v)
      for (int i = 0; i < 32; ++i) t[v][i] = static_cast<int16_t>(T::SLOTS[4 * v + i / 8] * 16 / SUB);
    return t;
  }();
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(index[u].data()), sc);
}
#if defined(__AVX512VNNI__)
// The int16 scale of each lane of RowsSums' packed sums (vpackssdw of e and o: int16 lane 8i + j is
// int32 lane 4i + j of e for j < 4, of o for j >= 4; e's lanes from T's vector 0, o's from vector 2):
// the lanes of sc (one per sub-block of SUB elements) those sums belong to.
template <class T, int SUB>
SPARQ_INLINE __m512i rows_scales(__m512i sc) {
  static constexpr auto index = [] {
    std::array<int16_t, 32> t{};
    for (int q = 0; q < 32; ++q) t[q] = static_cast<int16_t>(T::rows_element(q % 8 < 4 ? 0 : 2, 4 * (4 * (q / 8) + q % 4)) / SUB);
    return t;
  }();
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(index.data()), sc);
}
#endif
#else
constexpr bool WIDE_BLOCKS = false;
using WideInt = __m256i;  // (no wide blocks)
#endif

// Q2_K's and Q3_K's 2-bit planes read in place (AVX2). Chunk 4H + k's low code bits are bits 2k of
// its 32 bytes; they stay there for k < 2, and chunks 2 and 3 share one shift by 2 (to bits 2-3 and
// 4-5), so the chunk's codes are 2^at(k) times their value (at most 7 * 16 = 112: a vpmaddubsw pair
// stays within 2 * 112 * 127 < 2^15) for one shift per 4 chunks instead of 3 (q3_k: its high bits,
// moved to bit at(k) + 2, then need 4 shifts of hmask per super-block, not 7). Each half-block's scale
// is multiplied by 16 / 2^at(k) instead, so every chunk adds 16 times its sum to the super-block's,
// and the f32 step is d / 16 (exact: a power of two).
struct InPlace {
  static constexpr int at(int k) { return k == 0 ? 0 : k < 3 ? 2 : 4; }
  // The factor 16 / 2^at(k) of each int16 lane, lane i holding the scale of chunk (i / PER) % 4.
  template <int PER>
  SPARQ_INLINE static __m256i factors() {
    constexpr short f[4] = {16 >> at(0), 16 >> at(1), 16 >> at(2), 16 >> at(3)};
    return PER == 1 ? _mm256_setr_epi16(f[0], f[1], f[2], f[3], f[0], f[1], f[2], f[3], f[0], f[1], f[2], f[3], f[0], f[1], f[2], f[3])
                    : _mm256_setr_epi16(f[0], f[0], f[1], f[1], f[2], f[2], f[3], f[3], f[0], f[0], f[1], f[1], f[2], f[2], f[3], f[3]);
  }
  // The super-block's f32 step d (the f16 at p) over 16.
  SPARQ_INLINE static __m256 step(const uint8_t* p) { return _mm256_mul_ps(Avx2::set1_half(load_u16(p)), _mm256_set1_ps(1.0f / 16)); }
};

// scales[16] (low nibble scale, high nibble minimum per 16) | qs[64] | d | dmin. Chunk 4H + k is bits
// 2k of qs[32 H .. 32 H + 32).
struct Q2_K : InPlace {
  static constexpr WeightType TYPE = WeightType::q2_k;
  static constexpr int ELEMENTS = 256, BYTES = 84, BIAS = q8_bias(WeightType::q2_k), OFFSET8 = q8_offset8(WeightType::q2_k);
  static constexpr bool SIGNED = q8_signed(WeightType::q2_k), MIN = q8_has_min(WeightType::q2_k);
  template <class S>
  SPARQ_INLINE static void block(const uint8_t* x, S& s) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
    // The minimums: the high nibbles, widened to int16 then shifted down.
    s.mins16(_mm256_srli_epi16(_mm256_cvtepu8_epi16(sc), 4), Avx2::set1_half(load_u16(x + 82)));
    // The scales (the low nibbles) times InPlace's factors, in both 128-bit halves as bytes (at most
    // 15 * 16 = 240: vpmullw on byte pairs, which share their chunk, carries nothing into the high
    // byte), then chunk c's two zero-extended to int16 by the shuffle itself (index 0x80 gives a zero byte).
    const __m256i sc8 = _mm256_mullo_epi16(_mm256_and_si256(_mm256_broadcastsi128_si256(sc), _mm256_set1_epi8(0x0f)), factors<1>());
    for (int H = 0; H < 2; ++H) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 + 32 * H));
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * H + k;
        const short l = static_cast<short>(0x8000 | (2 * c)), h = static_cast<short>(l + 1);
        const __m256i scales = _mm256_shuffle_epi8(sc8, _mm256_setr_epi16(l, l, l, l, l, l, l, l, h, h, h, h, h, h, h, h));
        s.scaled_chunk(c, bits_at(b, 2 * k, at(k), 3 << at(k)), scales, at(k));
      }
    }
    s.end_block(step(x + 80));
  }
#if defined(__AVX512BW__)
  // Unit k: bits 2k of qs (chunks k and 4 + k).
  static constexpr int8_t SLOTS[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  template <class S>
  SPARQ_INLINE static void block512(const uint8_t* x, S& s) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
    s.mins16(_mm256_srli_epi16(_mm256_cvtepu8_epi16(sc), 4), Avx2::set1_half(load_u16(x + 82)));
    const __m512i scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0f))));
    const __m512i b = load64(x + 16);
    for (int k = 0; k < 4; ++k)
      s.wide(k, _mm512_and_si512(k ? _mm512_srli_epi16(b, 2 * k) : b, _mm512_set1_epi8(3)), unit_scales<Q2_K, 16>(scales, k));
    s.end_block(Avx2::set1_half(load_u16(x + 80)));
  }
#endif
};
// hmask[32] | qs[64] | scales[12] | d. Codes as q2_k's plus bit 4 H + k of hmask[l] as their third bit,
// minus 4 (OFFSET8); 16 signed 6-bit scales (- 32): low
// nibbles of scales[0..8) then their high nibbles, the top two bits of scale s at bit 2 (s / 4) of
// scales[8 + s % 4].
struct Q3_K : InPlace {
  static constexpr WeightType TYPE = WeightType::q3_k;
  static constexpr int ELEMENTS = 256, BYTES = 110, BIAS = q8_bias(WeightType::q3_k), OFFSET8 = q8_offset8(WeightType::q3_k);
  static constexpr bool SIGNED = q8_signed(WeightType::q3_k), MIN = q8_has_min(WeightType::q3_k);
  // The 16 scales as int8, in both 128-bit halves (from broadcast loads, which take no vector pipe).
  SPARQ_INLINE static __m256i scales8x2(const uint8_t* x) {
    const uint8_t* p = x + 96;
    uint64_t a8;
    uint32_t aux;
    std::memcpy(&a8, p, 8);
    std::memcpy(&aux, p + 8, 4);
    // qwords: the bytes p[0..8), then their high nibbles.
    const __m256i low4 = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(static_cast<long long>(a8)), _mm256_setr_epi64x(0, 4, 0, 4)),
                                          _mm256_set1_epi8(0x0f));
    // dword i of each half holds scales 4i .. 4i + 3: aux >> 2i, two bits per byte, moved to bits 4-5.
    const __m256i high2 = _mm256_slli_epi16(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(aux)), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)),
                         _mm256_set1_epi8(3)),
        4);
    return _mm256_sub_epi8(_mm256_or_si256(low4, high2), _mm256_set1_epi8(32));
  }
  SPARQ_INLINE static __m128i scales8(const uint8_t* x) { return _mm256_castsi256_si128(scales8x2(x)); }
  template <class S>
  SPARQ_INLINE static void block(const uint8_t* x, S& s) {
    // The scales 0-7 (8-15) as int16 in both 128-bit halves, 256 times (each byte above a zero byte:
    // no lane crossing), then times InPlace's factors by a high-half multiply by 256 times them.
    const __m256i sc = scales8x2(x), zero = _mm256_setzero_si256(), f = _mm256_slli_epi16(factors<2>(), 8);
    const __m256i low = _mm256_unpacklo_epi8(zero, sc), high = _mm256_unpackhi_epi8(zero, sc);
    const __m256i low_f = _mm256_mulhi_epi16(low, f), high_f = _mm256_mulhi_epi16(high, f);
    // InPlace: the low bits where they are, the high bit (bit 4H + k of hmask) moved above them.
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    for (int H = 0; H < 2; ++H) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 + 32 * H));
      for (int k = 0; k < 4; ++k)
        s.scaled_chunk(4 * H + k, _mm256_or_si256(bits_at(b, 2 * k, at(k), 3 << at(k)), bits_at(hm, 4 * H + k, at(k) + 2, 4 << at(k))),
                       scale_pair(H ? high_f : low_f, k), at(k));
    }
    // 16 times the scales (as the chunks' sums) in lanes 0-15.
    s.offsets(_mm256_srai_epi16(_mm256_blend_epi32(low, high, 0xf0), 4));
    s.end_block(step(x + 108));
  }
#if defined(__AVX512BW__)
  // Unit k: bits 2k of qs (chunks k and 4 + k), with bit k (low half) or 4 + k (high half) of hmask.
  static constexpr int8_t SLOTS[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  template <class S>
  SPARQ_INLINE static void block512(const uint8_t* x, S& s) {
    const __m256i sc = _mm256_cvtepi8_epi16(scales8(x));
    const __m512i hm = twice32(x), b = load64(x + 32);
    for (int k = 0; k < 4; ++k) {
      const __m512i low = _mm512_and_si512(k ? _mm512_srli_epi16(b, 2 * k) : b, _mm512_set1_epi8(3));
      s.wide(k, _mm512_mask_add_epi8(low, bit_per_half(hm, k, 4 + k), low, _mm512_set1_epi8(4)),
             unit_scales<Q3_K, 16>(_mm512_castsi256_si512(sc), k));
    }
    s.offsets(sc);
    s.end_block(Avx2::set1_half(load_u16(x + 108)));
  }
#endif
};
// q4_k / q5_k: d | dmin | scales[12] (8 6-bit scales and minimums, scale_min_k's packing) | (qh[32]) |
// qs[128]. Chunks 2p and 2p + 1 are the low and high nibbles of qs[32 p .. 32 p + 32); q5_k's fifth
// bits are bits 2p and 2p + 1 of qh[l].
template <bool FIVE>
struct QX_K {
  static constexpr WeightType TYPE = FIVE ? WeightType::q5_k : WeightType::q4_k;
  static constexpr int ELEMENTS = 256, BYTES = FIVE ? 176 : 144, BIAS = q8_bias(WeightType::q4_k);
  static constexpr bool SIGNED = q8_signed(WeightType::q4_k), MIN = q8_has_min(WeightType::q4_k);
  // Hands the sink the minimums (mins32) and returns the 8 scales as int16, in both 128-bit halves.
  template <class S>
  SPARQ_INLINE static __m256i scales_mins(const uint8_t* x, S& s) {
    // scale_min_k on four bytes at once: sub-blocks 0-3 in the low six bits of bytes 0-3 (scales)
    // and 4-7 (minimums); 4-7 from the nibbles of bytes 8-11 with the top bits of bytes 0-7.
    uint32_t w[3];
    std::memcpy(w, x + 4, 12);
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0f) | (((w[0] >> 6) & 0x03030303) << 4);
    const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0f) | (((w[1] >> 6) & 0x03030303) << 4);
    s.mins32(scaled_u8(_mm_setr_epi32(static_cast<int>(w[1] & 0x3f3f3f3f), static_cast<int>(mn_hi), 0, 0), -f16_at(x + 2)));
    return _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(w[0] & 0x3f3f3f3f), static_cast<int>(sc_hi), 0, 0)));
  }
  template <class S>
  SPARQ_INLINE static void block(const uint8_t* x, S& s) {
    chunks(x, scales_mins(x, s), s);
    s.end_block(Avx2::set1_half(load_u16(x)));
  }
  // The 8 chunks of the super-block at x, its scales sc (scales_mins), into the sink.
  template <class S>
  SPARQ_INLINE static void chunks(const uint8_t* x, __m256i sc, S& s) {
    const uint8_t* qs = x + (FIVE ? 48 : 16);
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256i qh = _mm256_setzero_si256();
    if (FIVE) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16));
    for (int p = 0; p < 4; ++p) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p));
      __m256i lo = _mm256_and_si256(b, low), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
      if (FIVE) {
        lo = _mm256_or_si256(lo, bits_at(qh, 2 * p, 4, 0x10));
        hi = _mm256_or_si256(hi, bits_at(qh, 2 * p + 1, 4, 0x10));
      }
      s.scaled_chunk(2 * p, lo, chunk_scale(sc, 2 * p));
      s.scaled_chunk(2 * p + 1, hi, chunk_scale(sc, 2 * p + 1));
    }
  }
#if defined(__AVX512BW__)
  // Units 2P and 2P + 1: the low and high nibbles of qs[64 P .. 64 P + 64) (chunks 4P, 4P + 2 and
  // 4P + 1, 4P + 3), q5_k's fifth bits the matching bits of qh.
  static constexpr int8_t SLOTS[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  template <class S>
  SPARQ_INLINE static void block512(const uint8_t* x, S& s) {
    chunks512(x, _mm512_castsi256_si512(scales_mins(x, s)), s);
    s.end_block(Avx2::set1_half(load_u16(x)));
  }
  // Two super-blocks' scale_min_k at once, x0's in the low 128-bit half and x1's in the high one:
  // scales_mins in vector registers, per half bytes 0-7 the 8 scales and 8-15 the 8 minimums. With
  // 512-bit chunks, scales_mins' scalar work was what bound one row's decode (rows_q8_pairs, in L2:
  // q4_k 80 -> 62 ns per 4096-weight row, q5_k 81 -> 76 on Zen 5, bench/ggml-rows.cc --hot); the
  // 256-bit chunks keep the vector pipes busy enough that moving it onto them gained nothing there.
  struct Pair {
    __m256i scales16, mins16;  // per half, its super-block's 8 scales / minimums as int16
    __m128 d;                  // d0, -dmin0, d1, -dmin1
    SPARQ_INLINE Pair(const uint8_t* x0, const uint8_t* x1) {
      // dwords 0-2 of each half: the 12 bytes of scales (a 16-byte load, inside the block)
      const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x0 + 4))),
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(x1 + 4)), 1);
      // dword 0: scales 0-3, dword 1: minimums 0-3 (their low six bits)
      const __m256i low6 = _mm256_and_si256(v, _mm256_set1_epi8(0x3f));
      // dword 0: scales 4-7, the low nibbles of dword 2 with the top two bits of dword 0 above them;
      // dword 1: minimums 4-7, the high nibbles of dword 2 with the top two bits of dword 1
      const __m256i nibbles = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0xaa), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
      const __m256i high = _mm256_or_si256(_mm256_and_si256(nibbles, _mm256_set1_epi8(0x0f)),
                                           _mm256_and_si256(_mm256_srli_epi32(v, 2), _mm256_set1_epi8(0x30)));
      const __m256i both = _mm256_unpacklo_epi32(low6, high);  // scales 0-3, 4-7, minimums 0-3, 4-7
      scales16 = _mm256_unpacklo_epi8(both, _mm256_setzero_si256());
      mins16 = _mm256_unpackhi_epi8(both, _mm256_setzero_si256());
      uint32_t h0, h1;
      std::memcpy(&h0, x0, 4);
      std::memcpy(&h1, x1, 4);
      d = _mm_xor_ps(_mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128(static_cast<int>(h0)), _mm_cvtsi32_si128(static_cast<int>(h1)))),
                     _mm_setr_ps(0.0f, -0.0f, 0.0f, -0.0f));
    }
    // Super-block i's scales as scales_mins returns them.
    SPARQ_INLINE __m256i scales(int i) const { return _mm256_permute2x128_si256(scales16, scales16, i ? 0x11 : 0x00); }
    // Super-block i's minimums times -dmin, as scales_mins hands them to mins32 (the same products).
    SPARQ_INLINE __m256 mins(int i) const {
      const __m128i m = i ? _mm256_extracti128_si256(mins16, 1) : _mm256_castsi256_si128(mins16);
      const __m256 neg_dmin = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d), _mm256_set1_epi32(2 * i + 1));
      return _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(m)));
    }
    // Super-block i's d in all 8 lanes.
    SPARQ_INLINE __m256 step(int i) const { return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d), _mm256_set1_epi32(2 * i)); }
  };
  // Super-blocks x0 and x1 into sinks s0 and s1 (two weight rows of one activation row), as
  // block512 would, bit for bit.
  template <class S>
  SPARQ_INLINE static void block_pair(const uint8_t* x0, S& s0, const uint8_t* x1, S& s1) {
    const Pair p(x0, x1);
    s0.mins32(p.mins(0));
    s1.mins32(p.mins(1));
    chunks512(x0, _mm512_castsi256_si512(p.scales(0)), s0);
    chunks512(x1, _mm512_castsi256_si512(p.scales(1)), s1);
    s0.end_block(p.step(0));
    s1.end_block(p.step(1));
  }
  // The 4 units of the super-block at x, its scales sc (scales_mins), into the sink.
  template <class S>
  SPARQ_INLINE static void chunks512(const uint8_t* x, __m512i sc, S& s) {
    const __m512i low = _mm512_set1_epi8(0x0f), fifth = _mm512_set1_epi8(0x10);
    const uint8_t* qs = x + (FIVE ? 48 : 16);
    const __m512i qh = FIVE ? twice32(x + 16) : _mm512_setzero_si512();
    for (int P = 0; P < 2; ++P) {
      const __m512i b = load64(qs + 64 * P);
      __m512i lo = _mm512_and_si512(b, low), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
      if (FIVE) {
        lo = _mm512_mask_add_epi8(lo, bit_per_half(qh, 4 * P, 4 * P + 2), lo, fifth);
        hi = _mm512_mask_add_epi8(hi, bit_per_half(qh, 4 * P + 1, 4 * P + 3), hi, fifth);
      }
      s.wide(2 * P, lo, unit_scales<QX_K, 32>(sc, 2 * P));
      s.wide(2 * P + 1, hi, unit_scales<QX_K, 32>(sc, 2 * P + 1));
    }
  }
#endif
#if defined(__AVX512VNNI__)
  // Several activation rows (RowsSums): vector v, 128-bit lane i, byte l holds element l (v even) or
  // 16 + l (v odd) of sub-block 2i (v < 2) or 2i + 1: vectors 0 and 1 the low nibbles of qs[16 j ..
  // 16 j + 16) for even and odd j, taken four 16-byte pieces at a time (vshufi64x2), 2 and 3 their high
  // nibbles. q5_k's fifth bit of sub-block s, element e is bit s of qh[e].
  static constexpr bool SIGNED_ROWS = false;
  static constexpr int rows_element(int v, int p) { return 32 * (2 * (p / 16) + v / 2) + 16 * (v % 2) + p % 16; }
  template <class S>
  SPARQ_INLINE static void block_rows(const uint8_t* x, S& s) {
    const __m512i sc = _mm512_castsi256_si512(scales_mins(x, s)), low = _mm512_set1_epi8(0x0f);
    const uint8_t* qs = x + (FIVE ? 48 : 16);
    const __m512i z0 = load64(qs), z1 = load64(qs + 64);
    const __m512i even = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)), odd = _mm512_shuffle_i64x2(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
    __m512i c[4] = {_mm512_and_si512(even, low), _mm512_and_si512(odd, low), _mm512_and_si512(_mm512_srli_epi16(even, 4), low),
                    _mm512_and_si512(_mm512_srli_epi16(odd, 4), low)};
    if (FIVE) {
      constexpr long long R = 0x0101010101010101LL;  // bit 2i (sub-block 2i) in 128-bit lane i, or bit 2i + 1
      const __m512i bit_lo = _mm512_setr_epi64(R, R, 4 * R, 4 * R, 16 * R, 16 * R, 64 * R, 64 * R);
      const __m512i bit_hi = _mm512_slli_epi64(bit_lo, 1);
      const __m512i first = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
      const __m512i second = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 32)));
      const __m512i fifth = _mm512_set1_epi8(0x10);
      c[0] = _mm512_mask_add_epi8(c[0], _mm512_test_epi8_mask(first, bit_lo), c[0], fifth);
      c[1] = _mm512_mask_add_epi8(c[1], _mm512_test_epi8_mask(second, bit_lo), c[1], fifth);
      c[2] = _mm512_mask_add_epi8(c[2], _mm512_test_epi8_mask(first, bit_hi), c[2], fifth);
      c[3] = _mm512_mask_add_epi8(c[3], _mm512_test_epi8_mask(second, bit_hi), c[3], fifth);
    }
    s.rows(c, rows_scales<QX_K, 32>(sc), f16_at(x));
  }
#endif
};
// ql[128] | qh[64] | scales[16] int8 | d. Chunk 4H + k: nibble (k >= 2: high) of ql[64 H + 32 (k % 2) + l]
// with bits 2k of qh[32 H + l] as bits 4-5; minus 32 (OFFSET8, as q3_k).
struct Q6_K {
  static constexpr WeightType TYPE = WeightType::q6_k;
  static constexpr int ELEMENTS = 256, BYTES = 210, BIAS = q8_bias(WeightType::q6_k), OFFSET8 = q8_offset8(WeightType::q6_k);
  static constexpr bool SIGNED = q8_signed(WeightType::q6_k), MIN = q8_has_min(WeightType::q6_k);
  template <class S>
  SPARQ_INLINE static void block(const uint8_t* x, S& s) {
    const HalfScales scales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 192)));
    for (int H = 0; H < 2; ++H) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 64 * H));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 64 * H + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 128 + 32 * H));
      for (int k = 0; k < 4; ++k) {
        const __m256i b = k % 2 ? b1 : b0;
        s.scaled_chunk(4 * H + k, or_masked(k >= 2 ? _mm256_srli_epi16(b, 4) : b, 0x0f, bits_at(h, 2 * k, 4, 0x30)),
                       scales.chunk(4 * H + k));
      }
    }
    s.offsets(scales.all);
    s.end_block(Avx2::set1_half(load_u16(x + 208)));
  }
#if defined(__AVX512BW__)
  // Units 2H and 2H + 1: the low and high nibbles of ql[64 H .. 64 H + 64) (chunks 4H, 4H + 1 and
  // 4H + 2, 4H + 3), with the bits of qh[32 H + l] (0-1 | 2-3 and 4-5 | 6-7) as bits 4-5.
  static constexpr int8_t SLOTS[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  // Units 2H and 2H + 1 (the 6-bit codes u).
  SPARQ_INLINE static void units(const uint8_t* x, int H, __m512i& lo, __m512i& hi) {
    const __m512i high = _mm512_set1_epi8(0x30);
    const __m512i ql = load64(x + 64 * H), qh = twice32(x + 128 + 32 * H);
    lo = low4_or(ql, _mm512_and_si512(shift_per_half(qh, 4, 2), high));
    hi = low4_or(_mm512_srli_epi16(ql, 4), _mm512_and_si512(shift_per_half(qh, 0, -2), high));
  }
  SPARQ_INLINE static __m256i scales16(const uint8_t* x) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 192)));
  }
  template <class S>
  SPARQ_INLINE static void block512(const uint8_t* x, S& s) {
    const __m256i sc = scales16(x);
    for (int H = 0; H < 2; ++H) {
      __m512i lo, hi;
      units(x, H, lo, hi);
      s.wide(2 * H, lo, unit_scales<Q6_K, 16>(_mm512_castsi256_si512(sc), 2 * H));
      s.wide(2 * H + 1, hi, unit_scales<Q6_K, 16>(_mm512_castsi256_si512(sc), 2 * H + 1));
    }
    s.offsets(sc);
    s.end_block(Avx2::set1_half(load_u16(x + 208)));
  }
#endif
#if defined(__AVX512VNNI__)
  // Several activation rows (RowsSums): units 2H and 2H + 1 (half-blocks 8H + i and 8H + 4 + i in
  // 128-bit lane i) interleaved by 8 bytes (vpunpcklqdq / vpunpckhqdq), so that int32 lane m of vectors
  // 2H and 2H + 1 holds 4 codes each of one half-block: elements 0-7 (v even) or 8-15 of half-blocks
  // 8 (v / 2) + i and 8 (v / 2) + 4 + i; as signed codes c = u - 32 (SIGNED_ROWS).
  static constexpr bool SIGNED_ROWS = true;
  static constexpr int rows_element(int v, int p) { return 16 * (8 * (v / 2) + 4 * (p % 16 / 8) + p / 16) + 8 * (v % 2) + p % 8; }
  template <class S>
  SPARQ_INLINE static void block_rows(const uint8_t* x, S& s) {
    __m512i u[4];
    units(x, 0, u[0], u[1]);
    units(x, 1, u[2], u[3]);
    const __m512i off = _mm512_set1_epi8(OFFSET8);
    const __m512i c[4] = {_mm512_sub_epi8(_mm512_unpacklo_epi64(u[0], u[1]), off), _mm512_sub_epi8(_mm512_unpackhi_epi64(u[0], u[1]), off),
                          _mm512_sub_epi8(_mm512_unpacklo_epi64(u[2], u[3]), off), _mm512_sub_epi8(_mm512_unpackhi_epi64(u[2], u[3]), off)};
    s.rows(c, rows_scales<Q6_K, 16>(_mm512_castsi256_si512(scales16(x))), f16_at(x + 208));
  }
#endif
};
// d | scales_h (u16) | scales_l[4] | qs[128]: 8 iq4_nl-style sub-blocks, 6-bit scales minus 32.
struct IQ4_XS {
  static constexpr WeightType TYPE = WeightType::iq4_xs;
  static constexpr int ELEMENTS = 256, BYTES = 136, BIAS = q8_bias(WeightType::iq4_xs);
  static constexpr bool SIGNED = q8_signed(WeightType::iq4_xs), MIN = q8_has_min(WeightType::iq4_xs);
  // Scale c in int32 lane c: nibble c % 2 of scales_l[c / 2] | bits 2c of scales_h as bits 4-5, minus 32.
  SPARQ_INLINE static __m256i scales32(const uint8_t* x) {
    uint32_t low4;
    std::memcpy(&low4, x + 4, 4);
    const __m128i l = _mm_cvtsi32_si128(static_cast<int>(low4)), nib = _mm_set1_epi8(0x0f);
    const __m256i low = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(_mm_and_si128(l, nib), _mm_and_si128(_mm_srli_epi16(l, 4), nib)));
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(load_u16(x + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  }
  // Chunks 2p and 2p + 1 (32-byte units; ActCodes lays the activation codes out the same way): the
  // low and high nibbles of qs[32 p .. 32 p + 32), the first and second halves of sub-blocks 2p and
  // 2p + 1 (one per 128-bit lane). No lane crossing, and one scale vector for both.
  static constexpr int8_t SLOTS256[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  template <class S>
  SPARQ_INLINE static void block(const uint8_t* x, S& s) {
    const __m256i sc = scales16(scales32(x)), low = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 + 32 * p)), scales = scale_pair(sc, p);
      s.scaled_chunk(2 * p, iq4_levels(_mm256_and_si256(b, low)), scales);
      s.scaled_chunk(2 * p + 1, iq4_levels(_mm256_and_si256(_mm256_srli_epi16(b, 4), low)), scales);
    }
    s.end_block(Avx2::set1_half(load_u16(x)));
  }
#if defined(__AVX512BW__)
  // Units 2P and 2P + 1: the low and high nibbles of qs[64 P .. 64 P + 64), the first and second
  // halves of sub-blocks 4P .. 4P + 3 (one per 128-bit lane), as levels + 128 (vpdpbusd's unsigned
  // operand; ActCodes' bias lanes take the 128 back).
  static constexpr int8_t SLOTS[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  template <class S>
  SPARQ_INLINE static void block512(const uint8_t* x, S& s) {
    const __m512i sc = _mm512_castsi256_si512(scales32(x)), low = _mm512_set1_epi8(0x0f);
    const __m512i levels = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(IQ4_LEVELS_FLIPPED.data())));
    for (int P = 0; P < 2; ++P) {
      const __m512i b = load64(x + 8 + 64 * P);
      const __m512i scales =
          _mm512_permutexvar_epi32(_mm512_setr_epi32(4 * P, 4 * P, 4 * P, 4 * P, 4 * P + 1, 4 * P + 1, 4 * P + 1, 4 * P + 1, 4 * P + 2,
                                                     4 * P + 2, 4 * P + 2, 4 * P + 2, 4 * P + 3, 4 * P + 3, 4 * P + 3, 4 * P + 3),
                                   sc);
      s.wide_signed(P, _mm512_shuffle_epi8(levels, _mm512_and_si512(b, low)),
                    _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(b, 4), low)), scales);
    }
    s.end_block(Avx2::set1_half(load_u16(x)));
  }
#endif
};

// The decoders above, one per block type (TYPE): the per-type kernel tables below are built from this
// list, so a new block type adds its decoder here.
template <class... T>
struct DecoderList {};
using Q8Decoders = DecoderList<Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, QX_K<false>, QX_K<true>, Q6_K, IQ4_XS>;

// A table with entry T::TYPE = make(T{}) for each decoder T of the list (null for the plain types).
template <class Fn, class Make, class... T>
constexpr PerWeightType<Fn> per_decoder(Make make, DecoderList<T...>) {
  PerWeightType<Fn> table{};
  static_cast<void>(((table[static_cast<int>(T::TYPE)] = make(T{})), ...));
  return table;
}

// The 16 int16 pair sums of a super-block chunk's codes against activation codes x: lane i holds
// elements 2i and 2i + 1 (vpmaddubsw; signed codes as |c| times x with c's sign, exact: see the top).
template <class T>
SPARQ_INLINE __m256i pair_sums(__m256i codes, __m256i x) {
  if constexpr (T::SIGNED) return _mm256_maddubs_epi16(_mm256_abs_epi8(codes), _mm256_sign_epi8(x, codes));
  else return _mm256_maddubs_epi16(codes, x);
}

// ---- 32-element blocks (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl) ----
// Per group of G blocks (Group) and activation row: two integer products into 4 G int32 lanes (lane j
// of 128-bit lane h: block h's elements 4j .. 4j + 3 and 16 + 4j .. 16 + 4j + 3), one conversion, one
// FMA with the blocks' scales dl dx (a permute of 8 blocks' scales, converted and multiplied by the
// row's dx once per 8 blocks); the minimums once per 8 blocks; one horizontal sum per weight row.

// The activation rows in the group layout, per call: for group g (blocks G g .. G g + G - 1) and row t,
// the 32 G codes [elements 0-15 of each block | elements 16-31 of each block] at q + 32 G (g n + t)
// and the 4 G start lanes -off * (the lane's 8 activation codes) at bias + 4 G (g n + t) (off =
// offset<T>()); per row, dx and (with minimums) xs per block at d / sum32 + t blocks8. All zero past
// the row's blocks: a missing block's dx of 0 zeroes whatever its lanes hold (in the shared layout
// its codes 0 stand for x = -128), so a run of fewer than 8 blocks needs no code of its own.
struct GroupActs {
  static constexpr int G = Group::G;
  int64_t n = 0, blocks = 0, groups = 0, blocks8 = 0;
  bool shared = false;  // no start lanes: the weights give them (Group::shared_start); q holds x + 128
  std::vector<int8_t> q;
  std::vector<int32_t> bias;
  std::vector<float> d, sum32;

  // The codes' offset the start lanes remove: T::BIAS, or 128 for signed codes with VNNI (c + 128).
  template <class T>
  static constexpr int offset() {
#if defined(__AVX512VNNI__)
    return T::SIGNED ? 128 : T::BIAS;
#else
    return T::BIAS;
#endif
  }
  // Whether T may take the shared layout: with VNNI, the types with start lanes. Used for several
  // activation rows, whose start lanes would add half to the activations' bytes per weight row (8
  // rows' would no longer fit the L1 cache: 1.4-1.8x slower), not for one, where the weights' extra
  // work per group costs more than the load of one row's start lanes. (AVX2's equivalent, signed codes
  // against x with their sign, was 1.1-1.3x slower for 2-8 rows: there the integer work decides.)
  template <class T>
  static constexpr bool can_share() {
#if defined(__AVX512VNNI__)
    return offset<T>() != 0;
#else
    return false;
#endif
  }

  template <class T>
  void fill(const RowActs& a) {
    n = a.n;
    shared = can_share<T>() && n > 1;
    blocks = a.cols / 32;
    groups = (blocks + G - 1) / G;
    blocks8 = (blocks + 7) / 8 * 8;
    q.assign(static_cast<size_t>(groups * n * 32 * G), 0);
    bias.assign(offset<T>() && !shared ? static_cast<size_t>(groups * n * 4 * G) : 0, 0);
    d.assign(static_cast<size_t>(n * blocks8), 0.0f);
    sum32.assign(T::MIN ? static_cast<size_t>(n * blocks8) : 0, 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int8_t* x = a.q.data() + t * a.cols + 32 * b;
        const int64_t at = (b / G) * n + t, h = b % G;
        int8_t* to = q.data() + 32 * G * at + 16 * h;
        const int8_t shift = shared ? static_cast<int8_t>(0x80) : 0;  // x + 128
        for (int j = 0; j < 16; ++j) {
          to[j] = static_cast<int8_t>(x[j] ^ shift);
          to[16 * G + j] = static_cast<int8_t>(x[16 + j] ^ shift);
        }
        for (int j = 0; j < 4 && !bias.empty(); ++j) {
          int sum = 0;
          for (int i = 0; i < 4; ++i) sum += x[4 * j + i] + x[16 + 4 * j + i];
          bias[4 * G * at + 4 * h + j] = -offset<T>() * sum;
        }
        d[t * blocks8 + b] = a.d[t * blocks + b];
        if (T::MIN) sum32[t * blocks8 + b] = a.sum32[t * blocks + b];
      }
    }
  }
};

// The G blocks from x (count of them in the row; the missing ones, whose scale dx is 0, replaced by
// the last) into lo and hi.
template <class T>
SPARQ_INLINE void decode_group(const uint8_t* x, int count, GroupI& lo, GroupI& hi) {
  const uint8_t* at[Group::G];
  for (int h = 0; h < Group::G; ++h) at[h] = x + (h < count ? h : count - 1) * T::BYTES;
  T::group(at, lo, hi);
}

// The f16 fields at p, p + STRIDE, .. of 8 blocks as f32 lanes, gathered in two 64-bit words
// (general-register loads and shifts, which leave the vector units to the products).
template <int STRIDE>
SPARQ_INLINE __m256 f16s8(const uint8_t* p) {
  auto word = [p](int i) SPARQ_LAMBDA {
    return static_cast<uint64_t>(load_u16(p + i * STRIDE)) | static_cast<uint64_t>(load_u16(p + (i + 1) * STRIDE)) << 16 |
           static_cast<uint64_t>(load_u16(p + (i + 2) * STRIDE)) << 32 | static_cast<uint64_t>(load_u16(p + (i + 3) * STRIDE)) << 48;
  };
  return _mm256_cvtph_ps(_mm_insert_epi64(_mm_cvtsi64_si128(static_cast<long long>(word(0))), static_cast<long long>(word(4)), 1));
}
// The same for `count` blocks (up to 8), zero past them.
SPARQ_INLINE __m256 f16s_tail(const uint8_t* p, int stride, int count) {
  alignas(16) uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < count; ++i) h[i] = load_u16(p + i * stride);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// Weight row `row` against activation rows t0 .. t0 + NX - 1 of p into res[0 .. NX).
template <class T, int NX, bool SHARED>
SPARQ_INLINE void row_tile32(const uint8_t* row, const GroupActs& p, int64_t t0, float* res) {
  constexpr int G = Group::G, GROUPS8 = 8 / G;
  constexpr bool START = GroupActs::offset<T>() != 0 && !SHARED;
  constexpr int CHAINS = NX == 1 ? 2 : 1;  // one row: two FMA chains; more: the rows' chains overlap
  Group::F acc[NX][CHAINS];
  __m256 mins[NX];
  for (int k = 0; k < NX; ++k) {
    for (int c = 0; c < CHAINS; ++c) acc[k][c] = Group::fzero();
    mins[k] = _mm256_setzero_ps();
  }
  // The tile's codes and start lanes of the current group: row k's at q + 32 G k, bias + 4 G k.
  const int8_t* q = p.q.data() + 32 * G * t0;
  const int32_t* bias = START ? p.bias.data() + 4 * G * t0 : nullptr;
  const int64_t q_step = 32 * G * p.n, bias_step = 4 * G * p.n;
  const float* d = p.d.data() + t0 * p.blocks8;
  const float* sum32 = T::MIN ? p.sum32.data() + t0 * p.blocks8 : nullptr;
  // Runs of 8 blocks (the last may be shorter: count of them in the row).
  for (int64_t b = 0; b < p.blocks; b += 8) {
    const uint8_t* x = row + b * T::BYTES;
    const int count = p.blocks - b < 8 ? static_cast<int>(p.blocks - b) : 8;
    const __m256 dl = count == 8 ? f16s8<T::BYTES>(x) : f16s_tail(x, T::BYTES, count);
    __m256 scale[NX];
    for (int k = 0; k < NX; ++k) scale[k] = _mm256_mul_ps(dl, _mm256_loadu_ps(d + k * p.blocks8));
    if constexpr (T::MIN) {
      const __m256 m = count == 8 ? f16s8<T::BYTES>(x + T::M_AT) : f16s_tail(x + T::M_AT, T::BYTES, count);
      for (int k = 0; k < NX; ++k) mins[k] = _mm256_fmadd_ps(m, _mm256_loadu_ps(sum32 + k * p.blocks8), mins[k]);
      sum32 += 8;
    }
    d += 8;
#pragma GCC unroll 4
    for (int i = 0; i < GROUPS8; ++i) {
      if (G * i >= count) break;
      GroupI lo, hi;
      decode_group<T>(x + G * i * T::BYTES, count - G * i, lo, hi);
#if defined(__AVX512VNNI__)
      if constexpr (SHARED) {
        const GroupI start = Group::shared_start<T>(lo, hi);
        for (int k = 0; k < NX; ++k) {
          Group::F& a = acc[k][i % CHAINS];
          a = Group::fma(Group::shared_lanes(lo, hi, q + 32 * G * k, start), scale[k], i, a);
        }
      } else
#endif
      {
        for (int k = 0; k < NX; ++k) {
          const GroupI start = START ? Group::load(bias + 4 * G * k) : Group::zero();
          Group::F& a = acc[k][i % CHAINS];
          a = Group::fma(Group::lanes<T>(lo, hi, q + 32 * G * k, start), scale[k], i, a);
        }
      }
      q += q_step;
      if constexpr (START) bias += bias_step;
    }
  }
  for (int k = 0; k < NX; ++k) {
    Group::F s = acc[k][0];
    for (int c = 1; c < CHAINS; ++c) s = Group::add(s, acc[k][c]);
    res[k] = Avx2::reduce_add(_mm256_add_ps(Group::fold(s), mins[k]));
  }
}

// RowActs' codes with the rows interleaved by unit (UNIT bytes: a 32-element chunk, or a 512-bit
// super-block unit), [unit][row][UNIT codes] (step = rows): a tile's rows are then constant offsets
// from one pointer, not a pointer each (8 rows' pointers do not fit the general registers beside the
// loop's own). Within each 256 codes the 16-code groups come in the order slots gives (T::SLOTS of
// the 512-bit decoders; null: as they are). One row in its own order is RowActs' codes themselves.
// With an offset off (iq4_xs's 512-bit decoder multiplies its signed codes as c + 128), also the bias
// lanes -off * (the sum of 4 consecutive codes), laid out alike: [unit][row][UNIT / 4 lanes].
struct ActCodes {
  const int8_t* q;
  const int32_t* bias = nullptr;  // null: no bias lanes
  int64_t step;
  std::vector<int8_t> q_kept;
  std::vector<int32_t> bias_kept;

  explicit ActCodes(const RowActs& a, int unit = 32, const int8_t* slots = nullptr, int offset = 0) : q(a.q.data()), step(a.n) {
    bool identity = true;
    for (int i = 0; slots && i < 16; ++i) identity = identity && slots[i] == i;
    if (a.n > 1 || !identity) {
      const int64_t units = a.cols / unit, per_unit = unit / 16;
      q_kept.resize(a.q.size());
      for (int64_t t = 0; t < a.n; ++t)
        for (int64_t u = 0; u < units; ++u)
          for (int64_t i = 0; i < per_unit; ++i) {
            const int64_t slot = u * per_unit + i, group = identity ? slot : slot / 16 * 16 + slots[slot % 16];
            std::memcpy(q_kept.data() + unit * (u * a.n + t) + 16 * i, a.q.data() + t * a.cols + 16 * group, 16);
          }
      q = q_kept.data();
    }
    if (offset) {  // lane m: codes 4m .. 4m + 3 of the laid-out array
      bias_kept.resize(a.q.size() / 4);
      for (size_t m = 0; m < bias_kept.size(); ++m) bias_kept[m] = -offset * (q[4 * m] + q[4 * m + 1] + q[4 * m + 2] + q[4 * m + 3]);
      bias = bias_kept.data();
    }
  }
};

// Whether T's super-blocks are read by its 512-bit decoder (T::block512), and the activation codes
// laid out for T's decoder.
template <class T>
constexpr bool wide_blocks() {
  return WIDE_BLOCKS && T::ELEMENTS == 256;
}
// Whether T's 256-bit decoder hands out chunks in an order of its own (T::SLOTS256).
template <class T, class = void>
struct HasSlots256 : std::false_type {};
template <class T>
struct HasSlots256<T, std::void_t<decltype(T::SLOTS256)>> : std::true_type {};
template <class T>
constexpr bool laid_out() {
  return wide_blocks<T>() || HasSlots256<T>::value;
}
template <class T>
ActCodes act_codes(const RowActs& a) {
  if constexpr (wide_blocks<T>()) return ActCodes(a, 64, T::SLOTS, T::SIGNED ? 128 : 0);  // iq4_xs: c + 128
  else if constexpr (HasSlots256<T>::value) return ActCodes(a, 32, T::SLOTS256);
  else return ActCodes(a);
}
// Block x of T into the sink s, by the 512-bit decoder where T has one.
template <class T, class S>
SPARQ_INLINE void decode(const uint8_t* x, S& s) {
  if constexpr (wide_blocks<T>()) T::block512(x, s);
  else T::block(x, s);
}
// An int32 super-block sum: 16 lanes for the 512-bit decoders, else 8; cleared, folded into 8 lanes,
// and 8 lanes subtracted from its first 8.
template <bool WIDE>
struct BlockSum {
  using type = __m256i;
};
template <>
struct BlockSum<true> {
  using type = WideInt;
};
SPARQ_INLINE void clear(__m256i& v) { v = _mm256_setzero_si256(); }
SPARQ_INLINE __m256i fold8(__m256i v) { return v; }
SPARQ_INLINE __m256i sub8(__m256i v, __m256i s) { return _mm256_sub_epi32(v, s); }
#if defined(__AVX512BW__)
SPARQ_INLINE void clear(__m512i& v) { v = _mm512_setzero_si512(); }
SPARQ_INLINE __m256i fold8(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }
SPARQ_INLINE __m512i sub8(__m512i v, __m256i s) { return _mm512_sub_epi32(v, _mm512_zextsi256_si512(s)); }
#endif

// The sink of T::block (a super-block type) for NX activation rows from t0: the integer dot products
// of each chunk scaled by the integer sub-block scales into one int32 vector per super-block, then
// one f32 FMA per super-block; and the minimums' terms.
template <class T, int NX>
struct RowSums {
  static constexpr bool WIDE = wide_blocks<T>();
  static constexpr int UNIT = WIDE ? 64 : 32;
  // The activation codes and bias lanes by unit (ActCodes): row k's unit g at q + UNIT (g step + k),
  // bias + UNIT / 4 (g step + k), so that every row of the tile is a constant offset from one pointer.
  const int8_t* q;
  const int32_t* bias;
  int64_t step;
  const float *d[NX], *sum32[NX];
  const int16_t* isum16[NX];
  int64_t g0 = 0;  // the current block's first chunk in the row
  __m256 acc[NX], mins[NX];
  typename BlockSum<WIDE>::type block_sum[NX];  // the current super-block's sum_s sc_s sum_j c_j q_j, spread over the lanes
  // With one or two rows, the 512-bit units' odd half of it: two dependency chains per super-block.
  static constexpr bool CHAINS2 = WIDE && NX <= 2;
  typename BlockSum<WIDE>::type odd_sum[CHAINS2 ? NX : 1];

  RowSums(const RowActs& a, const ActCodes& codes, int64_t t0)
      : q(codes.q + UNIT * t0), bias(codes.bias ? codes.bias + UNIT / 4 * t0 : nullptr), step(codes.step) {
    for (int k = 0; k < NX; ++k) {
      const int64_t t = t0 + k;
      d[k] = a.d.data() + t * (a.cols / 32);
      isum16[k] = a.isum16.empty() ? nullptr : a.isum16.data() + t * (a.cols / 16);
      sum32[k] = T::MIN ? a.sum32.data() + t * (a.cols / 32) : nullptr;
      acc[k] = mins[k] = _mm256_setzero_ps();
      clear(block_sum[k]);
      clear(odd_sum[CHAINS2 ? k : 0]);
    }
  }

  // Row k's activation codes and bias lanes of unit g.
  SPARQ_INLINE const int8_t* x_at(int64_t g, int k) const { return q + UNIT * (g * step + k); }
  SPARQ_INLINE const int32_t* bias_at(int64_t g, int k) const { return T::BIAS || T::SIGNED ? bias + UNIT / 4 * (g * step + k) : nullptr; }

  // Chunk c of a super-block, its integer scales as 16 int16 lanes (one per pair of elements), its
  // codes 2^shift times their value (InPlace; the scales make up for it).
  SPARQ_INLINE void scaled_chunk(int c, __m256i codes, __m256i scales, int /*shift*/ = 0) {
    for (int k = 0; k < NX; ++k) {
      const __m256i pairs = pair_sums<T>(codes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_at(g0 + c, k))));
#if defined(__AVX512VNNI__)
      block_sum[k] = _mm256_dpwssd_epi32(block_sum[k], pairs, scales);
#else
      block_sum[k] = _mm256_add_epi32(block_sum[k], _mm256_madd_epi16(pairs, scales));
#endif
    }
  }
#if defined(__AVX512BW__)
  // Unit u of a super-block (block512), its integer scales as 32 int16 lanes (one per pair of elements).
  SPARQ_INLINE void wide(int u, __m512i codes, __m512i scales) {
    for (int k = 0; k < NX; ++k) {
      auto& sum = CHAINS2 && u % 2 ? odd_sum[k] : block_sum[k];
      sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(codes, load64(reinterpret_cast<const uint8_t*>(x_at(g0 / 2 + u, k)))), scales);
    }
  }
  // Units 2p and 2p + 1 of a signed super-block (iq4_xs: codes c + 128, the same sub-block in both
  // units' 128-bit lane i), its int32 scales per lane: the lanes start from the bias lanes.
  SPARQ_INLINE void wide_signed(int p, __m512i first, __m512i second, __m512i scales) {
    const int64_t g = g0 / 2 + 2 * p;
    for (int k = 0; k < NX; ++k) {
      __m512i lanes = _mm512_dpbusd_epi32(_mm512_loadu_si512(bias_at(g, k)), first, _mm512_loadu_si512(x_at(g, k)));
      lanes =
          _mm512_add_epi32(_mm512_dpbusd_epi32(lanes, second, _mm512_loadu_si512(x_at(g + 1, k))), _mm512_loadu_si512(bias_at(g + 1, k)));
      block_sum[k] = _mm512_add_epi32(block_sum[k], _mm512_mullo_epi32(lanes, scales));
    }
  }
#endif
  // The codes' offset (q3_k, q6_k): scaled_chunk multiplied u = c + OFFSET8, so subtract OFFSET8 sum_s
  // sc_s (the half-block's activation code sum), the 16 half-block scales sc as int16 lanes.
  SPARQ_INLINE void offsets(__m256i sc) {
    for (int k = 0; k < NX; ++k) {
      const __m256i isum = _mm256_madd_epi16(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(isum16[k] + 2 * g0)));
      block_sum[k] = sub8(block_sum[k], _mm256_mullo_epi32(isum, _mm256_set1_epi32(T::OFFSET8)));
    }
  }
  // The super-block's sum times d dx (Q8_K's dx, repeated per 32 elements in RowActs::d).
  SPARQ_INLINE void end_block(__m256 scale) {
    for (int k = 0; k < NX; ++k) {
      if constexpr (CHAINS2) {
        block_sum[k] = _mm512_add_epi32(block_sum[k], odd_sum[k]);
        clear(odd_sum[k]);
      }
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold8(block_sum[k])), _mm256_mul_ps(scale, _mm256_broadcast_ss(d[k] + g0)), acc[k]);
      clear(block_sum[k]);
    }
  }
  SPARQ_INLINE void mins32(__m256 m) {
    for (int k = 0; k < NX; ++k) mins[k] = _mm256_fmadd_ps(m, _mm256_loadu_ps(sum32[k] + g0), mins[k]);
  }
  SPARQ_INLINE void mins16(__m256i m, __m256 fv) {  // subtracts fv (a broadcast factor) times the integer terms
    for (int k = 0; k < NX; ++k) {
      // int32 lane c: chunk c's two half-block minimum factors times their code sums (exact: |m| <= 128, |sum| <= 16 * 127).
      const __m256i isum = _mm256_madd_epi16(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(isum16[k] + 2 * g0)));
      mins[k] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_loadu_ps(d[k] + g0)), fv, mins[k]);
    }
  }
  void finish(float* res) const {
    for (int k = 0; k < NX; ++k) res[k] = Avx2::reduce_add(_mm256_add_ps(acc[k], mins[k]));
  }
};

// The sink of T::block (a super-block type) for q8_sums_avx2: the int32 sums sum_j c_j q_j of every
// sub-block of one activation row (the integer sub-block scales left out: block_codes.h's codes), into sums.
template <class T>
struct SubSums {
  const int8_t* q;
  const int32_t* bias;  // ActCodes' bias lanes (iq4_xs's 512-bit decoder); else null
  const int16_t* isum16;
  int32_t* sums;     // the row's sub-block sums (zero before the first block)
  int64_t step = 1;  // laid_out types: the row's unit g at q + UNIT g step, bias + UNIT / 4 g step (ActCodes)
  int64_t g0 = 0;    // the current block's first chunk in the row
  static constexpr bool HALVES = (std::is_same_v<T, Q2_K> || std::is_same_v<T, Q3_K> || std::is_same_v<T, Q6_K>);

  // The sub-block sums by pair_sums itself (block_codes.h's codes are q3_k's and q6_k's u, their
  // offset a minimum there).
  // (Codes 2^shift times their value give sums 2^shift times the codes': shifted back, exactly.)
  SPARQ_INLINE void scaled_chunk(int c, __m256i codes, __m256i, int shift = 0) {
    alignas(32) int32_t lane[8];
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (g0 + c) * step));
    const __m256i quads = _mm256_madd_epi16(pair_sums<T>(codes, x), _mm256_set1_epi16(1));
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane), _mm256_srai_epi32(quads, shift));
    for (int h = 0; h < 2; ++h) {  // the 16-element group of each 128-bit lane: 2c + h, or T::SLOTS256's
      int group = 2 * c + h;
      if constexpr (HasSlots256<T>::value) group = T::SLOTS256[group];
      sums[HALVES ? 2 * g0 + group : g0 + group / 2] += lane[4 * h] + lane[4 * h + 1] + lane[4 * h + 2] + lane[4 * h + 3];
    }
  }
#if defined(__AVX512BW__)
  // The sums of the 128-bit lanes of v: lane i is group T::SLOTS[4 u + i] of the super-block (groups
  // of 16 elements: a sub-block of HALVES types, half of one of the others).
  SPARQ_INLINE void add_groups(int u, __m512i v) {
    alignas(64) int32_t lane[16];
    _mm512_store_si512(lane, v);
    for (int i = 0; i < 4; ++i) {
      const int group = T::SLOTS[4 * u + i];
      sums[HALVES ? 2 * g0 + group : g0 + group / 2] += lane[4 * i] + lane[4 * i + 1] + lane[4 * i + 2] + lane[4 * i + 3];
    }
  }
  SPARQ_INLINE void wide(int u, __m512i codes, __m512i) {
    const __m512i x = _mm512_loadu_si512(q + 64 * (g0 / 2 + u) * step);
    add_groups(u, _mm512_madd_epi16(_mm512_maddubs_epi16(codes, x), _mm512_set1_epi16(1)));
  }
  SPARQ_INLINE void wide_signed(int p, __m512i first, __m512i second, __m512i) {
    const int64_t g = g0 / 2 + 2 * p;
    const __m512i a = _mm512_dpbusd_epi32(_mm512_loadu_si512(bias + 16 * g * step), first, _mm512_loadu_si512(q + 64 * g * step));
    const __m512i b =
        _mm512_dpbusd_epi32(_mm512_loadu_si512(bias + 16 * (g + 1) * step), second, _mm512_loadu_si512(q + 64 * (g + 1) * step));
    add_groups(2 * p, _mm512_add_epi32(a, b));  // lane i of both units: sub-block 4p + i
  }
#endif
  SPARQ_INLINE void offsets(__m256i) {}
  SPARQ_INLINE void end_block(__m256) {}
  SPARQ_INLINE void mins32(__m256) {}
  SPARQ_INLINE void mins16(__m256i, __m256) {}
};

#if defined(__AVX512VNNI__)
// ---- Several activation rows of q4_k, q5_k, q6_k (AVX-512 VNNI) ----
// T::block_rows decodes a super-block once into four code vectors c[0 .. 4) laid out so that int32
// lane m of c[0] and c[1] (and of c[2] and c[3]) holds 4 codes each of the same sub-block
// (T::rows_element(v, p): the element of byte p of vector v), and hands them to the sink's rows(c,
// scales, d). Per activation row (its codes laid out alike, RowsActs):
//   e = x0 . c0 + x1 . c1,  o = x2 . c2 + x3 . c3                   (vpdpbusd: 8 products per lane)
//   sum = (e, o as int16: vpackssdw, exact) . (the lanes' sub-block scales)      (vpdpwssd)
//   acc += f32(sum) * (d dx)
// 4 vpdpbusd, one vpackssdw, one vpdpwssd, one conversion and one FMA per 256 elements and row, where
// the 512-bit decoders take 4 vpmaddubsw and 4 vpdpwssd. A lane of 8 products stays within int16:
// q4_k 8 * 15 * 127, q5_k 8 * 31 * 127 (codes unsigned, x signed); q6_k (SIGNED_ROWS) multiplies
// its signed codes c = u - 32 by x + 128, each lane starting from -128 times its codes' sum (computed
// once per super-block for all rows: sum c (x + 128) - 128 sum c = sum c x), 8 * 32 * 127 = 32512.
// The scaled sum stays within 2^24 (two lanes of 32512 * 128 for q6_k), so its conversion is exact.
template <class T, class = void>
struct HasRows : std::false_type {};
template <class T>
struct HasRows<T, std::void_t<decltype(T::rows_element(0, 0))>> : std::true_type {};

// The activation rows in T::block_rows' order, per call: for super-block b and row t, the 256 codes
// (vectors c[0 .. 4) of 64; x + 128 for T::SIGNED_ROWS) at q + 256 (b n + t), and the row's dx at
// dx + b n + t.
struct RowsActs {
  int64_t n = 0, blocks = 0;
  std::vector<int8_t> q;
  std::vector<float> dx;

  template <class T>
  void fill(const RowActs& a) {
    // The first element of each 8 bytes of the vectors; the 8 follow it (checked here).
    static constexpr auto order = [] {
      std::array<int16_t, 32> t{};
      for (int i = 0; i < 32; ++i) {
        t[i] = static_cast<int16_t>(T::rows_element(i / 8, 8 * (i % 8)));
        for (int j = 1; j < 8; ++j)
          if (T::rows_element(i / 8, 8 * (i % 8) + j) != t[i] + j) t[i] = -1;
      }
      return t;
    }();
    for (int16_t first : order) assert(first >= 0);
    const uint64_t shift = T::SIGNED_ROWS ? 0x8080808080808080ULL : 0;  // x + 128
    n = a.n;
    blocks = a.cols / 256;
    q.resize(static_cast<size_t>(blocks * n * 256));
    dx.resize(static_cast<size_t>(blocks * n));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t b = 0; b < blocks; ++b) {
        const int8_t* x = a.q.data() + t * a.cols + 256 * b;
        int8_t* to = q.data() + 256 * (b * n + t);
        for (int i = 0; i < 32; ++i) {
          uint64_t eight;
          std::memcpy(&eight, x + order[i], 8);
          eight ^= shift;
          std::memcpy(to + 8 * i, &eight, 8);
        }
        dx[b * n + t] = a.d[t * (a.cols / 32) + 8 * b];
      }
  }
};

// e and o of one activation row (the formula above) for codes c against that row's codes x; with
// SIGNED, c signed against x + 128 from start lanes start[0], start[1].
template <bool SIGNED>
SPARQ_INLINE void rows_lanes(const __m512i* c, const int8_t* x, const __m512i* start, __m512i& e, __m512i& o) {
  auto load = [x](int at) SPARQ_LAMBDA { return _mm512_loadu_si512(x + at); };
  if constexpr (SIGNED) {
    e = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start[0], load(0), c[0]), load(64), c[1]);
    o = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start[1], load(128), c[2]), load(192), c[3]);
  } else {
    e = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], load(0)), c[1], load(64));
    o = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[2], load(128)), c[3], load(192));
  }
}
// The start lanes of signed codes c: -128 times each lane's codes in c[0] and c[1] (e), c[2] and c[3] (o).
SPARQ_INLINE void rows_start(const __m512i* c, __m512i* start) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int h = 0; h < 2; ++h)
    start[h] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, c[2 * h]), bias, c[2 * h + 1]));
}

// The sink of T::block_rows for NX activation rows from t0 (advance() after each super-block).
template <class T, int NX>
struct RowsSums {
  const int8_t* q;
  const float* dx;
  int64_t n;
  const float* sum32[NX];
  int64_t g0 = 0;  // the current block's first 32-element chunk in the row (RowActs::sum32)
  __m512 acc[NX];  // the minimums' terms too, in lanes 0-7 (8 more registers would not fit beside the tile's)

  RowsSums(const RowActs& a, const RowsActs& p, int64_t t0) : q(p.q.data() + 256 * t0), dx(p.dx.data() + t0), n(p.n) {
    for (int k = 0; k < NX; ++k) {
      sum32[k] = T::MIN ? a.sum32.data() + (t0 + k) * (a.cols / 32) : nullptr;
      acc[k] = _mm512_setzero_ps();
    }
  }
  SPARQ_INLINE void rows(const __m512i* c, __m512i scales, float d) {
    __m512i start[2];
    if constexpr (T::SIGNED_ROWS) rows_start(c, start);
    // The rows' d dx, 8 at once (a tile's dx are adjacent), for broadcasts from memory.
    alignas(32) float ddx[NX];
    if constexpr (NX == 8) _mm256_store_ps(ddx, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_loadu_ps(dx)));
    else
      for (int k = 0; k < NX; ++k) ddx[k] = d * dx[k];
    for (int k = 0; k < NX; ++k) {
      __m512i e, o;
      rows_lanes<T::SIGNED_ROWS>(c, q + 256 * k, start, e, o);
      const __m512i sum = _mm512_madd_epi16(_mm512_packs_epi32(e, o), scales);
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(ddx[k]), acc[k]);
    }
  }
  SPARQ_INLINE void mins32(__m256 m) {
    const __m512 m16 = _mm512_zextps256_ps512(m);  // lanes 8-15 zero
    for (int k = 0; k < NX; ++k) acc[k] = _mm512_fmadd_ps(m16, _mm512_zextps256_ps512(_mm256_loadu_ps(sum32[k] + g0)), acc[k]);
  }
  SPARQ_INLINE void seek(int64_t b) {  // b blocks on
    q += 256 * n * b;
    dx += n * b;
    g0 += 8 * b;
  }
  SPARQ_INLINE void advance() { seek(1); }
  SPARQ_INLINE void finish(float* res) const {  // inlined: the accumulators stay in registers, not stored every block
    for (int k = 0; k < NX; ++k) res[k] = Avx2::reduce_add(Group::fold(acc[k]));
  }
};

// The sink of T::block_rows for q8_sums_avx512: one activation row's sub-block sums sum_j c_j q_j
// into sums, from e and o before their scales. block_codes.h's codes are q6_k's u = c + 32, so its
// sums get 32 times the lane's activation codes back (added here in scalar code).
template <class T>
struct RowsSubSums {
  static constexpr int SUB = std::is_same_v<T, Q6_K> ? 16 : 32;
  const int8_t* q;  // the row's codes of the current super-block (RowsActs)
  int32_t* sums;    // the current super-block's sub-block sums
  SPARQ_INLINE void rows(const __m512i* c, __m512i, float) {
    __m512i start[2], e, o;
    if constexpr (T::SIGNED_ROWS) rows_start(c, start);
    rows_lanes<T::SIGNED_ROWS>(c, q, start, e, o);
    alignas(64) int32_t lane[32];
    _mm512_store_si512(lane, e);
    _mm512_store_si512(lane + 16, o);
    for (int m = 0; m < 32; ++m) {
      int sum = lane[m];
      if constexpr (T::SIGNED_ROWS)
        for (int i = 0; i < 4; ++i)  // the lane's codes: bytes 4 (m % 16) + i of vectors 2 (m / 16) and 2 (m / 16) + 1
          sum += T::OFFSET8 * (static_cast<int8_t>(q[128 * (m / 16) + 4 * (m % 16) + i] ^ 0x80) +
                               static_cast<int8_t>(q[128 * (m / 16) + 64 + 4 * (m % 16) + i] ^ 0x80));
      sums[T::rows_element(m < 16 ? 0 : 2, 4 * (m % 16)) / SUB] += sum;
    }
  }
  SPARQ_INLINE void mins32(__m256) {}
};
#endif

// The most activation rows one weight row's decoded codes are multiplied with at once: with AVX-512's
// 32 vector registers 8 rows' accumulators fit beside the codes and scales, with AVX2's 16 only 4.
#if defined(__AVX512VL__)
constexpr int Q8_TILE = 8;
#else
constexpr int Q8_TILE = 4;
#endif

// Column chunks. Every weight row is multiplied with all n activation rows, so n rows of activation
// codes are read once per weight row: past the L1 cache (8 rows of 14336 columns are 112 KiB), the
// tile's loads wait on L2, and 8 rows of q6_k cost twice as many cycles per super-block at 8192
// columns as at 4096 (Zen 5, 48 KiB L1). From Q8_CHUNK_MIN_N rows on, the columns are taken in
// chunks whose n activation rows fit Q8_CHUNK_BYTES, each chunk over all the weight rows, its sums
// added to out. Below that, a row's sum is one chain over its blocks, as the one-row kernel adds
// it, so that up to 7 rows of a batch get the bits of decoding each row alone (docs/serve.md).
constexpr int64_t Q8_CHUNK_MIN_N = 8;
constexpr int64_t Q8_CHUNK_BYTES = 32 * 1024;
// The blocks per chunk for n activation rows of blocks `elements` long: equal chunks of at most
// Q8_CHUNK_BYTES of codes, or all the blocks.
inline int64_t q8_chunk_blocks(int64_t n, int64_t blocks, int elements) {
  if (n < Q8_CHUNK_MIN_N) return blocks;
  const int64_t most = std::max<int64_t>(1, Q8_CHUNK_BYTES / (n * elements)), chunks = (blocks + most - 1) / most;
  return (blocks + chunks - 1) / chunks;
}
// How many weight rows ahead the multi-row kernels prefetch a block: the next row's, or in column
// chunks (a chunk's blocks of one row are a short run, a row apart from the next) the one after:
// 8 rows of q6_k at 14336 columns, time per super-block -14% (Zen 5, one thread).
inline int64_t q8_prefetch_rows(int64_t chunk, int64_t blocks) { return chunk < blocks ? 2 : 1; }

// tile(nx, r, t0, b0, b1, res): activation rows t0 .. t0 + nx - 1 against blocks [b0, b1) of weight
// row r into res, for every weight row of [row_begin, row_end) and the activation rows in tiles of
// Q8_TILE, then of 4, 2, 1 (nx a std::integral_constant), in column chunks of `chunk` blocks; each
// weight block is decoded once per tile, read from DRAM once.
// Out of line: inlined into each type's table entry (q8_rows_of), GCC 12's one-row loops of the
// 32-element types ran 3-6% slower on AVX2 (`pnpm -s bench:matvec --quick --threads 1 --paths avx2
// --products int8`, the two builds alternating).
template <class Tile>
__attribute__((noinline)) void for_each_q8_tile(int64_t n, int64_t rows, float* out, int64_t row_begin, int64_t row_end, int64_t blocks,
                                                int64_t chunk, Tile tile) {
  float res[Q8_TILE];
  for (int64_t b0 = 0; b0 < blocks; b0 += chunk) {
    const int64_t b1 = std::min(blocks, b0 + chunk);
    for (int64_t r = row_begin; r < row_end; ++r) {
      for (int64_t t0 = 0; t0 < n;) {
        const int64_t left = n - t0;
        const int nx = left >= Q8_TILE ? Q8_TILE : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        if (nx == Q8_TILE) tile(std::integral_constant<int, Q8_TILE>(), r, t0, b0, b1, res);
        else if (Q8_TILE > 4 && nx == 4) tile(std::integral_constant<int, 4>(), r, t0, b0, b1, res);
        else if (nx == 2) tile(std::integral_constant<int, 2>(), r, t0, b0, b1, res);
        else tile(std::integral_constant<int, 1>(), r, t0, b0, b1, res);
        for (int k = 0; k < nx; ++k) {
          float& o = out[(t0 + k) * rows + r];
          o = b0 == 0 ? res[k] : o + res[k];
        }
        t0 += nx;
      }
    }
  }
}

// The activation rows a laid out by Acts (GroupActs, RowsActs) for T, in buffers kept from call to call.
template <class Acts, class T>
const Acts& kept_acts(const RowActs& a) {
  thread_local Acts kept;
  kept.template fill<T>(a);
  return kept;
}
// The block of T at p into L1.
template <class T>
SPARQ_INLINE void prefetch_block(const uint8_t* p) {
  for (int line = 0; line < T::BYTES; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
}
template <class T>
void rows_q8(const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t blocks = a.cols / T::ELEMENTS, row_bytes = blocks * T::BYTES;
  const ActCodes codes = act_codes<T>(a);
  // Not in column chunks: AVX2's 8 rows are two tiles that decode each block twice, bound by
  // instructions, not by L2 (8 rows of q6_k at 14336 columns were 8% slower in chunks, Zen 5).
  for_each_q8_tile(a.n, rows, out, row_begin, row_end, blocks, blocks, [&](auto nx, int64_t r, int64_t t0, int64_t, int64_t, float* res) {
    constexpr int NX = decltype(nx)::value;
    RowSums<T, NX> sums(a, codes, t0);
    const uint8_t* row = w + r * row_bytes;
    for (int64_t b = 0; b < blocks; ++b, sums.g0 += T::ELEMENTS / 32) {
      // Several activation rows: the next weight row's block into L1 now. The tile's work per weight
      // byte leaves the hardware prefetchers behind, and the loads wait on DRAM: one thread, 8 rows,
      // weights streamed, CPU ns per weight row: AVX-512 q4_k 508 -> 332, q6_k 577 -> 341, iq4_xs
      // 618 -> 497; AVX2 q4_k 631 -> 508, q6_k 811 -> 476 (loaded VM, same process alternating).
      if constexpr (NX > 1) prefetch_block<T>(row + row_bytes + b * T::BYTES);
      decode<T>(row + b * T::BYTES, sums);
    }
    sums.finish(res);
  });
}
// Types whose one-row decode takes two super-blocks at once (T::Pair, T::block_pair: q4_k and
// q5_k on AVX-512).
template <class T, class = void>
struct HasPair : std::false_type {};
template <class T>
struct HasPair<T, std::void_t<typename T::Pair>> : std::true_type {};
// One activation row (decode) against super-block weights: rows r and r + half (half the range
// apart) at a time, block by block, then rows_q8 for an odd last row. Each block's long dependency
// chains get the other row's independent work to overlap with, and the weights are read as two
// sequential streams far apart, which Zen 4 reads from DRAM faster than one. (Rows r and r + 1,
// two streams interleaved within the same pages, read at half the rate or less there.)
template <class T>
void rows_q8_pairs(const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t blocks = a.cols / T::ELEMENTS, row_bytes = blocks * T::BYTES, half = (row_end - row_begin) / 2;
  const ActCodes codes = act_codes<T>(a);
  for (int64_t r = row_begin; r < row_begin + half; ++r) {
    RowSums<T, 1> first(a, codes, 0), second(a, codes, 0);
    const uint8_t* row = w + r * row_bytes;
    const uint8_t* other = row + half * row_bytes;
    for (int64_t b = 0; b < blocks; ++b, first.g0 += T::ELEMENTS / 32, second.g0 += T::ELEMENTS / 32) {
      if constexpr (HasPair<T>::value) {
        T::block_pair(row + b * T::BYTES, first, other + b * T::BYTES, second);
      } else {
        decode<T>(row + b * T::BYTES, first);
        decode<T>(other + b * T::BYTES, second);
      }
    }
    first.finish(out + r);
    second.finish(out + r + half);
  }
  if (row_begin + 2 * half < row_end) rows_q8<T>(w, a, rows, out, row_begin + 2 * half, row_end);
}

#if defined(__AVX512VNNI__)
// Several activation rows against super-block weights with T::block_rows (RowsSums), tiled and
// prefetched as rows_q8.
template <class T>
void rows_q8_vnni(const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const RowsActs& p = kept_acts<RowsActs, T>(a);
  const int64_t row_bytes = p.blocks * T::BYTES;
  const int64_t chunk = q8_chunk_blocks(a.n, p.blocks, T::ELEMENTS), ahead = q8_prefetch_rows(chunk, p.blocks) * row_bytes;
  for_each_q8_tile(a.n, rows, out, row_begin, row_end, p.blocks, chunk,
                   [&](auto nx, int64_t r, int64_t t0, int64_t b0, int64_t b1, float* res) {
                     RowsSums<T, decltype(nx)::value> sums(a, p, t0);
                     sums.seek(b0);
                     const uint8_t* row = w + r * row_bytes;
                     for (int64_t b = b0; b < b1; ++b, sums.advance()) {
                       prefetch_block<T>(row + ahead + b * T::BYTES);
                       T::block_rows(row + b * T::BYTES, sums);
                     }
                     sums.finish(res);
                   });
}
// rows_q8_vnni's sub-block sums (RowsSubSums) -> sums (n, rows, subs).
template <class T>
void rows_sums_vnni(const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  RowsActs p;
  p.fill<T>(a);
  const int64_t row_bytes = p.blocks * T::BYTES, subs = p.blocks * (256 / RowsSubSums<T>::SUB);
  std::fill(sums, sums + a.n * rows * subs, 0);
  for (int64_t t = 0; t < a.n; ++t)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < p.blocks; ++b) {
        RowsSubSums<T> sink{p.q.data() + 256 * (b * p.n + t), sums + (t * rows + r) * subs + b * (256 / RowsSubSums<T>::SUB)};
        T::block_rows(w + r * row_bytes + b * T::BYTES, sink);
      }
}
#endif

// Activation rows (a.n) against weight rows [row_begin, row_end) of 32-element blocks.
template <class T>
void rows_q8_32(const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const GroupActs& p = kept_acts<GroupActs, T>(a);
  const int64_t row_bytes = p.blocks * T::BYTES;
  // Not in column chunks (row_tile32 walks a weight row's blocks itself).
  for_each_q8_tile(a.n, rows, out, row_begin, row_end, p.blocks, p.blocks,
                   [&](auto nx, int64_t r, int64_t t0, int64_t, int64_t, float* res) {
                     if constexpr (GroupActs::can_share<T>())
                       if (p.shared) return row_tile32<T, decltype(nx)::value, true>(w + r * row_bytes, p, t0, res);
                     row_tile32<T, decltype(nx)::value, false>(w + r * row_bytes, p, t0, res);
                   });
}

// The int32 sums sum_j c_j q_j of every block of every weight row and activation row, by
// Group::lanes (the sums rows_q8_32 scales) -> sums (n, rows, blocks).
template <class T>
void sums_q8_32(const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  constexpr int G = Group::G;
  GroupActs p;
  p.fill<T>(a);
  const int64_t blocks = p.blocks, row_bytes = blocks * T::BYTES;
  for (int64_t t = 0; t < a.n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; b += G) {
        const int count = static_cast<int>(std::min<int64_t>(G, blocks - b));
        GroupI lo, hi;
        decode_group<T>(w + r * row_bytes + b * T::BYTES, count, lo, hi);
        const int64_t at = (b / G) * p.n + t;
        GroupI sum;
#if defined(__AVX512VNNI__)
        if (p.shared) sum = Group::shared_lanes(lo, hi, p.q.data() + 32 * G * at, Group::shared_start<T>(lo, hi));
#endif
        if (!p.shared) {
          const GroupI start = GroupActs::offset<T>() ? Group::load(p.bias.data() + 4 * G * at) : Group::zero();
          sum = Group::lanes<T>(lo, hi, p.q.data() + 32 * G * at, start);
        }
        alignas(64) int32_t lane[4 * G];
        std::memcpy(lane, &sum, sizeof lane);
        for (int h = 0; h < count; ++h)
          sums[(t * rows + r) * blocks + b + h] = lane[4 * h] + lane[4 * h + 1] + lane[4 * h + 2] + lane[4 * h + 3];
      }
    }
  }
}

// Every activation row's sub-block sums of every weight row (SubSums) -> sums (n, rows, subs).
template <class T>
void row_sums(const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  const int64_t blocks = a.cols / T::ELEMENTS, row_bytes = blocks * T::BYTES, subs = SubSums<T>::HALVES ? a.cols / 16 : a.cols / 32;
  const ActCodes laid = laid_out<T>() ? act_codes<T>(a) : ActCodes(RowActs{});
  constexpr int UNIT = wide_blocks<T>() ? 64 : 32;
  std::fill(sums, sums + a.n * rows * subs, 0);
  for (int64_t k = 0; k < a.n; ++k) {
    for (int64_t r = 0; r < rows; ++r) {
      SubSums<T> sink{a.q.data() + k * a.cols, nullptr, a.isum16.empty() ? nullptr : a.isum16.data() + k * (a.cols / 16),
                      sums + (k * rows + r) * subs};
      if (laid_out<T>()) sink = {laid.q + UNIT * k, laid.bias ? laid.bias + UNIT / 4 * k : nullptr, nullptr, sink.sums, laid.step};
      for (int64_t b = 0; b < blocks; ++b, sink.g0 += T::ELEMENTS / 32) decode<T>(w + r * row_bytes + b * T::BYTES, sink);
    }
  }
}

// Several activation rows against super-block weights: rows_q8_vnni where T has block_rows, else rows_q8.
template <class T>
void rows_q8_many(const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
#if defined(__AVX512VNNI__)
  if constexpr (HasRows<T>::value) return rows_q8_vnni<T>(w, a, rows, out, row_begin, row_end);
#endif
  rows_q8<T>(w, a, rows, out, row_begin, row_end);
}
// The sub-block sums of the kernel matmul_q8 runs for a.n rows of super-block type T.
template <class T>
void super_block_sums(const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
#if defined(__AVX512VNNI__)
  if constexpr (HasRows<T>::value)
    if (a.n > 1) return rows_sums_vnni<T>(w, a, rows, sums);
#endif
  row_sums<T>(w, a, rows, sums);
}

// matvec_q8.h's kernels of block type T: per row, and their sub-block sums.
template <class T>
void q8_rows_of(WeightType, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  if constexpr (T::ELEMENTS == 32) {
    rows_q8_32<T>(w, a, rows, out, row_begin, row_end);
  } else {
    if (a.n == 1) return rows_q8_pairs<T>(w, a, rows, out, row_begin, row_end);
    rows_q8_many<T>(w, a, rows, out, row_begin, row_end);
  }
}
template <class T>
void q8_sums_of(WeightType, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  if constexpr (T::ELEMENTS == 32) sums_q8_32<T>(w, a, rows, sums);
  else super_block_sums<T>(w, a, rows, sums);
}

}  // namespace
}  // namespace sparq

// The entry points of matvec_q8.h for one ISA file: the tables matmul_q8_<isa>, q8_sums_<isa>.
#define SPARQ_Q8_ENTRY_POINTS(isa)                                                                \
  namespace sparq {                                                                               \
  constexpr PerWeightType<Q8RowsFn> matmul_q8_##isa =                                             \
      per_decoder<Q8RowsFn>([](auto type) { return &q8_rows_of<decltype(type)>; }, Q8Decoders()); \
  constexpr PerWeightType<Q8SumsFn> q8_sums_##isa =                                               \
      per_decoder<Q8SumsFn>([](auto type) { return &q8_sums_of<decltype(type)>; }, Q8Decoders()); \
  }
