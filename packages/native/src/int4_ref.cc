// Scalar group-wise INT4: quantization, dequantization and both product paths,
// in the reference's f32 arithmetic step by step (reference/ops/int4-*.ts), so
// bytes, scales, zeros, int32 sums and even the f32 products are identical.
#include <algorithm>
#include <cmath>

#include "int4.h"

namespace sparq {

namespace {

constexpr float MIN_SCALE = 1.17549435e-38f;  // 2^-126, the reference's floor on every scale

int clamp4(float v) { return static_cast<int>(std::min(7.0f, std::max(-8.0f, v))); }

}  // namespace

// f32 arithmetic step by step, as reference/ops/int4-groupwise.ts (its Math.fround after every
// operation is exactly one f32 operation here; this file is compiled without FMA contraction).
void quantize_int4_ref(const float* x, int64_t rows, int64_t cols, int64_t group, bool symmetric, uint8_t* packed, float* scales,
                       int8_t* zeros, int64_t row_begin, int64_t row_end) {
  const int64_t groups = cols / group;
  std::vector<int> q(static_cast<size_t>(group));
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * cols + g * group;
      float scale;
      int zero = 0;
      if (symmetric) {
        // scale = amax / 7, zero 0.
        float amax = 0;
        for (int64_t j = 0; j < group; ++j) amax = std::max(amax, std::fabs(xg[j]));
        scale = std::max(amax / 7.0f, MIN_SCALE);
      } else {
        // The range always includes 0, so 0 is on the grid; hi - lo in f64 cannot overflow.
        float lo = 0, hi = 0;
        for (int64_t j = 0; j < group; ++j) {
          lo = std::min(lo, xg[j]);
          hi = std::max(hi, xg[j]);
        }
        scale = std::max(static_cast<float>((static_cast<double>(hi) - static_cast<double>(lo)) / 15.0), MIN_SCALE);
        const float lo_steps = lo / scale;
        zero = clamp4(std::round(-8.0f - lo_steps));
      }
      scales[r * groups + g] = scale;
      zeros[r * groups + g] = static_cast<int8_t>(zero);
      for (int64_t j = 0; j < group; ++j) {
        const float steps = xg[j] / scale;
        q[j] = clamp4(std::round(steps) + static_cast<float>(zero));
      }
      uint8_t* dst = packed + (r * cols + g * group) / 2;
      for (int64_t j = 0; j < group; j += 2) dst[j / 2] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 1] & 0x0f) << 4));
    }
  }
}

void dequantize_int4_ref(const Int4View& w, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t groups = w.groups();
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t j = 0; j < w.cols; ++j) {
      const uint8_t b = w.packed[(r * w.cols + j) / 2];
      const int q = j % 2 == 0 ? nibble_lo(b) : nibble_hi(b);
      const int64_t g = r * groups + j / w.group;
      out[r * w.cols + j] = static_cast<float>(q - w.zeros[g]) * w.scales[g];
    }
  }
}

void quantize_acts(const float* x, int64_t n, int64_t cols, int64_t group, Int8Acts& a) {
  const int64_t groups = cols / group;
  a.n = n;
  a.cols = cols;
  a.group = group;
  a.q.assign(static_cast<size_t>(n * cols), 0);
  a.scale.assign(static_cast<size_t>(n * groups), 0.0f);
  a.qsum.assign(static_cast<size_t>(n * groups), 0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      // scale = amax / 127 (floored at 2^-126), q = roundf(x / scale) in [-127, 127].
      const float* xg = x + t * cols + g * group;
      float amax = 0;
      for (int64_t j = 0; j < group; ++j) amax = std::max(amax, std::fabs(xg[j]));
      const float scale = std::max(amax / 127.0f, MIN_SCALE);
      int32_t sum = 0;
      for (int64_t j = 0; j < group; ++j) {
        const float steps = xg[j] / scale;
        const int v = static_cast<int>(std::round(steps));
        a.q[t * cols + g * group + j] = static_cast<int8_t>(v);
        sum += v;
      }
      a.scale[t * groups + g] = scale;
      a.qsum[t * groups + g] = sum;
    }
  }
}

void matmul_int4_dequant_ref(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t groups = w.groups();
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t = 0; t < n; ++t) {
      // One f32 accumulator, left to right, like the reference's dotF32 (so the scalar path is bit-identical).
      float acc = 0;
      for (int64_t j = 0; j < w.cols; ++j) {
        const uint8_t b = w.packed[(r * w.cols + j) / 2];
        const int64_t g = r * groups + j / w.group;
        const float wv = static_cast<float>((j % 2 == 0 ? nibble_lo(b) : nibble_hi(b)) - w.zeros[g]) * w.scales[g];
        const float prod = wv * x[t * w.cols + j];
        acc += prod;
      }
      out[t * w.rows + r] = acc;
    }
  }
}

namespace {

int32_t group_sum_ref(const Int4View& w, const Int8Acts& a, int64_t r, int64_t t, int64_t g) {
  const int zero = w.zeros[r * w.groups() + g];
  int32_t sum = 0;
  for (int64_t j = g * w.group; j < (g + 1) * w.group; ++j) {
    const uint8_t b = w.packed[(r * w.cols + j) / 2];
    sum += ((j % 2 == 0 ? nibble_lo(b) : nibble_hi(b)) - zero) * a.q[t * w.cols + j];
  }
  return sum;
}

}  // namespace

void matmul_int4_int8_ref(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end) {
  const int64_t groups = w.groups();
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t = 0; t < a.n; ++t) {
      // Groups in order, in f32: acc + f32(isum) * (scale_w * scale_x), as the reference.
      float acc = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = w.scales[r * groups + g] * a.scale[t * groups + g];
        const float term = static_cast<float>(group_sum_ref(w, a, r, t, g)) * scale;
        acc += term;
      }
      out[t * w.rows + r] = acc;
    }
  }
}

void int4_group_sums_ref(const Int4View& w, const Int8Acts& a, int32_t* sums) {
  const int64_t groups = w.groups();
  for (int64_t t = 0; t < a.n; ++t)
    for (int64_t r = 0; r < w.rows; ++r)
      for (int64_t g = 0; g < groups; ++g) sums[(t * w.rows + r) * groups + g] = group_sum_ref(w, a, r, t, g);
}

}  // namespace sparq
