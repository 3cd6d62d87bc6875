// INT4 'int8' path with AVX2: integer dot products of packed nibbles with the
// int8-quantized activation, then one f32 scale per 8-element lane.
//
// Same sign trick as the VNNI kernel (int4_avx512.cc): the unsigned operand is
// u = q + 8 = nibble ^ 8 in [0, 15], the signed one the activation code, and
// each lane starts from -(8 + zero) * (sum of its activation codes). AVX2 has
// no vpdpbusd, so a step is vpmaddubsw (u * x, adjacent pairs summed to int16)
// for the low and for the high nibbles, their sum, then vpmaddwd against ones
// (adjacent int16 pairs to int32). No int16 can saturate: each holds four
// products |u * x| <= 15 * 127, at most 7620.
//
// Layout. A step is 32 packed bytes = 64 elements. Byte j's low nibble is
// element 2j (Int8Acts::even[j]) and its high nibble element 2j + 1 (odd[j]), so
// int16 k of the sum covers elements 4k .. 4k + 3 and int32 lane i elements
// 8i .. 8i + 7: Int8Acts lane 8 * step + i.
#include "ops/int4.h"
#include "kernels/x86/matvec_simd.h"

namespace sparq {
namespace {

constexpr int64_t STEP = 64;  // elements per 32-byte step

// Which weight group each lane of a step belongs to.
struct StepGroups {
  __m256i index;  // lane -> group offset within the step (groups <= 64)
  int per_step;   // groups loaded per step: 64 / group, or 1
  int64_t group;
  explicit StepGroups(int64_t g) : per_step(g < STEP ? static_cast<int>(STEP / g) : 1), group(g) {
    alignas(32) int32_t idx[8];
    for (int i = 0; i < 8; ++i) idx[i] = g < STEP ? static_cast<int32_t>(8 * i / g) : 0;
    index = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  }
  // The group of the step's first element.
  int64_t first(int64_t step) const { return group <= STEP ? step * per_step : step * STEP / group; }
  __m256 spread(const float* per_group) const {
    if (per_step == 1) return Avx2::set1(per_group[0]);
    return _mm256_permutevar8x32_ps(Avx2::load(per_group), index);  // reads 8 floats; see the caller's bound
  }
  __m256i spread(const int8_t* per_group) const {
    if (per_step == 1) return _mm256_set1_epi32(per_group[0]);
    alignas(32) int32_t z[8];
    for (int i = 0; i < per_step; ++i) z[i] = per_group[i];
    return _mm256_permutevar8x32_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(z)), index);
  }
};

template <bool Symmetric>
void rows_avx2(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end) {
  const StepGroups sg(w.group);
  const int64_t groups = w.groups(), steps = w.cols / STEP, half = a.half(), lanes = a.lanes();
  const __m256i low = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8(static_cast<char>(0x88)), ones = _mm256_set1_epi16(1);
  // spread() reads 8 scales from the step's first group; near the matrix's end the
  // step's few scales are copied first, so nothing past the buffer is read.
  const int64_t all_groups = w.rows * groups;
  for_each_tile(a.n, w.rows, out, row_begin, row_end, [&](auto nx, int64_t r, int64_t t0, float* res) {
    constexpr int NX = decltype(nx)::value;
    {
      const uint8_t* row = w.packed + r * half;
      two_chains<Avx2, NX>(
          steps,
          [&](int64_t s, __m256* acc) {
            const int64_t g0 = r * groups + sg.first(s);
            // Several activation rows: the next weight row's bytes and scales into L1 now (as int4_avx512.cc).
            if (NX > 1 && s % 2 == 0) {
              _mm_prefetch(reinterpret_cast<const char*>(row + half + s * 32), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(w.scales + g0 + groups), _MM_HINT_T0);
            }
            const __m256i b = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + s * 32)), flip);  // u = n ^ 8
            const __m256i lo = _mm256_and_si256(b, low), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
            __m256 wscale;
            if (sg.per_step == 1 || g0 + 8 <= all_groups) {
              wscale = sg.spread(w.scales + g0);
            } else {
              alignas(32) float tmp[8] = {};
              for (int i = 0; i < sg.per_step; ++i) tmp[i] = w.scales[g0 + i];
              wscale = sg.spread(tmp);
            }
            const __m256i zero = Symmetric ? _mm256_setzero_si256() : sg.spread(w.zeros + g0);
            for (int k = 0; k < NX; ++k) {
              const int64_t t = t0 + k, lane = t * lanes + s * 8;
              const __m256i xe = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.even.data() + t * half + s * 32));
              const __m256i xo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.odd.data() + t * half + s * 32));
              const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
              __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(pairs, ones),
                                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.lane_bias.data() + lane)));
              if (!Symmetric)
                isum = _mm256_sub_epi32(
                    isum, _mm256_mullo_epi32(zero, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.lane_sum.data() + lane))));
              const __m256 scale = Avx2::mul(wscale, Avx2::load(a.lane_scale.data() + lane));
              acc[k] = Avx2::fma(_mm256_cvtepi32_ps(isum), scale, acc[k]);
            }
          },
          res);
      if (steps * STEP < w.cols)
        for (int k = 0; k < NX; ++k) res[k] += int4_int8_tail(w, a, r, t0 + k, steps * STEP);
    }
  });
}

}  // namespace

bool int4_avx2_int8_supports(int64_t group, int64_t cols) {
  // Every lane's 8 elements in one group, and a step's groups consecutive.
  if (group <= STEP) return STEP % group == 0 && group % 8 == 0;
  return group % STEP == 0 || group == cols;
}

void matmul_int4_int8_avx2(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end) {
  if (w.symmetric) rows_avx2<true>(w, a, out, row_begin, row_end);
  else rows_avx2<false>(w, a, out, row_begin, row_end);
}

}  // namespace sparq
