// The blocked integer product's packing steps (gemm_q8.h) with AVX2, which both blocked kernels need:
// the activation rows' quantization and the weights' decoding into panels.
//
// Quantization: quantize_act_row's codes and steps (ggml's activation blocks, matvec_q8.h), 8 lanes
// at a time (the same f32 products and nearest-even rounding, so the same codes bit for bit), with
// the sums the blocked kernels take per 32-element block.
//
// Decoding: per sub-block, 8 rows' 32 codes at a time (block_codes.h's codes, as vectors: codes32,
// codes16) go through one 8 x 8 transpose of dwords, so dword k of the 8 rows (their codes 4k .. 4k + 3)
// is one 32-byte store into the panel's dword k.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/block_codes.h"
#include "ops/gemm_q8.h"
#include "common/half.h"
#include "ops/int4.h"
#include "ops/matvec_q8.h"

namespace sparq {
namespace {

constexpr int NR = GEMM_Q8_NR;

// The 32 4-bit values of 16 bytes: byte j's low nibble is element j, its high nibble element j + 16.
inline __m256i nibbles16(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4), _mm_and_si128(b, low4));
}

// Bits `shift` .. shift + bits - 1 of each of 32 bytes (shift < 8): shifting 16-bit lanes moves the high
// byte's bits into the low byte's top, which the mask drops.
inline __m256i bits32(const uint8_t* x, int shift, int bits) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>((1 << bits) - 1)));
}

// Element j's bit of a little-endian 32-bit mask, times 16: byte j of qh[j / 8], bit j % 8.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

// IQ4_LEVELS[v] for each byte v < 16.
inline __m256i iq4_levels(__m256i v) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(IQ4_LEVELS));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), v);
}

// block_codes.h's codes32 and chunk_codes16 as vectors, one specialization per block type: the 32 codes
// of sub-block `sub` of block x (types of 32-element sub-blocks), or elements 32 k4 .. 32 k4 + 31 of a
// q2_k, q3_k or q6_k super-block x (k4 < 8; H = k4 / 4, k = k4 % 4).
template <WeightType T>
__m256i panel_codes32(const uint8_t* x, int sub);
template <WeightType T>
__m256i panel_codes16(const uint8_t* x, int k4);
template <>
inline __m256i panel_codes32<WeightType::q4_0>(const uint8_t* x, int) {
  return _mm256_sub_epi8(nibbles16(x + 2), _mm256_set1_epi8(8));
}
template <>
inline __m256i panel_codes32<WeightType::q4_1>(const uint8_t* x, int) {
  return nibbles16(x + 4);
}
template <>
inline __m256i panel_codes32<WeightType::q8_0>(const uint8_t* x, int) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2));
}
template <>
inline __m256i panel_codes32<WeightType::iq4_nl>(const uint8_t* x, int) {
  return iq4_levels(nibbles16(x + 2));
}
template <>
inline __m256i panel_codes32<WeightType::q5_0>(const uint8_t* x, int) {
  return _mm256_sub_epi8(_mm256_or_si256(nibbles16(x + 6), fifth_bits(x + 2)), _mm256_set1_epi8(16));
}
template <>
inline __m256i panel_codes32<WeightType::q5_1>(const uint8_t* x, int) {
  return _mm256_or_si256(nibbles16(x + 8), fifth_bits(x + 4));
}
template <>
inline __m256i panel_codes32<WeightType::iq4_xs>(const uint8_t* x, int sub) {
  return iq4_levels(nibbles16(x + 8 + 16 * sub));
}
template <>
inline __m256i panel_codes32<WeightType::q4_k>(const uint8_t* x, int sub) {
  return bits32(x + 16 + 32 * (sub / 2), 4 * (sub % 2), 4);
}
template <>
inline __m256i panel_codes32<WeightType::q5_k>(const uint8_t* x, int sub) {
  return _mm256_or_si256(bits32(x + 48 + 32 * (sub / 2), 4 * (sub % 2), 4), _mm256_slli_epi16(bits32(x + 16, sub, 1), 4));
}
template <>
inline __m256i panel_codes16<WeightType::q2_k>(const uint8_t* x, int k4) {
  return bits32(x + 16 + 32 * (k4 >> 2), 2 * (k4 & 3), 2);
}
template <>
inline __m256i panel_codes16<WeightType::q3_k>(const uint8_t* x, int k4) {
  return _mm256_or_si256(bits32(x + 32 + 32 * (k4 >> 2), 2 * (k4 & 3), 2), _mm256_slli_epi16(bits32(x, k4, 1), 2));
}
template <>
inline __m256i panel_codes16<WeightType::q6_k>(const uint8_t* x, int k4) {
  const int H = k4 >> 2, k = k4 & 3;
  return _mm256_or_si256(bits32(x + 64 * H + 32 * (k & 1), 4 * (k >> 1), 4), _mm256_slli_epi16(bits32(x + 128 + 32 * H, 2 * k, 2), 4));
}

// The integer minimum c_h of half-block `sub` of a q2_k, q3_k or q6_k super-block x (scale sc_h and d
// from scale_min16) and the super-block's multiplier mm of it: w_j = d sc_h u_j + mm c_h (gemm_q8.h).
template <WeightType T>
int half_block_min(const uint8_t* x, int sub, int sc, float d, float& mm);
template <>
inline int half_block_min<WeightType::q2_k>(const uint8_t* x, int sub, int, float, float& mm) {
  mm = -fp16_to_fp32_ref(load_u16(x + 82));  // its minimum mn_h, times -dmin
  return x[sub] >> 4;
}
template <>
inline int half_block_min<WeightType::q3_k>(const uint8_t*, int, int sc, float d, float& mm) {
  mm = -4.0f * d;  // the offset 4: -4 d sc_h
  return sc;
}
template <>
inline int half_block_min<WeightType::q6_k>(const uint8_t*, int, int sc, float d, float& mm) {
  mm = -32.0f * d;  // the offset 32: -32 d sc_h
  return sc;
}

// 8 rows of 32 codes (row i at c + 32 i, zero rows where i >= rows_in) to dst: dword k of the 8 rows at
// dst + k * NR * 4, 32 bytes. `off` is added to every code of the rows in.
inline void store_rows8(const int8_t* c, int rows_in, int off, uint8_t* dst) {
  const __m256i o = _mm256_set1_epi8(static_cast<char>(off));
  __m256 r[8];
  for (int i = 0; i < 8; ++i) {
    const __m256i v = _mm256_add_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(c + 32 * i)), o);
    r[i] = _mm256_castsi256_ps(i < rows_in ? v : _mm256_setzero_si256());
  }
  // The 8 x 8 transpose of dwords: rows pairwise interleaved, then in fours, then the 128-bit halves.
  __m256 a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm256_shuffle_ps(a[i], a[i + 2], 0x44);
    b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], 0xee);
    b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0x44);
    b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0xee);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_store_ps(reinterpret_cast<float*>(dst + k * NR * 4), _mm256_permute2f128_ps(b[k], b[k + 4], 0x20));
    _mm256_store_ps(reinterpret_cast<float*>(dst + (k + 4) * NR * 4), _mm256_permute2f128_ps(b[k], b[k + 4], 0x31));
  }
}

// max |x_j| over n elements (a multiple of 8; x finite): max is exact, so any order gives quantize_act_row's.
inline float abs_max(const float* x, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// Sum of the 8 int32 lanes of v.
inline int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// quantize_act_row's codes of 32 elements: x * mul rounded to nearest even (vroundps; the scalar
// code's 1.5 * 2^23 trick gives the same integers), stored in element order into q. Returns their
// sum; first gets the sum of the first 16.
inline int32_t act_codes32(const float* x, __m256 mul, int8_t* q, int32_t& first) {
  __m256i c[4];
  for (int i = 0; i < 4; ++i)
    c[i] =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  first = sum_lanes(_mm256_add_epi32(c[0], c[1]));
  return first + sum_lanes(_mm256_add_epi32(c[2], c[3]));
}

// A multiplier that overflowed to infinity gives codes 0, as quantize_act_row's.
inline float finite_or_zero(float mul) { return std::fabs(mul) <= 3.0e38f ? mul : 0.0f; }

// Panel row i's scales (row: the weight row, or nullptr past the weight's end: zeros) of the block at
// 32-element block b: for the 32-element types sub-block b's dw and mw, w_j = dw (u_j - off) + mw
// (block_codes.h's sub_block_scale); for the 256-element types (b a multiple of 8) the whole super-block's,
// its header read and its f16 steps converted once (the same f32 products): the K-quants' and iq4_xs's
// 8 sub-blocks, or q2_k's, q3_k's and q6_k's 16 half-blocks' integer scales sc_h and minimums c_h and the
// super-block's d and mm, w_j = d sc_h u_j + mm c_h (gemm_q8.h).
template <WeightType T>
void block_scales(const uint8_t* row, int64_t b, int i, const Q8Panel& p) {
  constexpr BlockTraits bt = block_traits(T);
  const int64_t S = b / 8;
  const uint8_t* x = row ? row + (bt.elements == QK ? b : S) * bt.bytes : nullptr;
  if constexpr (bt.sub_block == 16) {  // gemm_q8_halves
    float d = 0, mm = 0;
    for (int hb = 0; hb < 16; ++hb) {  // half-block hb of the super-block
      float mw;
      int sc = 0, c_h = 0;
      if (x) {
        sc = scale_min16<T>(x, hb, d, mw);
        c_h = half_block_min<T>(x, hb, sc, d, mm);
      }
      const int64_t h = 16 * S + hb;  // of the row
      p.sc[h * NR + i] = static_cast<int32_t>((static_cast<uint32_t>(sc) << 16) | (static_cast<uint32_t>(sc) & 0xffff));
      const uint32_t low = hb % 2 ? static_cast<uint32_t>(p.cm[h / 2 * NR + i]) & 0xffff : 0;
      p.cm[h / 2 * NR + i] = static_cast<int32_t>(low | ((static_cast<uint32_t>(c_h) & 0xffff) << (16 * (hb % 2))));
    }
    p.dw[S * NR + i] = d;
    p.mw[S * NR + i] = mm;
  } else {
    for (int64_t s = b; s < b + bt.elements / QK; ++s) {
      float dw = 0, mw = 0;
      if (x) {
        mw = -0.0f;  // no minimum: -0, as block_codes.h's sub_block_scale
        block_scale<T>(x, static_cast<int>(s - b), dw, mw);
      }
      p.dw[s * NR + i] = dw;
      p.mw[s * NR + i] = mw;
    }
  }
}

template <WeightType T>
void decode_panel(const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p) {
  constexpr BlockTraits bt = block_traits(T);
  constexpr bool halves = bt.sub_block == 16, per_block = bt.elements == QK;
  const int64_t row_bytes = weight_bytes(T, cols), blocks = cols / QK;
  const int off = gemm_q8_offset(T);
  // The scales a row at a time, then the codes: 1.2-1.4x faster for the 256-element types than both
  // in one pass over 8 rows (docs/int8-products.md).
  for (int i = 0; i < NR; ++i)
    for (int64_t b = 0; b < blocks; b += per_block ? 1 : 8) block_scales<T>(i < nr ? w + (r0 + i) * row_bytes : nullptr, b, i, p);
  alignas(32) int8_t c[8 * 32];  // 8 rows' codes of one 32-element block
  // The codes 8 rows at a time along their length: 8 streams of weight bytes for the prefetchers.
  for (int i0 = 0; i0 < NR; i0 += 8) {
    const int rows_in = nr - i0 < 0 ? 0 : nr - i0 < 8 ? nr - i0 : 8;
    for (int64_t b = 0; b < blocks; ++b) {
      for (int ii = 0; ii < rows_in; ++ii) {
        const uint8_t* row = w + (r0 + i0 + ii) * row_bytes;
        __m256i v;
        if constexpr (halves) v = panel_codes16<T>(row + b / 8 * bt.bytes, static_cast<int>(b % 8));
        else v = panel_codes32<T>(row + b / (bt.elements / QK) * bt.bytes, static_cast<int>(b % (bt.elements / QK)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(c + 32 * ii), v);
      }
      store_rows8(c, rows_in, off, p.u + b * 8 * NR * 4 + i0 * 4);
    }
  }
}

}  // namespace

void quantize_q8_acts(WeightType t, const float* x, int64_t t_begin, int64_t t_end, Q8Acts& a) {
  const int64_t cols = a.cols, blocks = cols / QK;
  const int off = gemm_q8_offset(t);
  const bool halves = gemm_q8_halves(t), super = gemm_q8_super(t);
  const int fold = gemm_q8_fold_offset(t);
  const ActBlocks kind = act_blocks(t);
  for (int64_t r = t_begin; r < t_end; ++r) {
    const float* xr = x + r * cols;
    float d = 0, mul = 0;  // the current activation block's unrounded step and code multiplier
    int32_t previous = 0;  // the previous block's sum of codes
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t i = r * blocks + b;
      if (kind == ActBlocks::q8_k && b % 8 == 0) {
        // A new 256-element block: the first element of largest magnitude sets the scale.
        const float amax = abs_max(xr + QK * b, 256);
        float max = 0;
        for (int64_t j = QK * b; j < QK * b + 256 && amax != 0; ++j)
          if (std::fabs(xr[j]) == amax) {
            max = xr[j];
            break;
          }
        const float scale = max != 0 ? -127.0f / max : 0.0f;
        d = max != 0 ? 1.0f / scale : 0.0f;
        mul = finite_or_zero(scale);
      } else if (kind != ActBlocks::q8_k) {
        const float amax = abs_max(xr + QK * b, QK);
        d = amax / 127.0f;
        mul = finite_or_zero(amax != 0 ? 127.0f / amax : 0.0f);
      }
      int32_t first;
      const int32_t sum = act_codes32(xr + QK * b, _mm256_set1_ps(mul), a.q.data() + r * cols + QK * b, first);
      // The steps and sums as quantize_act_row gives them.
      const float dx = kind == ActBlocks::q8_k ? d : fp16_to_fp32_ref(fp32_to_fp16_ref(d));
      a.d[i] = dx;
      a.ds[i] = kind == ActBlocks::q8_1 ? fp16_to_fp32_ref(fp32_to_fp16_ref(d * static_cast<float>(sum))) : dx * static_cast<float>(sum);
      a.corr[i] = -off * sum;
      if (super) a.qsum[i] = static_cast<float>(sum);
      if (!a.qs32.empty() && b % 2 == 1)  // gemm_q8_packs: this sub-block's sum beside the previous one's
        a.qs32[i / 2] = static_cast<int32_t>((static_cast<uint32_t>(sum) << 16) | (static_cast<uint32_t>(previous) & 0xffff));
      previous = sum;
      if (!halves) continue;
      a.qs16[i] = static_cast<int32_t>((static_cast<uint32_t>(sum - first) << 16) | (static_cast<uint32_t>(first) & 0xffff));
      if (!fold) continue;
      a.corr16[2 * i] = -fold * first;
      a.corr16[2 * i + 1] = -fold * (sum - first);
    }
  }
}

void gemm_q8_decode_panel(WeightType t, const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p) {
  with_weight_type(t, [&](auto type) {
    if constexpr (block_traits(decltype(type)::value).gemm_q8) decode_panel<decltype(type)::value>(w, cols, r0, nr, p);
  });
}

void gemm_q8_repack(WeightType t, const uint8_t* w, int64_t, int64_t cols, uint8_t* packed, int64_t row_begin, int64_t row_end) {
  const int64_t row_bytes = weight_bytes(t, cols), supers = cols / QK_K;
  // The codes as the panel decode lays them out, one panel at a time (its scales go unused).
  std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_panel_bytes(t, cols) + 64));
  uint8_t* base = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  float* dw = reinterpret_cast<float*>(base + NR * cols);
  float* mw = dw + gemm_q8_steps(t, cols) * NR;
  int32_t* sc = reinterpret_cast<int32_t*>(mw + gemm_q8_steps(t, cols) * NR);
  const Q8Panel panel{base, dw, mw, sc, sc + cols / 16 * NR};
  for (int64_t r0 = row_begin; r0 < row_end; r0 += NR) {
    const int nr = static_cast<int>(row_end - r0 < NR ? row_end - r0 : NR);
    gemm_q8_decode_panel(t, w, cols, r0, nr, panel);
    uint8_t* dst = packed + r0 / NR * supers * gemm_q8_packed_super(t);
    for (int64_t S = 0; S < supers; ++S, dst += gemm_q8_packed_super(t)) {
      const uint8_t* u = base + 64 * S * NR * 4;  // the super-block's 64 dword steps, 128 bytes each
      // Two steps' low 4 bits per byte: step 2j in the low nibble, 2j + 1 in the high.
      for (int j = 0; j < 32; ++j)
        for (int b = 0; b < NR * 4; ++b)
          dst[128 * j + b] = static_cast<uint8_t>((u[256 * j + b] & 0x0f) | (u[256 * j + 128 + b] & 0x0f) << 4);
      uint8_t* scales = dst + 4096;
      if (t == WeightType::q6_k) {
        // Four steps' top two bits per byte, then the 16 half-blocks' int8 scales and d.
        for (int q = 0; q < 16; ++q)
          for (int b = 0; b < NR * 4; ++b) {
            int high = 0;
            for (int st = 0; st < 4; ++st) high |= (u[128 * (4 * q + st) + b] >> 4) << (2 * st);
            dst[4096 + 128 * q + b] = static_cast<uint8_t>(high);
          }
        scales = dst + 4096 + 2048;
        float* d = reinterpret_cast<float*>(scales + 512);
        for (int i = 0; i < NR; ++i) {
          const uint8_t* x = i < nr ? w + (r0 + i) * row_bytes + S * block_shape(t).bytes : nullptr;
          for (int hb = 0; hb < 16; ++hb) scales[32 * hb + i] = x ? x[192 + hb] : 0;  // q6_k's int8 scales
          d[i] = x ? fp16_to_fp32_ref(load_u16(x + 208)) : 0.0f;
        }
        continue;
      }
      uint8_t* mins = scales + 256;
      float* d = reinterpret_cast<float*>(mins + 256);
      for (int i = 0; i < NR; ++i) {
        const uint8_t* x = i < nr ? w + (r0 + i) * row_bytes + S * block_shape(t).bytes : nullptr;
        for (int sb = 0; sb < 8; ++sb) {
          int scale = 0, min = 0;
          if (x) scale_min_k(x + 4, sb, scale, min);
          scales[32 * sb + i] = static_cast<uint8_t>(scale);
          mins[64 * (sb / 2) + 2 * i + sb % 2] = static_cast<uint8_t>(min);
        }
        const float dmin = x ? fp16_to_fp32_ref(load_u16(x + 2)) : 0.0f;
        d[i] = x ? fp16_to_fp32_ref(load_u16(x)) : 0.0f;
        d[NR + i] = -dmin;
      }
    }
  }
}

void gemm_q8_unpack_panel(WeightType t, const uint8_t* pp, int64_t cols, int, const Q8Panel& p) {
  // q6_k (gemm_q8_packs types with panels); the packed rows past the weight's end are zero already.
  const __m256i low4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30), low16 = _mm256_set1_epi32(0xffff);
  auto code = [&](__m256i nib, __m256i top) { return _mm256_or_si256(_mm256_and_si256(nib, low4), _mm256_and_si256(top, top2)); };
  auto store = [](uint8_t* at, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(at), v); };
  for (int64_t S = 0; S < cols / QK_K; ++S, pp += gemm_q8_packed_super(t)) {
    uint8_t* u = p.u + 64 * S * NR * 4;  // the super-block's 64 dword steps
    for (int hb = 0; hb < 16; ++hb) {
      gemm_q8_prefetch_packed(pp, t, hb, 16);
      // Steps 4 hb .. 4 hb + 3: the nibble plane's pairs 2 hb, 2 hb + 1 and the quad plane's bits 0-1 .. 6-7.
      for (int v = 0; v < 4; ++v) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 256 * hb + 32 * v));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 256 * hb + 128 + 32 * v));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 4096 + 128 * hb + 32 * v));
        uint8_t* at = u + 4 * hb * NR * 4 + 32 * v;
        store(at, code(a, _mm256_slli_epi16(h, 4)));
        store(at + NR * 4, code(_mm256_srli_epi16(a, 4), _mm256_slli_epi16(h, 2)));
        store(at + 2 * NR * 4, code(b, h));
        store(at + 3 * NR * 4, code(_mm256_srli_epi16(b, 4), _mm256_srli_epi16(h, 2)));
      }
    }
    // The half-blocks' scales sc_h (both int16 halves, vpmaddwd's operand) and the pairs c_h of each
    // 32-element block (q6_k's minimums are its scales), 8 rows at a time; d and mm = -32 d.
    const uint8_t* sc = pp + 4096 + 2048;
    for (int i = 0; i < NR; i += 8) {
      for (int hb = 0; hb < 16; hb += 2) {
        const __m256i s0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 32 * hb + i)));
        const __m256i s1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 32 * hb + 32 + i)));
        const int64_t h = 16 * S + hb;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.sc + h * NR + i),
                            _mm256_or_si256(_mm256_and_si256(s0, low16), _mm256_slli_epi32(s0, 16)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.sc + (h + 1) * NR + i),
                            _mm256_or_si256(_mm256_and_si256(s1, low16), _mm256_slli_epi32(s1, 16)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.cm + h / 2 * NR + i),
                            _mm256_or_si256(_mm256_and_si256(s0, low16), _mm256_slli_epi32(s1, 16)));
      }
      const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(sc + 512) + i);
      _mm256_storeu_ps(p.dw + S * NR + i, d);
      _mm256_storeu_ps(p.mw + S * NR + i, _mm256_mul_ps(_mm256_set1_ps(-32.0f), d));
    }
  }
}

}  // namespace sparq
