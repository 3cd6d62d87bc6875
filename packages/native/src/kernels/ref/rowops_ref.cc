// rmsnorm, rope, softmax and top-k: see rowops.h. Each f32 operation here is one
// Math.fround'ed operation of the reference (no FMA: this file is portable code);
// pow, cos, sin and exp are taken in f64 and rounded to f32, as the reference does.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/rowops.h"

namespace sparq {

void rmsnorm_ref(float* out, const float* x, const float* weight, int64_t n, int64_t dim, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* yr = out + t * dim;
    // Sum of squares in f32, left to right; then 1 / sqrt(mean + eps).
    float ss = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const float sq = xr[j] * xr[j];
      ss += sq;
    }
    ss = ss / static_cast<float>(dim) + eps;
    const float inv = 1.0f / std::sqrt(ss);
    for (int64_t j = 0; j < dim; ++j) {
      const float scaled = inv * xr[j];
      yr[j] = weight[j] * scaled;
    }
  }
}

void rope_ref(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim, float theta, const float* freqs,
              float scale, bool halves) {
  const int64_t half = head_dim / 2;
  // Pair i is elements (2i, 2i+1) of a head, or (i, i + half) with halves.
  const int64_t second = halves ? half : 1;
  // Pair i rotates by pos * freq_i, freq_i = theta^(-2i / head_dim) unless given; the same angle in every head.
  std::vector<float> freq(static_cast<size_t>(half));  // (half)
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    freq[i] = freqs != nullptr ? freqs[i] : 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float val = static_cast<float>(static_cast<double>(positions[t]) * static_cast<double>(freq[i]));
      // The scale multiplies the rounded cos and sin (exact when it is 1).
      const float fcr = static_cast<float>(std::cos(static_cast<double>(val))) * scale;
      const float fci = static_cast<float>(std::sin(static_cast<double>(val))) * scale;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim + (halves ? i : 2 * i);
        const float x0 = v[0], x1 = v[second];
        const float a = x0 * fcr, b = x1 * fci, c = x0 * fci, d = x1 * fcr;
        v[0] = a - b;
        v[second] = c + d;
      }
    }
  }
}

void softmax_ref(float* x, int64_t n, int64_t len) {
  for (int64_t t = 0; t < n; ++t) {
    float* v = x + t * len;
    // Max first (for numerical stability); a NaN propagates through exp and the sum.
    float max = v[0];
    for (int64_t j = 1; j < len; ++j)
      if (v[j] > max) max = v[j];
    float sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      const float shifted = v[j] - max;
      v[j] = static_cast<float>(std::exp(static_cast<double>(shifted)));
      sum += v[j];
    }
    for (int64_t j = 0; j < len; ++j) v[j] = v[j] / sum;
  }
}

void topk_ref(int32_t* out, const float* x, int64_t n, int64_t len, int64_t k) {
  std::vector<int32_t> order(static_cast<size_t>(len));
  for (int64_t t = 0; t < n; ++t) {
    const float* v = x + t * len;
    // A total order: NaN first, then larger first, then the lower index (0 and -0 are equal).
    const auto before = [v](int32_t a, int32_t b) {
      const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
      if (na != nb) return na;
      if (!na && v[a] != v[b]) return v[a] > v[b];
      return a < b;
    };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    std::copy(order.begin(), order.begin() + k, out + t * k);
  }
}

}  // namespace sparq
