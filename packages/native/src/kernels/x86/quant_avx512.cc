// AVX-512 twins of quant_ref.cc, byte-exact with it: the same f32 operations in
// the same order (multiply, then add: never a fused multiply-add), exact
// division for 1/d, and ties in max/min resolved to the first element as the
// scalar loops do (that decides the sign of a zero scale).
#include "kernels/simd.h"

#include "common/half.h"
#include "common/quant.h"

namespace sparq {
namespace {

inline __m512 abs16(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

// x[j] for the first j in [0, 32) with v_j == target (lo = x[0..15], hi = x[16..31]).
inline float first_equal(const float* x, __m512 lo, __m512 hi, float target) {
  const __m512 t = _mm512_set1_ps(target);
  const uint32_t mask = _mm512_cmp_ps_mask(lo, t, _CMP_EQ_OQ) | (static_cast<uint32_t>(_mm512_cmp_ps_mask(hi, t, _CMP_EQ_OQ)) << 16);
  return x[__builtin_ctz(mask)];
}

// Packs two 16-lane int32 vectors of nibbles (elements j and j + 16) into 16 bytes.
inline void store_nibbles(uint8_t* dst, __m512i lo, __m512i hi) {
  const __m512i packed = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(packed));
}

// trunc(x * id + offset), capped at 15 (the (int8_t) cast of the scalar code, for values in [0, 17)).
// Product and sum round apart, as the reference's do (-ffp-contract=off, scripts/build.mjs).
inline __m512i nibble_of(__m512 x, __m512 id, __m512 offset) {
  const __m512 v = _mm512_add_ps(_mm512_mul_ps(x, id), offset);
  return _mm512_min_epi32(_mm512_cvttps_epi32(v), _mm512_set1_epi32(15));
}

void quantize_q4_0_block(const float* x, uint8_t* y) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs16(lo), abs16(hi)));
  const float max = amax == 0.0f ? 0.0f : first_equal(x, abs16(lo), abs16(hi), amax);
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, _cvtss_sh(d, 0));
  const __m512 vid = _mm512_set1_ps(id), half = _mm512_set1_ps(8.5f);
  store_nibbles(y + 2, nibble_of(lo, vid, half), nibble_of(hi, vid, half));
}

void quantize_q4_1_block(const float* x, uint8_t* y) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float min = first_equal(x, lo, hi, _mm512_reduce_min_ps(_mm512_min_ps(lo, hi)));
  const float max = first_equal(x, lo, hi, _mm512_reduce_max_ps(_mm512_max_ps(lo, hi)));
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, _cvtss_sh(d, 0));
  store_u16(y + 2, _cvtss_sh(min, 0));
  const __m512 vmin = _mm512_set1_ps(min), vid = _mm512_set1_ps(id), half = _mm512_set1_ps(0.5f);
  store_nibbles(y + 4, nibble_of(_mm512_sub_ps(lo, vmin), vid, half), nibble_of(_mm512_sub_ps(hi, vmin), vid, half));
}

// roundf (half away from zero): truncate, then step away from zero when the dropped part is >= 0.5.
inline __m512i round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(abs16(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)), _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN))));
  return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

void quantize_q8_0_block(const float* x, uint8_t* y) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs16(lo), abs16(hi)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, _cvtss_sh(d, 0));
  const __m512 vid = _mm512_set1_ps(id);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2), _mm512_cvtepi32_epi8(round_away(_mm512_mul_ps(lo, vid))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 18), _mm512_cvtepi32_epi8(round_away(_mm512_mul_ps(hi, vid))));
}

inline __m512 float_of(__m512i v) { return _mm512_cvtepi32_ps(v); }

}  // namespace

void quantize_blocks_avx512(WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  quantize_blocks_with({quantize_q4_0_block, quantize_q4_1_block, quantize_q8_0_block}, t, x, y, nblocks);
}

void dequantize_blocks_avx512(WeightType t, const uint8_t* x, float* y, int64_t nblocks) {
  const __m512i low4 = _mm512_set1_epi32(0x0f), eight = _mm512_set1_epi32(8);
  for (int64_t b = 0; b < nblocks; ++b) {
    float* yb = y + b * QK;
    if (t == WeightType::q8_0) {
      const uint8_t* xb = x + b * Q8_0_BYTES;
      const __m512 d = _mm512_set1_ps(f16_at(xb));
      for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 2 + 16 * h)));
        _mm512_storeu_ps(yb + 16 * h, _mm512_mul_ps(float_of(q), d));
      }
      continue;
    }
    const bool has_min = t == WeightType::q4_1;
    const uint8_t* xb = x + b * (has_min ? Q4_1_BYTES : Q4_0_BYTES);
    const __m512 d = _mm512_set1_ps(f16_at(xb));
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + (has_min ? 4 : 2))));
    __m512i lo = _mm512_and_si512(bytes, low4), hi = _mm512_srli_epi32(bytes, 4);
    if (has_min) {
      // x = q * d + m: multiply, then add (q4_1 dequantization is not fused in the reference).
      const __m512 m = _mm512_set1_ps(f16_at(xb + 2));
      _mm512_storeu_ps(yb, _mm512_add_ps(_mm512_mul_ps(float_of(lo), d), m));
      _mm512_storeu_ps(yb + 16, _mm512_add_ps(_mm512_mul_ps(float_of(hi), d), m));
    } else {
      lo = _mm512_sub_epi32(lo, eight);
      hi = _mm512_sub_epi32(hi, eight);
      _mm512_storeu_ps(yb, _mm512_mul_ps(float_of(lo), d));
      _mm512_storeu_ps(yb + 16, _mm512_mul_ps(float_of(hi), d));
    }
  }
}

}  // namespace sparq
