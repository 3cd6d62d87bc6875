// The 'int8' product of block weights (matvec_q8.h) for arm64, written once over an integer dot
// product Dot of int8 codes (Dot::dot(c, q, size), size 16 or 32) and instantiated by
// matvec_q8_neon.cc (plain NEON: SMULL / SMLAL into 16-bit lanes, SADALP into 32-bit ones) and
// matvec_q8_dotprod.cc (SDOT). Internal linkage, so the two never meet.
//
// Per weight row, its codes are decoded once into a row buffer (block_codes.h's sub_block_codes,
// the scalar twin's decoder), then every activation row takes its integer sums per sub-block. The
// sums are exact in int32 (|c q| <= 128 * 127, two to a 16-bit lane at most: 32512), so
// q8_sums_* equal q8_sums_ref bit for bit, and the f32 combination runs in the scalar twin's order
// (sub-blocks ascending), so the outputs equal matmul_q8_ref's too.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <vector>

#include "common/block_codes.h"
#include "ops/matvec_q8.h"

namespace sparq {
namespace {

// Row r of w decoded: codes (cols), per sub-block dl and m (cols / size).
struct DecodedRow {
  std::vector<int8_t> c;
  std::vector<float> dl, m;
  void decode(WeightType t, const uint8_t* row, int64_t cols) {
    const int64_t size = sub_block_elements(t), subs = cols / size;
    c.resize(static_cast<size_t>(cols));
    dl.resize(static_cast<size_t>(subs));
    m.resize(static_cast<size_t>(subs));
    for (int64_t s = 0; s < subs; ++s) sub_block_codes(t, row, s, c.data() + s * size, dl[s], m[s]);
  }
};

// For weight rows [row_begin, row_end) and every activation row k: fn(r, k, s, isum) per sub-block s
// in ascending order, with row.dl / row.m of r's sub-blocks.
template <class Dot, class Fn>
void each_row_sums(WeightType t, const uint8_t* w, const RowActs& a, int64_t row_begin, int64_t row_end, Fn fn) {
  const int size = sub_block_elements(t);
  const int64_t subs = a.cols / size, row_bytes = weight_bytes(t, a.cols);
  thread_local DecodedRow row;
  for (int64_t r = row_begin; r < row_end; ++r) {
    row.decode(t, w + r * row_bytes, a.cols);
    for (int64_t k = 0; k < a.n; ++k) {
      const int8_t* q = a.q.data() + k * a.cols;
      for (int64_t s = 0; s < subs; ++s) fn(r, k, s, Dot::dot(row.c.data() + s * size, q + s * size, size), row);
    }
  }
}

template <class Dot>
void matmul_q8_arm64(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t size = sub_block_elements(t), subs = a.cols / size, chunks = a.cols / 32;
  // dx * (the sub-block's activation code sum), for sub-blocks with a minimum.
  const std::vector<float>& sums = size == 16 ? a.sum16 : a.sum32;
  each_row_sums<Dot>(t, w, a, row_begin, row_end, [&](int64_t r, int64_t k, int64_t s, int32_t isum, const DecodedRow& row) {
    float& o = out[k * rows + r];
    if (s == 0) o = 0;
    o += row.dl[s] * a.d[k * chunks + s * size / 32] * static_cast<float>(isum);
    if (row.m[s] != 0) o += row.m[s] * sums[k * subs + s];
  });
}

template <class Dot>
void q8_sums_arm64(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  const int64_t subs = a.cols / sub_block_elements(t);
  each_row_sums<Dot>(t, w, a, 0, rows,
                     [&](int64_t r, int64_t k, int64_t s, int32_t isum, const DecodedRow&) { sums[(k * rows + r) * subs + s] = isum; });
}

}  // namespace
}  // namespace sparq

// The entry points of kernels_arm64.h for one integer dot product: matmul_q8_<name>, q8_sums_<name>.
#define SPARQ_Q8_ARM64_ENTRY_POINTS(name, Dot)                                                                                            \
  namespace sparq {                                                                                                                       \
  void matmul_q8_##name(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) { \
    matmul_q8_arm64<Dot>(t, w, a, rows, out, row_begin, row_end);                                                                         \
  }                                                                                                                                       \
  void q8_sums_##name(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {                                    \
    q8_sums_arm64<Dot>(t, w, a, rows, sums);                                                                                              \
  }                                                                                                                                       \
  }
