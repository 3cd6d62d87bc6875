// The 'int8' product for block weights of matvec_q8.h, portable and scalar: the activation
// quantizer every kernel path shares, and the scalar twin the SIMD kernels are tested against
// (their integer sums bit for bit, their outputs within f32 rounding).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/block_codes.h"
#include "common/half.h"
#include "ops/int4.h"
#include "ops/matvec_q8.h"

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

// max |x_j| over n elements, n a multiple of 8 (x finite: core rejects NaN and infinities before
// any product). Eight running maxima, so the compiler keeps them in vector lanes; max is exact,
// so the order does not matter.
static inline float abs_max(const float* x, int64_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < n; j += 8)
    for (int k = 0; k < 8; ++k) m[k] = m[k] > std::fabs(x[j + k]) ? m[k] : std::fabs(x[j + k]);
  float amax = 0;
  for (int k = 0; k < 8; ++k) amax = amax > m[k] ? amax : m[k];
  return amax;
}

// ggml's codes of x[0 .. n) times mul (n a multiple of 32) into q, halves to even (its vroundps
// and nearest_int), and their sums per 32 elements into sum. |x_j mul| <= 127 (1 + 2^-23) for
// a finite mul (127 / amax, or -127 / max), so the codes need no clamp. When mul overflowed to
// infinity (amax below 127 / FLT_MAX), the block's step rounds to 0 and every product with it
// is 0 whatever its codes: we write 0 (ggml's conversion writes -128 or 0).
static inline void act_codes(const float* x, int64_t n, float mul, int8_t* q, int32_t* sum) {
  if (!(std::fabs(mul) <= 3.0e38f)) mul = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      // Adding 1.5 * 2^23 leaves no bits below 1: the addition itself rounds to nearest even.
      const int c = static_cast<int>((x[32 * i + j] * mul + 12582912.0f) - 12582912.0f);
      q[32 * i + j] = static_cast<int8_t>(c);
      s += c;
    }
    sum[i] = s;
  }
}

void quantize_act_row(WeightType t, const float* x, int64_t cols, int8_t* q, float* dx, float* xs, int32_t* sum) {
  const ActBlocks kind = act_blocks(t);
  if (kind == ActBlocks::q8_k) {
    for (int64_t b = 0; b < cols; b += 256) {
      // The signed value of largest magnitude: the first element whose |x| is the maximum.
      const float amax = abs_max(x + b, 256);
      float max = 0;
      for (int64_t j = b; j < b + 256 && amax != 0; ++j)
        if (std::fabs(x[j]) == amax) {
          max = x[j];
          break;
        }
      const float scale = max != 0 ? -127.0f / max : 0.0f;
      const float d = max != 0 ? 1.0f / scale : 0.0f;
      act_codes(x + b, 256, scale, q + b, sum + b / 32);
      for (int64_t i = b / 32; i < (b + 256) / 32; ++i) {
        dx[i] = d;
        xs[i] = d * static_cast<float>(sum[i]);
      }
    }
    return;
  }
  for (int64_t i = 0; i < cols / 32; ++i) {
    const float amax = abs_max(x + 32 * i, 32);
    const float d = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
    act_codes(x + 32 * i, 32, id, q + 32 * i, sum + i);
    dx[i] = fp16_to_fp32_ref(fp32_to_fp16_ref(d));
    xs[i] =
        kind == ActBlocks::q8_1 ? fp16_to_fp32_ref(fp32_to_fp16_ref(d * static_cast<float>(sum[i]))) : dx[i] * static_cast<float>(sum[i]);
  }
}

void quantize_row_acts(WeightType t, const float* x, int64_t n, int64_t cols, RowActs& a) {
  const int64_t chunks = cols / 32;
  const bool min = q8_has_min(t);
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * chunks));
  a.sum16.resize(min ? static_cast<size_t>(n * cols / 16) : 0);
  a.sum32.resize(static_cast<size_t>(n * chunks));
  a.isum16.resize(sub_block_elements(t) == 16 ? static_cast<size_t>(n * cols / 16) : 0);
  std::vector<int32_t> sums(static_cast<size_t>(chunks));
  for (int64_t r = 0; r < n; ++r)
    quantize_act_row(t, x + r * cols, cols, a.q.data() + r * cols, a.d.data() + r * chunks, a.sum32.data() + r * chunks, sums.data());
  if (!min) a.sum32.clear();
  for (int64_t i = 0; i < n * chunks; ++i) {
    const int8_t* q = a.q.data() + 32 * i;
    const float dx = a.d[i];
    if (min) {
      int32_t first = 0, sum = 0;
      for (int j = 0; j < 16; ++j) first += q[j];
      for (int j = 0; j < 32; ++j) sum += q[j];
      a.sum16[2 * i] = dx * static_cast<float>(first);
      a.sum16[2 * i + 1] = dx * static_cast<float>(sum - first);
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
  each_sub_sum(t, w, a, 0, rows,
               [&](int64_t r, int64_t s, int64_t k, int32_t isum, float, float) { sums[(k * rows + r) * subs + s] = isum; });
}

}  // namespace sparq
