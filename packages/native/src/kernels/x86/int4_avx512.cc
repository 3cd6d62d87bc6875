// INT4 'int8' path with AVX-512 VNNI: integer dot products of packed nibbles
// with the int8-quantized activation, then one f32 scale per group.
//
// Sign handling. vpdpbusd multiplies the UNSIGNED bytes of its first source by
// the SIGNED bytes of its second and adds each run of four products into an
// int32 lane. Our weights are signed (q in [-8, 7]), so we feed u = q + 8 in
// [0, 15] as the unsigned operand (u is just the nibble with bit 3 flipped:
// n ^ 8) and the activation's int8 as the signed one. Then
//   sum u * qx = sum q * qx + 8 * sum qx,
// so each lane starts from -(8 + zero) * sum qx (the activation's sum over the
// lane's eight elements, computed once per call) and ends holding exactly
// sum (q - zero) * qx: the same integers as the scalar path, in any order.
// No lane can overflow: |(q - zero) * qx| <= 15 * 127 per element.
//
// Layout. A chunk is 64 packed bytes = 128 elements. Low nibbles hold the even
// elements, high nibbles the odd ones, so they meet Int8Acts' even and odd
// halves; lane i of a chunk covers elements 8i .. 8i + 7 (Int8Acts lane
// 16 * chunk + i), which lie in one group for every group size (32, 64, 128, or
// a whole row).
#include "kernels/x86/intrinsics.h"

#include <cstring>

#include "kernels/x86/matvec_simd.h"
#include "ops/int4.h"

namespace sparq {
namespace {

constexpr int64_t CHUNK = 128;  // elements per 64-byte chunk of packed weights

// Per-chunk view of the weight's groups: which group each lane belongs to.
struct LaneGroups {
  __m512i index;  // lane -> group offset within the chunk
  int64_t group, per_chunk;
  LaneGroups(int64_t group_size) : group(group_size), per_chunk(group_size < CHUNK ? CHUNK / group_size : 1) {
    alignas(64) int32_t idx[16];
    for (int i = 0; i < 16; ++i) idx[i] = group_size < CHUNK ? static_cast<int32_t>(8 * i / group_size) : 0;
    index = _mm512_load_si512(idx);
  }
  // The group of the chunk's first element (no division for groups of at most a chunk).
  int64_t first(int64_t chunk) const { return group <= CHUNK ? chunk * per_chunk : chunk * CHUNK / group; }
  // The chunk's per_chunk values from per_group, spread over the lanes. Plain loads of exactly that
  // many values, not masked ones: with a masked load per chunk, one thread read the weights from DRAM
  // about 15% slower (4096 x 4096, groups of 32, 23-25 -> 28 GB/s, loaded VM; in cache alike).
  __m512 spread(const float* per_group) const {
    const __m128 v = per_chunk == 4   ? _mm_loadu_ps(per_group)
                     : per_chunk == 2 ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(per_group)))
                                      : _mm_load_ss(per_group);
    return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(v));
  }
  __m512i spread(const int8_t* per_group) const {
    int32_t bytes = 0;
    std::memcpy(&bytes, per_group, static_cast<size_t>(per_chunk));
    return _mm512_permutexvar_epi32(index, _mm512_cvtepi8_epi32(_mm_cvtsi32_si128(bytes)));
  }
};

// The int32 lanes of one chunk for NX activation rows: lanes[k] = sum (q - zero) * x_q per lane.
template <int NX, bool Symmetric>
inline void chunk_lanes(const uint8_t* packed, const int8_t* zeros, const LaneGroups& lg, const Int8Acts& c, int64_t t0, int64_t chunk,
                        __m512i* lanes) {
  const __m512i b = _mm512_xor_si512(_mm512_loadu_si512(packed), _mm512_set1_epi8(static_cast<char>(0x88)));  // u = n ^ 8
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i lo = _mm512_and_si512(b, low), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
  const __m512i zero = Symmetric ? _mm512_setzero_si512() : lg.spread(zeros);
  const int64_t bytes = c.half(), lanes_per_row = c.lanes();
  for (int k = 0; k < NX; ++k) {
    const int64_t t = t0 + k;
    const int64_t lane = t * lanes_per_row + chunk * 16;
    __m512i acc = _mm512_loadu_si512(c.lane_bias.data() + lane);  // -8 * sum x_q
    if (!Symmetric) acc = _mm512_sub_epi32(acc, _mm512_mullo_epi32(zero, _mm512_loadu_si512(c.lane_sum.data() + lane)));
    acc = _mm512_dpbusd_epi32(acc, lo, _mm512_loadu_si512(c.even.data() + t * bytes + chunk * 64));
    lanes[k] = _mm512_dpbusd_epi32(acc, hi, _mm512_loadu_si512(c.odd.data() + t * bytes + chunk * 64));
  }
}

template <bool Symmetric>
void matmul_vnni(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end) {
  const LaneGroups lg(w.group);
  const int64_t groups = w.groups(), lanes_per_row = a.lanes(), chunks = w.cols / CHUNK;
  for_each_tile(a.n, w.rows, out, row_begin, row_end, [&](auto nx, int64_t r, int64_t t0, float* res) {
    constexpr int NX = decltype(nx)::value;
    const uint8_t* row = w.packed + r * w.cols / 2;
    two_chains<Avx512, NX>(
        chunks,
        [&](int64_t chunk, __m512* acc) {
          const int64_t g0 = r * groups + lg.first(chunk);
          // Several activation rows: the next weight row's chunk and scales into L1 now (the tile's work
          // per weight byte leaves the hardware prefetchers behind; as matvec_q8_simd.h's rows_q8).
          if (NX > 1) {
            _mm_prefetch(reinterpret_cast<const char*>(row + w.cols / 2 + chunk * 64), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(w.scales + g0 + groups), _MM_HINT_T0);
          }
          __m512i lanes[NX];
          chunk_lanes<NX, Symmetric>(row + chunk * 64, w.zeros + g0, lg, a, t0, chunk, lanes);
          const __m512 wscale = lg.spread(w.scales + g0);
          for (int k = 0; k < NX; ++k) {
            const __m512 scale = Avx512::mul(wscale, Avx512::load(a.lane_scale.data() + (t0 + k) * lanes_per_row + chunk * 16));
            acc[k] = Avx512::fma(_mm512_cvtepi32_ps(lanes[k]), scale, acc[k]);
          }
        },
        res);
    if (chunks * CHUNK < w.cols)
      for (int k = 0; k < NX; ++k) res[k] += int4_int8_tail(w, a, r, t0 + k, chunks * CHUNK);
  });
}

}  // namespace

bool int4_vnni_supports(int64_t group, int64_t cols) {
  // Every lane's 8 elements must lie in one group, and a chunk's groups must be consecutive.
  if (group <= CHUNK) return CHUNK % group == 0 && group % 8 == 0;
  return group % CHUNK == 0 || group == cols;
}

void matmul_int4_int8_vnni(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end) {
  if (w.symmetric) matmul_vnni<true>(w, a, out, row_begin, row_end);
  else matmul_vnni<false>(w, a, out, row_begin, row_end);
}

void int4_group_sums_vnni(const Int4View& w, const Int8Acts& a, int32_t* sums) {
  const LaneGroups lg(w.group);
  const int64_t groups = w.groups(), chunks = w.cols / CHUNK;
  alignas(64) int32_t lanes_out[16];
  for (int64_t t = 0; t < a.n; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      int32_t* s = sums + (t * w.rows + r) * groups;
      for (int64_t g = 0; g < groups; ++g) s[g] = 0;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        __m512i lanes[1];
        chunk_lanes<1, false>(w.packed + r * w.cols / 2 + chunk * 64, w.zeros + r * groups + lg.first(chunk), lg, a, t, chunk, lanes);
        _mm512_store_si512(lanes_out, lanes[0]);
        for (int i = 0; i < 16; ++i) s[(chunk * CHUNK + 8 * i) / w.group] += lanes_out[i];
      }
      // Tail elements: scalar integer products, added to their groups.
      for (int64_t j = chunks * CHUNK; j < w.cols; ++j) {
        const uint8_t b = w.packed[(r * w.cols + j) / 2];
        const int64_t g = j / w.group;
        s[g] += ((j % 2 == 0 ? nibble_lo(b) : nibble_hi(b)) - w.zeros[r * groups + g]) * a.q[t * w.cols + j];
      }
    }
  }
}

}  // namespace sparq
