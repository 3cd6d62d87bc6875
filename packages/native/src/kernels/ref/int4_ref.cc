// Scalar group-wise INT4: quantization, dequantization and both product paths,
// in the reference's f32 arithmetic step by step (reference/ops/int4-*.ts), so
// bytes, scales, zeros, int32 sums and even the f32 products are identical.
#include <algorithm>
#include <cmath>

#include "ops/int4.h"

namespace sparq {

namespace {

constexpr float MIN_SCALE = QUANT_MIN_SCALE;

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

float quantize_int8_group(const float* x, int64_t len, int8_t* q, int32_t& sum) {
  // scale = amax / 127 (floored at 2^-126), q = roundf(x / scale) in [-127, 127]. Both loops are
  // branch-free so the compiler vectorizes them (the prefill products quantize every activation
  // row per call): amax in LANES running maxima (the maximum does not depend on the order).
  constexpr int LANES = 8;
  float lane_max[LANES] = {};
  int64_t j = 0;
  for (; j + LANES <= len; j += LANES) {
    for (int l = 0; l < LANES; ++l) lane_max[l] = std::max(lane_max[l], std::fabs(x[j + l]));
  }
  float amax = 0;
  for (; j < len; ++j) amax = std::max(amax, std::fabs(x[j]));
  for (float m : lane_max) amax = std::max(amax, m);
  const float scale = std::max(amax / 127.0f, MIN_SCALE);
  int32_t total = 0;
  for (j = 0; j < len; ++j) {
    // roundf(steps) (halves away from zero) without a libm call: |steps| <= 127.5, so the
    // truncation and the fraction steps - trunc are exact.
    const float steps = x[j] / scale;
    const int v = static_cast<int>(steps);
    const float frac = steps - static_cast<float>(v);
    const int r = v + (frac >= 0.5f) - (frac <= -0.5f);
    q[j] = static_cast<int8_t>(r);
    total += r;
  }
  sum = total;
  return scale;
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
      int32_t sum = 0;
      const float scale = quantize_int8_group(x + t * cols + g * group, group, a.q.data() + t * cols + g * group, sum);
      a.scale[t * groups + g] = scale;
      a.qsum[t * groups + g] = sum;
    }
  }
  const int64_t half = a.half(), lanes = a.lanes();
  a.even.resize(static_cast<size_t>(n * half));
  a.odd.resize(a.even.size());
  a.lane_sum.assign(static_cast<size_t>(n * lanes), 0);
  a.lane_bias.resize(a.lane_sum.size());
  a.lane_scale.resize(a.lane_sum.size());
  for (int64_t t = 0; t < n; ++t) {
    const int8_t* q = a.q.data() + t * cols;
    for (int64_t j = 0; j < half; ++j) {
      a.even[t * half + j] = q[2 * j];
      a.odd[t * half + j] = q[2 * j + 1];
    }
    for (int64_t l = 0; l < lanes; ++l) {
      for (int e = 0; e < 8; ++e) a.lane_sum[t * lanes + l] += q[8 * l + e];
      a.lane_bias[t * lanes + l] = -8 * a.lane_sum[t * lanes + l];
      a.lane_scale[t * lanes + l] = a.scale[t * groups + 8 * l / group];
    }
  }
}

float int4_int8_tail(const Int4View& w, const Int8Acts& a, int64_t r, int64_t t, int64_t from) {
  const int64_t groups = w.groups();
  float res = 0;
  for (int64_t g = from / w.group; g < groups; ++g) {
    int32_t isum = 0;
    for (int64_t j = std::max(from, g * w.group); j < (g + 1) * w.group; ++j) {
      const uint8_t b = w.packed[(r * w.cols + j) / 2];
      isum += ((j % 2 == 0 ? nibble_lo(b) : nibble_hi(b)) - w.zeros[r * groups + g]) * a.q[t * w.cols + j];
    }
    res += static_cast<float>(isum) * (w.scales[r * groups + g] * a.scale[t * groups + g]);
  }
  return res;
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
