// The 'int8' product for block weights of matvec_q8.h, portable and scalar: the activation
// quantizer every kernel path shares, and the scalar twin the SIMD kernels are tested against
// (their integer sums bit for bit, their outputs within f32 rounding).
#include <vector>

#include "block_codes.h"
#include "int4.h"
#include "matvec_q8.h"

namespace sparq {
namespace {

// Calls fn(r, s, k, isum, dl, m) for weight rows [row_begin, row_end), each of their sub-blocks s
// and every activation row k: isum = sum_j c_j q_j over the sub-block, dl and m its scale and minimum.
template <class Fn>
void each_sub_sum(WeightType t, const uint8_t* w, const RowActs& a, int64_t row_begin, int64_t row_end, Fn fn) {
  const int64_t size = sub_block_elements(t), subs = a.cols / size, row_bytes = weight_bytes(t, a.cols);
  int8_t c[32];
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t s = 0; s < subs; ++s) {
      float dl, m;
      sub_block_codes(t, w + r * row_bytes, s, c, dl, m);
      for (int64_t k = 0; k < a.n; ++k) {
        const int8_t* q = a.q.data() + k * a.cols + s * size;
        int32_t isum = 0;
        for (int64_t j = 0; j < size; ++j) isum += c[j] * q[j];
        fn(r, s, k, isum, dl, m);
      }
    }
  }
}

}  // namespace

void quantize_row_acts(WeightType t, const float* x, int64_t n, int64_t cols, RowActs& a) {
  const int64_t chunks = cols / 32;
  const int bias = q8_act_bias(t);
  const bool min = q8_has_min(t);
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * chunks));
  a.bias.resize(bias ? static_cast<size_t>(n * cols / 4) : 0);
  a.sum16.resize(min ? static_cast<size_t>(n * cols / 16) : 0);
  a.sum32.resize(min ? static_cast<size_t>(n * chunks) : 0);
  a.isum16.resize(sub_block_elements(t) == 16 ? static_cast<size_t>(n * cols / 16) : 0);
  const int offset8 = q8_offset8(t);
  a.bias8.resize(offset8 ? static_cast<size_t>(n * cols / 8) : 0);
  for (int64_t i = 0; i < n * chunks; ++i) {
    int32_t sum = 0;
    const int8_t* q = a.q.data() + 32 * i;
    const float dx = quantize_int8_group(x + 32 * i, 32, a.q.data() + 32 * i, sum);
    a.d[i] = dx;
    for (int j = 0; j < 32 && bias; j += 4) a.bias[8 * i + j / 4] = -bias * (q[j] + q[j + 1] + q[j + 2] + q[j + 3]);
    // Octet o of chunk i (4 per chunk, 4 chunks per 128 elements): lane 2 (i % 4) + o % 2 of the
    // 128 elements' first 8 (o < 2) or last 8 (matvec_q8_simd.h's group_sums).
    for (int o = 0; o < 4 && offset8; ++o) {
      int32_t octet = 0;
      for (int j = 8 * o; j < 8 * o + 8; ++j) octet += q[j];
      a.bias8[16 * (i / 4) + 8 * (o / 2) + 2 * (i % 4) + o % 2] = static_cast<int16_t>(-offset8 * octet);
    }
    if (min) {
      int32_t first = 0;
      for (int j = 0; j < 16; ++j) first += q[j];
      a.sum16[2 * i] = dx * static_cast<float>(first);
      a.sum16[2 * i + 1] = dx * static_cast<float>(sum - first);
      a.sum32[i] = dx * static_cast<float>(sum);
      if (!a.isum16.empty()) {
        a.isum16[2 * i] = static_cast<int16_t>(first);
        a.isum16[2 * i + 1] = static_cast<int16_t>(sum - first);
      }
    }
  }
}

void matmul_q8_ref(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t size = sub_block_elements(t);
  // dx * (the sub-block's activation code sum): sum16 or sum32 (RowActs), one per sub-block.
  const std::vector<float>& sums = size == 16 ? a.sum16 : a.sum32;
  const int64_t subs = a.cols / size;
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t k = 0; k < a.n; ++k) out[k * rows + r] = 0;
  each_sub_sum(t, w, a, row_begin, row_end, [&](int64_t r, int64_t s, int64_t k, int32_t isum, float dl, float m) {
    float& o = out[k * rows + r];
    o += dl * a.d[k * (a.cols / 32) + s * size / 32] * static_cast<float>(isum);
    if (m != 0) o += m * sums[k * subs + s];
  });
}

void q8_sums_ref(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums) {
  const int64_t subs = a.cols / sub_block_elements(t);
  each_sub_sum(t, w, a, 0, rows, [&](int64_t r, int64_t s, int64_t k, int32_t isum, float, float) { sums[(k * rows + r) * subs + s] = isum; });
}

}  // namespace sparq
