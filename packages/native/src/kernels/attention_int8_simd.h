// The integer products of q · K over block rows (q8_0, q4_0), per ISA, for attention_kernels.h's
// qk_q8 (the reference's int8-key-scores.ts): one key block's codes against one query head's Q8_0
// block, the exact int32 sum per block, then scaled by dk dq into f32 lanes.
//
//   I8<V>::key<B, G>(blk, two)  the codes and f16 scales of one block (two: of blocks blk and blk + 1) for G heads
//   I8<V>::dot(key, x, bias, dq, two, acc)  acc + (dk dq) * sum_i c_i x_i, per int32 lane of a block
//
// A block's sum is spread over its 8 int32 lanes (4 products each); QueryBlocks (attention.h)
// repeats each block's step dq and puts its bias on the block's first lane, so both load as vectors
// beside the codes. The lanes are exact integers (|lane| < 2^17), so cvt is exact; the kernels
// differ from the reference only by the f32 rounding of the products and sums.
//   AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, 64 products per instruction.
//     q8_0 keys are read as c + 128 (one xor per key vector, shared by all heads), q4_0 keys as
//     their stored nibble c + 8; QueryBlocks::bias (-128 or -8 times the block's code sum) starts
//     the int32 lanes, so they end on the exact sum_i c_i x_i. Two blocks per zmm.
//   AVX2: vpmaddubsw (unsigned x signed bytes, pairs summed in int16, saturating) then vpmaddwd.
//     q4_0 nibbles (<= 15) cannot saturate it: c + 8 against x, bias as above. q8_0 takes ggml's
//     sign trick, |c| against x with c's sign (vpsignb): a pair is at most 2 * 128 * 127 < 2^15.
//     One block per ymm.
// Other vector types (Scalar, NEON) take the portable loop of attention_kernels.h (qk_q8_rows).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/cpu.h"
#include "common/kv_blocks.h"
#include "kernels/simd.h"

namespace sparq {
namespace {

template <class V>
struct I8 {
  static constexpr bool kSimd = false;
  static constexpr bool kRuntimeCheck = false;  // whether available() must be asked at run time
};

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
template <>
struct I8<Avx2> {
  static constexpr bool kSimd = true;
  static constexpr bool kRuntimeCheck = false;
  static constexpr size_t kBlocks = 1;  // blocks per step
  struct Key {
    __m256i k;   // q8_0: the int8 codes c; q4_0: the nibbles c + 8 (elements 0-15, then 16-31)
    __m256i ak;  // q8_0: |c|
    __m256 dk;   // the block's scale on every lane
  };
  template <class B, int G>
  static Key key(const uint8_t* blk, bool) {
    Key key;
    key.dk = Avx2::set1_half(load_u16(blk));
    if constexpr (B::kBytes == Q8_0_BYTES) {
      key.k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      key.ak = _mm256_abs_epi8(key.k);
    } else {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
      key.k = _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
      key.ak = key.k;
    }
    return key;
  }
  template <class B>
  static __m256 dot(const Key& key, const int8_t* x, const int32_t* bias, const float* dq, bool, __m256 acc) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    __m256i lanes;
    if constexpr (B::kBytes == Q8_0_BYTES) {
      lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(key.ak, _mm256_sign_epi8(xv, key.k)), _mm256_set1_epi16(1));
    } else {
      lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(key.k, xv), _mm256_set1_epi16(1));
      lanes = _mm256_add_epi32(lanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)));
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(key.dk, _mm256_loadu_ps(dq)), acc);
  }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
template <>
struct I8<Avx512> {
  static constexpr bool kSimd = true;
  static constexpr bool kRuntimeCheck = true;
  static bool available() {
    static const bool vnni = cpu_features().avx512vnni;
    return vnni;
  }
  static constexpr size_t kBlocks = 2;
  struct Key {
    __m512i u;  // the codes as unsigned bytes (c + 128, or the nibbles c + 8); zeros past one block
    __m512 dk;  // lanes 0-7 the first block's scale, 8-15 the second's
  };
  // The 32 elements of block blk as unsigned bytes: q8_0 c + 128, q4_0 the low nibbles (elements 0-15) then the high ones.
  template <class B>
  static __m256i unsigned_codes(const uint8_t* blk) {
    if constexpr (B::kBytes == Q8_0_BYTES) {
      return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
    } else {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
    }
  }
  // The same for blocks blk and blk + 1 in one zmm.
  template <class B>
  static __m512i unsigned_codes2(const uint8_t* blk) {
    if constexpr (B::kBytes == Q8_0_BYTES) {
      const __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2))),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + B::kBytes + 2)), 1);
      return _mm512_xor_si512(c, _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      // [b0 | b1 | b0 >> 4 | b1 >> 4] in 128-bit lanes, reordered to block 0's nibbles, then block 1's.
      const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))),
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + B::kBytes + 2)), 1);
      const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1);
      return _mm512_and_si512(_mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0f));
    }
  }
  // G: the heads that share the key. The two f16 scales go onto lanes 0-7 and 8-15 by two broadcasts, or for one head
  // over q8_0 rows by a word permutation of one masked load. One thread, S = 32k, d 128, on the shared VM, best of 8,
  // broadcasts -> permutation: q8_0 one head 0.19-0.21 -> 0.13-0.15 ms per KV head; groups of 4 0.20 -> 0.29; q4_0 one
  // head 0.08 -> 0.09.
  template <class B, int G>
  static Key key(const uint8_t* blk, bool two) {
    Key key;
    if (two) {
      key.u = unsigned_codes2<B>(blk);
      if constexpr (G == 1 && B::kBytes == Q8_0_BYTES) {
        constexpr int second = static_cast<int>(B::kBytes / 2);  // the second scale's 16-bit word from blk
        const __m512i words = _mm512_maskz_loadu_epi16((1u << 0) | (1u << second), blk);
        const __m512i pick = _mm512_mask_blend_epi16(0xff00, _mm512_setzero_si512(), _mm512_set1_epi16(second));
        key.dk = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(pick, words)));
      } else {
        key.dk = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(load_u16(blk + B::kBytes))),
                                                  _mm_set1_epi16(static_cast<short>(load_u16(blk)))));
      }
    } else {
      key.u = _mm512_zextsi256_si512(unsigned_codes<B>(blk));
      key.dk = Avx512::set1_half(load_u16(blk));
    }
    return key;
  }
  // Past one block (two = false) the query loads are masked: the key's zero bytes already make
  // those lanes 0, and the masks keep them from reading past the query arrays.
  template <class B>
  static __m512 dot(const Key& key, const int8_t* x, const int32_t* bias, const float* dq, bool two, __m512 acc) {
    const __m512i xv = two ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi8(0xffffffffull, x);
    const __m512i start = two ? _mm512_loadu_si512(bias) : _mm512_maskz_loadu_epi32(0x00ff, bias);
    const __m512 scale = _mm512_mul_ps(key.dk, two ? _mm512_loadu_ps(dq) : _mm512_maskz_loadu_ps(0x00ff, dq));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, key.u, xv)), scale, acc);
  }
};
#endif

}  // namespace
}  // namespace sparq
