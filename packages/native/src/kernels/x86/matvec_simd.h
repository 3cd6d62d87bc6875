// The SIMD dense kernels written once as templates over the wrapper layer's vector traits V
// (kernels/simd.h: Avx2, 8 lanes; Avx512, 16 lanes), included by
// matvec_avx2.cc and matvec_avx512.cc, each compiled with its ISA flags.
// Everything here has internal linkage, so the two instantiations never meet.
//
// Accumulation is f32 with FMA; leftover elements (cols not a multiple of the
// width) run through a scalar tail. Block formats fold the block scale once
// per block: acc += d * sum_j q_j x_j.
#pragma once
#include <type_traits>
#include <vector>

#include "kernels/simd.h"
#include "kernels/x86/decode_simd.h"
#include "ops/int4.h"
#include "ops/matvec.h"

namespace sparq {
namespace {

// Calls step(i, acc) for i = 0, 1, ... < count, alternating two accumulator sets
// (two independent FMA chains per activation row), then stores the sums in res.
template <class V, int NX, class Step>
inline void two_chains(int64_t count, Step step, float* res) {
  typename V::F a[NX], b[NX];
  for (int k = 0; k < NX; ++k) a[k] = b[k] = V::zero();
  int64_t i = 0;
  for (; i + 2 <= count; i += 2) {
    step(i, a);
    step(i + 1, b);
  }
  if (i < count) step(i, a);
  for (int k = 0; k < NX; ++k) res[k] = V::reduce_add(V::add(a[k], b[k]));
}

// One row of w (f32 | f16 | bf16) against NX activation rows x + k * cols.
template <class V, int NX, class Load>
inline void dot_plain(Load load, float (*scalar)(const uint8_t*, int64_t), const uint8_t* w, const float* x, int64_t cols, float* res) {
  constexpr int W = V::W;
  two_chains<V, NX>(
      cols / W,
      [&](int64_t i, typename V::F* acc) {
        const typename V::F wv = load(w, i * W);
        for (int k = 0; k < NX; ++k) acc[k] = V::fma(wv, V::load(x + k * cols + i * W), acc[k]);
      },
      res);
  for (int64_t j = cols / W * W; j < cols; ++j)
    for (int k = 0; k < NX; ++k) res[k] += scalar(w, j) * x[k * cols + j];
}

// One row of blocks against NX activation rows: per block sum_j q_j x_j, then scaled by d (and m * sum x for q4_1).
template <class V, int NX>
inline void dot_blocks(WeightType t, const uint8_t* w, const float* x, int64_t cols, float* res) {
  using F = typename V::F;
  constexpr int W = V::W;
  const int64_t bytes = weight_bytes(t, QK);
  two_chains<V, NX>(
      cols / QK,
      [&](int64_t b, F* acc) {
        const uint8_t* blk = w + b * bytes;
        const float* xb = x + b * QK;
        const F d = V::set1(f16_at(blk));
        F part[NX], xsum[NX];
        for (int k = 0; k < NX; ++k) part[k] = xsum[k] = V::zero();
        if (t == WeightType::q8_0) {
          for (int h = 0; h < QK; h += W) {
            const F q = V::from_i8(blk + 2 + h);
            for (int k = 0; k < NX; ++k) part[k] = V::fma(q, V::load(xb + k * cols + h), part[k]);
          }
        } else {
          // q4_0 stores q + 8; q4_1 stores q and adds m * sum(x) below. Byte j holds elements j and j + 16.
          const bool q4_0 = t == WeightType::q4_0;
          const F bias = V::set1(q4_0 ? 8.0f : 0.0f);
          for (int h = 0; h < QK / 2; h += W) {
            F lo, hi;
            V::nibbles(blk + (q4_0 ? 2 : 4) + h, lo, hi);
            lo = V::sub(lo, bias);
            hi = V::sub(hi, bias);
            for (int k = 0; k < NX; ++k) {
              const F x0 = V::load(xb + k * cols + h), x1 = V::load(xb + k * cols + QK / 2 + h);
              part[k] = V::fma(hi, x1, V::fma(lo, x0, part[k]));
              if (!q4_0) xsum[k] = V::add(xsum[k], V::add(x0, x1));
            }
          }
          if (!q4_0) {
            const F m = V::set1(f16_at(blk + 2));
            for (int k = 0; k < NX; ++k) acc[k] = V::fma(xsum[k], m, acc[k]);
          }
        }
        for (int k = 0; k < NX; ++k) acc[k] = V::fma(part[k], d, acc[k]);
      },
      res);
}

// Decoded weights [0, count) of k (count a multiple of W, sub-blocks of sub) against NX activation
// rows xb + j * cols: vector v into accumulator set v % A, so A independent FMA chains per row.
template <class V, int NX, int A>
SPARQ_DECODE_INLINE void dot_codes(const BlockCodes& k, int sub, int count, const float* xb, int64_t cols, typename V::F (&acc)[A][NX]) {
  constexpr int W = V::W;
  // Unrolled whole (count is a constant after inlining), the scale broadcasts are one per sub-block.
#pragma GCC unroll 16
  for (int e = 0; e < count; e += A * W)
    for (int a = 0; a < A && e + a * W < count; ++a) {
      const typename V::F wv = BlockDecoder<V>::weights(k, e + a * W, (e + a * W) / sub);
      for (int j = 0; j < NX; ++j) acc[a][j] = V::fma(wv, V::load(xb + j * cols + e + a * W), acc[a][j]);
    }
}

// One row of a read-only block type T (q5_*, the K-quants, iq4_*) against NX activation rows: blocks
// decoded to int8 codes in L1 (a 256-element block, or enough 32-element ones for A vectors), then
// W weights at a time to f32 in registers (decode_simd.h) and FMAs into A accumulator sets.
template <class V, int NX, WeightType T>
inline void dot_decoded(const uint8_t* w, const float* x, int64_t cols, float* res) {
  using F = typename V::F;
  // A accumulator sets, A NX independent FMA chains (latency 4, two FMA pipes), few enough for AVX2's
  // 16 registers with the weights, activations and scales (8 sets at NX = 1 measured no faster than 4).
  constexpr int W = V::W, A = NX <= 2 ? 4 : 2;
  const BlockShape s = block_shape(T);
  const int n = static_cast<int>(s.elements), sub = sub_block_elements(T);
  const int group = n >= A * W ? 1 : A * W / n;  // blocks decoded per step
  BlockCodes k;
  F acc[A][NX];
  for (int a = 0; a < A; ++a)
    for (int j = 0; j < NX; ++j) acc[a][j] = V::zero();
  const int64_t blocks = cols / n;
  int64_t b = 0;
  for (; b + group <= blocks; b += group) {
    for (int g = 0; g < group; ++g) codes<T>(w + (b + g) * s.bytes, k, g);
    dot_codes<V, NX, A>(k, sub, group * n, x + b * n, cols, acc);
  }
  for (; b < blocks; ++b) {
    codes<T>(w + b * s.bytes, k);
    dot_codes<V, NX, A>(k, sub, n, x + b * n, cols, acc);
  }
  for (int j = 0; j < NX; ++j) {
    F sum = acc[0][j];
    for (int a = 1; a < A; ++a) sum = V::add(sum, acc[a][j]);
    res[j] = V::reduce_add(sum);
  }
}

inline float scalar_f32(const uint8_t* w, int64_t j) {
  float v;
  std::memcpy(&v, w + 4 * j, 4);
  return v;
}
inline float scalar_f16(const uint8_t* w, int64_t j) { return fp16_to_fp32_ref(load_u16(w + 2 * j)); }
inline float scalar_bf16(const uint8_t* w, int64_t j) { return bf16_to_fp32(load_u16(w + 2 * j)); }

// One row of w, of type T, against NX activation rows: the plain types' loads, or dot_blocks for the
// quantizable block types, or dot_decoded for the read-only ones.
template <class V, int NX, WeightType T>
void dot_row(const uint8_t* w, const float* x, int64_t cols, float* res) {
  if constexpr (T == WeightType::f32) {
    dot_plain<V, NX>([](const uint8_t* p, int64_t j) { return V::load(reinterpret_cast<const float*>(p) + j); }, scalar_f32, w, x, cols,
                     res);
  } else if constexpr (T == WeightType::f16) {
    dot_plain<V, NX>([](const uint8_t* p, int64_t j) { return V::load(reinterpret_cast<const uint16_t*>(p) + j); }, scalar_f16, w, x, cols,
                     res);
  } else if constexpr (T == WeightType::bf16) {
    dot_plain<V, NX>([](const uint8_t* p, int64_t j) { return V::load_bf16(reinterpret_cast<const uint16_t*>(p) + j); }, scalar_bf16, w, x,
                     cols, res);
  } else if constexpr (block_traits(T).quantizable) {
    dot_blocks<V, NX>(T, w, x, cols, res);
  } else {
    dot_decoded<V, NX, T>(w, x, cols, res);
  }
}

// Rows [row_begin, row_end), each against the activation rows in tiles of up to 4, calling
// tile<NX>(r, t0, res) and storing res[k] at out[(t0 + k) * rows + r].
template <class Tile>
inline void for_each_tile(int64_t n, int64_t rows, float* out, int64_t row_begin, int64_t row_end, Tile tile) {
  float res[4];
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t0 = 0; t0 < n; t0 += 4) {
      const int64_t nx = n - t0 < 4 ? n - t0 : 4;
      if (nx == 4) tile(std::integral_constant<int, 4>(), r, t0, res);
      else if (nx == 3) tile(std::integral_constant<int, 3>(), r, t0, res);
      else if (nx == 2) tile(std::integral_constant<int, 2>(), r, t0, res);
      else tile(std::integral_constant<int, 1>(), r, t0, res);
      for (int64_t k = 0; k < nx; ++k) out[(t0 + k) * rows + r] = res[k];
    }
  }
}

// The per-row kernel of weight type T (matvec.h's MatmulFn; t is T).
template <class V, WeightType T>
void matmul_simd(WeightType, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
                 int64_t row_end) {
  const int64_t row_bytes = weight_bytes(T, cols);
  for_each_tile(n, rows, out, row_begin, row_end, [&](auto nx, int64_t r, int64_t t0, float* res) {
    dot_row<V, decltype(nx)::value, T>(w + r * row_bytes, x + t0 * cols, cols, res);
  });
}
// One per weight type (matvec.h's matmul_avx2, matmul_avx512).
template <class V>
constexpr PerWeightType<MatmulFn> matmul_simd_kernels() {
  return per_weight_type<MatmulFn>([](auto type) { return &matmul_simd<V, decltype(type)::value>; });
}

#if defined(__AVX512F__)
// INT4 'dequant' path, AVX-512: 64 packed bytes (a chunk of 128 elements) as 16 dwords; dword i
// holds the nibbles of elements 8i .. 8i + 7, so (dword >> 4k) has element 8i + k in its low four
// bits, which vpermps uses as the index into the 16 nibble values: shift + permute + FMA per 16
// elements. The activations are permuted once per call to match (xp[c*128 + 16k + i] = x[c*128 + 8i + k]).
// Per lane: sum_k (q - zero) x over its 8 elements (one group), times the lane's group scale.
// Needs groups that tile the chunk (128 % group == 0 with group % 8 == 0, or group % 128 == 0).
inline bool int4_dequant_512_supports(int64_t group) { return group > 0 && ((group % 8 == 0 && 128 % group == 0) || group % 128 == 0); }

template <int NX, bool ASYM>
inline void int4_dequant_512_row(const Int4View& w, const float* xp, int64_t r, __m512i gidx, __mmask16 gmask, float* res) {
  const int64_t half = w.cols / 2, groups = w.groups(), chunks = w.cols / 128;
  const uint8_t* row = w.packed + r * half;
  const uint8_t* end = w.packed + w.rows * half;
  constexpr int64_t PF = 2048;  // best of 512 / 1024 / 2048 on the bench machine
  const float* sc = w.scales + r * groups;
  const int8_t* zr = w.zeros + r * groups;
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  __m512 acc0[NX], acc1[NX];
  for (int k = 0; k < NX; ++k) acc0[k] = acc1[k] = Avx512::zero();
  auto chunk = [&](int64_t c, __m512* acc) {
    // Software prefetch PF bytes ahead (into the next rows too), never past the matrix: the
    // hardware prefetcher alone leaves the DRAM stream short of bandwidth.
    if (row + c * 64 + PF < end) _mm_prefetch(reinterpret_cast<const char*>(row + c * 64 + PF), _MM_HINT_T0);
    const __m512i b = _mm512_loadu_si512(row + c * 64);
    const int64_t g0 = c * 128 / w.group;
    const __m512 s = _mm512_permutexvar_ps(gidx, _mm512_maskz_loadu_ps(gmask, sc + g0));
    __m512 z = Avx512::zero();
    if (ASYM) z = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(gidx, _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(gmask, zr + g0))));
    const float* xc = xp + c * 128;
    __m512 p0[NX], p1[NX];
    for (int k = 0; k < NX; ++k) p0[k] = p1[k] = Avx512::zero();
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; kk += 2) {
      __m512 v0 = _mm512_permutexvar_ps(kk == 0 ? b : _mm512_srli_epi32(b, 4 * kk), table);
      __m512 v1 = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4 * kk + 4), table);
      if (ASYM) {
        v0 = Avx512::sub(v0, z);
        v1 = Avx512::sub(v1, z);
      }
      for (int k = 0; k < NX; ++k) {
        p0[k] = Avx512::fma(v0, Avx512::load(xc + k * w.cols + 16 * kk), p0[k]);
        p1[k] = Avx512::fma(v1, Avx512::load(xc + k * w.cols + 16 * kk + 16), p1[k]);
      }
    }
    for (int k = 0; k < NX; ++k) acc[k] = Avx512::fma(Avx512::add(p0[k], p1[k]), s, acc[k]);
  };
  int64_t c = 0;
  for (; c + 2 <= chunks; c += 2) {
    chunk(c, acc0);
    chunk(c + 1, acc1);
  }
  if (c < chunks) chunk(c, acc0);
  for (int k = 0; k < NX; ++k) res[k] = Avx512::reduce_add(Avx512::add(acc0[k], acc1[k]));
  // Columns past the last whole chunk, scalar (xp holds them unpermuted).
  for (int64_t j = chunks * 128; j < w.cols; ++j) {
    const uint8_t byte = row[j / 2];
    const int64_t g = j / w.group;
    const float wv = static_cast<float>((j % 2 == 0 ? nibble_lo(byte) : nibble_hi(byte)) - zr[g]) * sc[g];
    for (int k = 0; k < NX; ++k) res[k] += wv * xp[k * w.cols + j];
  }
}

template <bool ASYM>
void matmul_int4_dequant_512(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t cols = w.cols, chunks = cols / 128;
  std::vector<float> xp(static_cast<size_t>(n * cols));
  for (int64_t k = 0; k < n; ++k) {
    const float* xr = x + k * cols;
    float* dst = xp.data() + k * cols;
    for (int64_t c = 0; c < chunks; ++c)
      for (int kk = 0; kk < 8; ++kk)
        for (int i = 0; i < 16; ++i) dst[c * 128 + 16 * kk + i] = xr[c * 128 + 8 * i + kk];
    for (int64_t j = chunks * 128; j < cols; ++j) dst[j] = xr[j];
  }
  // Lane i of a chunk is in group g0 + 8i / group (g0 = the chunk's first group).
  const int per = w.group >= 128 ? 1 : static_cast<int>(128 / w.group);
  alignas(64) int32_t idx[16];
  for (int i = 0; i < 16; ++i) idx[i] = w.group >= 128 ? 0 : static_cast<int32_t>(8 * i / w.group);
  const __m512i gidx = _mm512_load_si512(idx);
  const __mmask16 gmask = static_cast<__mmask16>((1u << per) - 1);
  for_each_tile(n, w.rows, out, row_begin, row_end, [&](auto nx, int64_t r, int64_t t0, float* res) {
    int4_dequant_512_row<decltype(nx)::value, ASYM>(w, xp.data() + t0 * cols, r, gidx, gmask, res);
  });
}
#endif

// INT4 'dequant' path, AVX2, groups of a multiple of 32: 16 packed bytes (32 elements) per step, their
// nibbles as signed bytes ((n ^ 8) - 8, 16 at a time), widened 8 at a time (vpmovsxbd from a small
// buffer) to f32 against the even and odd activations; ASYM subtracts the zero after widening.
// Per group sum_j (q_j - zero) x_j, times the scale, as the generic loop below.
template <int NX, bool ASYM>
inline void int4_dequant_256_row(const Int4View& w, const float* xs, int64_t r, float* res) {
  const int64_t half = w.cols / 2, hg = w.group / 2, groups = w.groups();
  const uint8_t* row = w.packed + r * half;
  const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  alignas(32) int8_t codes[32];  // [even elements' codes | odd elements' codes] of one step
  two_chains<Avx2, NX>(
      groups,
      [&](int64_t g, __m256* acc) {
        const __m256i zero = _mm256_set1_epi32(w.zeros[r * groups + g]);
        __m256 part[NX];
        for (int k = 0; k < NX; ++k) part[k] = Avx2::zero();
        for (int64_t j = g * hg; j < (g + 1) * hg; j += 16) {
          const __m128i b =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j)), _mm_set1_epi8(static_cast<char>(0x88)));
          _mm_store_si128(reinterpret_cast<__m128i*>(codes), _mm_sub_epi8(_mm_and_si128(b, low), eight));
          _mm_store_si128(reinterpret_cast<__m128i*>(codes + 16), _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), low), eight));
          for (int s = 0; s < 32; s += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + s)));
            if (ASYM) q = _mm256_sub_epi32(q, zero);
            const __m256 v = _mm256_cvtepi32_ps(q);
            const int64_t at = (s < 16 ? 0 : half) + j + s % 16;  // even[j + s] or odd[j + s - 16]
            for (int k = 0; k < NX; ++k) part[k] = Avx2::fma(v, Avx2::load(xs + k * w.cols + at), part[k]);
          }
        }
        const __m256 scale = Avx2::set1(w.scales[r * groups + g]);
        for (int k = 0; k < NX; ++k) acc[k] = Avx2::fma(part[k], scale, acc[k]);
      },
      res);
}

// INT4 'dequant' path. The activation rows are first split into even and odd
// elements (x_even[j] = x[2j]) so a packed byte's two nibbles meet their
// activations without shuffles; per group sum_j (q_j - zero) x_j, times the scale.
template <class V>
void matmul_int4_dequant_simd(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end) {
#if defined(__AVX512F__)
  if constexpr (std::is_same<V, Avx512>::value) {
    if (int4_dequant_512_supports(w.group)) {
      if (w.symmetric) matmul_int4_dequant_512<false>(w, x, n, out, row_begin, row_end);
      else matmul_int4_dequant_512<true>(w, x, n, out, row_begin, row_end);
      return;
    }
  }
#endif
  using F = typename V::F;
  constexpr int W = V::W;
  const int64_t half = w.cols / 2, hg = w.group / 2, groups = w.groups();
  std::vector<float> split(static_cast<size_t>(n * w.cols));  // (n, [even | odd])
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < half; ++j) {
      split[k * w.cols + j] = x[k * w.cols + 2 * j];
      split[k * w.cols + half + j] = x[k * w.cols + 2 * j + 1];
    }
  for_each_tile(n, w.rows, out, row_begin, row_end, [&](auto nx, int64_t r, int64_t t0, float* res) {
    constexpr int NX = decltype(nx)::value;
    const float* xs = split.data() + t0 * w.cols;
    if constexpr (std::is_same<V, Avx2>::value) {
      if (w.group % 32 == 0)
        return w.symmetric ? int4_dequant_256_row<NX, false>(w, xs, r, res) : int4_dequant_256_row<NX, true>(w, xs, r, res);
    }
    const uint8_t* row = w.packed + r * half;
    float tail[NX] = {};
    two_chains<V, NX>(
        groups,
        [&](int64_t g, F* acc) {
          const float scale = w.scales[r * groups + g];
          const int zero = w.zeros[r * groups + g];
          const typename V::Table table = V::int4_table(zero);
          F part[NX];
          for (int k = 0; k < NX; ++k) part[k] = V::zero();
          int64_t j = g * hg;
          for (; j + W <= (g + 1) * hg; j += W) {
            F even, odd;
            V::int4_pair(row + j, table, even, odd);
            for (int k = 0; k < NX; ++k)
              part[k] = V::fma(odd, V::load(xs + k * w.cols + half + j), V::fma(even, V::load(xs + k * w.cols + j), part[k]));
          }
          for (; j < (g + 1) * hg; ++j)  // only when a whole-row group is not a multiple of 2W
            for (int k = 0; k < NX; ++k)
              tail[k] += scale * (static_cast<float>(nibble_lo(row[j]) - zero) * xs[k * w.cols + j] +
                                  static_cast<float>(nibble_hi(row[j]) - zero) * xs[k * w.cols + half + j]);
          const F s = V::set1(scale);
          for (int k = 0; k < NX; ++k) acc[k] = V::fma(part[k], s, acc[k]);
        },
        res);
    for (int k = 0; k < NX; ++k) res[k] += tail[k];
  });
}

}  // namespace
}  // namespace sparq
