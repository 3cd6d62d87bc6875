// Exact top-m selection of SparQ and the baselines: not a sort, and each score is
// touched once with SIMD in the common case.
//   1. Estimate a threshold t below the m-th largest score from a strided sample
//      (its rank in the sample is padded by three standard deviations).
//   2. One SIMD pass keeps the indices with x >= t (filter_ge), ascending.
//   3. If that kept at least m (and not too many), the m best are among them:
//      every score left out is < t <= the m-th largest. The m-th value T is found
//      with nth_element on the few candidates; all scores > T are taken, and the
//      scores == T by lowest index (SPEC 2's tie rule), so the set is exact.
//   4. Otherwise the threshold is moved and the pass repeated; after a few tries
//      (e.g. long runs of equal scores) step 3 runs on all n scores.
// NaN ranks below every number (as -inf), ties among NaN again by lowest index.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "attention.h"

namespace sparq {
namespace {

struct SelectScratch {
  std::vector<float> vals, sample;
  std::vector<int32_t> cand;
};

inline float rank_key(float v) { return std::isnan(v) ? -INFINITY : v; }

// The m best of the candidates idx[0..c) (ascending) of x, into out (ascending, plus base).
void select_among(const float* x, const int32_t* idx, size_t c, size_t m, int32_t base, int32_t* out,
                  std::vector<float>& vals) {
  vals.resize(c);
  for (size_t i = 0; i < c; i++) vals[i] = rank_key(x[idx ? idx[i] : static_cast<int32_t>(i)]);
  std::nth_element(vals.begin(), vals.begin() + (m - 1), vals.end(), std::greater<float>());
  const float t = vals[m - 1];  // the m-th largest key
  size_t above = 0;
  for (size_t i = 0; i < c; i++) above += rank_key(x[idx ? idx[i] : static_cast<int32_t>(i)]) > t;
  size_t ties = m - above;  // how many keys equal to t to take, lowest index first
  size_t o = 0;
  for (size_t i = 0; i < c && o < m; i++) {
    const int32_t j = idx ? idx[i] : static_cast<int32_t>(i);
    const float v = rank_key(x[j]);
    if (v > t || (v == t && ties > 0 && (ties--, true))) out[o++] = base + j;
  }
}

}  // namespace

void topk_select(const AttnKernels& kt, const float* x, size_t n, size_t m, int32_t base, int32_t* out) {
  if (m == 0) return;
  if (m >= n) {
    for (size_t j = 0; j < n; j++) out[j] = base + static_cast<int32_t>(j);
    return;
  }
  thread_local SelectScratch s;
  constexpr size_t kSample = 512;
  // Small rows, or m a large share of n: the candidates would be most of the row anyway.
  if (n <= 4 * kSample || m * 16 > n) {
    select_among(x, nullptr, n, m, base, out, s.vals);
    return;
  }
  // Strided sample, sorted descending by nth_element at the padded rank.
  const size_t step = n / kSample;
  s.sample.resize(kSample);
  for (size_t i = 0; i < kSample; i++) s.sample[i] = rank_key(x[i * step + step / 2]);
  const double expect = static_cast<double>(m) * kSample / n;
  size_t rank = static_cast<size_t>(expect + 3.0 * std::sqrt(expect) + 4.0);
  const size_t cap = std::min(n, 8 * m + 512);
  s.cand.resize(cap + 1);
  for (int attempt = 0; attempt < 4 && rank < kSample; attempt++) {
    std::nth_element(s.sample.begin(), s.sample.begin() + rank, s.sample.end(), std::greater<float>());
    const float t = s.sample[rank];
    const size_t c = kt.filter_ge(x, n, t, s.cand.data(), cap, 0);
    if (c > cap) {
      rank = rank / 2;  // too many kept: raise the threshold
      if (rank * 2 < expect) break;
    } else if (c < m) {
      rank = rank * 2 + 1;  // too few: lower it
    } else {
      select_among(x, s.cand.data(), c, m, base, out, s.vals);
      return;
    }
  }
  select_among(x, nullptr, n, m, base, out, s.vals);
}

}  // namespace sparq
