// Exact top-m selection of SparQ and the baselines: not a sort, and each score is
// touched once with SIMD in the common case.
//   1. Estimate a threshold t below the m-th largest score from a strided sample
//      (its rank in the sample is padded by three standard deviations), for any m:
//      SparQ's realistic budgets are k = S/8 and S/16.
//   2. One SIMD pass keeps the indices with x >= t (filter_ge), ascending.
//   3. If that kept at least m (and not too many), the m best are among them:
//      every score left out is < t <= the m-th largest. The m-th value T is found
//      by radix selection (kth_largest) on the candidates below a second, higher sample threshold
//      (those above it are surely in); all scores > T are taken, and the
//      scores == T by lowest index (spec.md §2's tie rule), so the set is exact.
//   4. Otherwise the threshold is moved and the pass repeated; after a few tries
//      (e.g. long runs of equal scores) step 3 runs on all n scores.
// NaN ranks below every number (as -inf), ties among NaN again by lowest index.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/attention.h"

namespace sparq {
namespace {

struct SelectScratch {
  std::vector<float> vals, sample;
  std::vector<int32_t> cand, picked;
  std::vector<uint32_t> bits, hist;
};

inline float rank_key(float v) { return std::isnan(v) ? -INFINITY : v; }

// Order-preserving bits of a float that is not NaN: a < b exactly when bits(a) < bits(b)
// (with -0 just below +0, which compare equal as floats: either is a correct k-th value).
inline uint32_t order_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
inline float from_order_bits(uint32_t u) {
  const uint32_t b = u & 0x80000000u ? u & 0x7fffffffu : ~u;
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// The key of rank k (0 = the largest) among x[0..n) (no NaN; k < n). Radix selection on
// order_bits: a histogram of at most 2^kBinBits bins spanning the keys' range, the bin holding
// rank k kept, repeated within it until one value is left. Linear, with no branch per key that
// depends on the data: nth_element's comparisons mispredict on random keys (perf, SparQ at
// S = 32k, k = S/8: nth_element was about half of the selection's time).
constexpr int kBinBits = 11;
float kth_largest(const float* x, size_t n, size_t k, std::vector<uint32_t>& bits, std::vector<uint32_t>& hist) {
  bits.resize(n);
  uint32_t lo = UINT32_MAX, hi = 0;
  for (size_t i = 0; i < n; i++) {
    const uint32_t u = order_bits(x[i]);
    bits[i] = u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  size_t m = n;  // bits[0..m): the keys still in play, all in [lo, hi]; rank k among them
  while (lo < hi) {
    const int shift = std::max(0, 32 - __builtin_clz(hi - lo) - kBinBits);
    const size_t bins = static_cast<size_t>((hi - lo) >> shift) + 1;
    hist.assign(bins, 0);
    for (size_t i = 0; i < m; i++) hist[(bits[i] - lo) >> shift]++;
    size_t b = bins - 1;  // from the top bin down to the one holding rank k
    for (; hist[b] <= k; b--) k -= hist[b];
    const uint32_t from = lo;
    size_t kept = 0;
    lo = UINT32_MAX;
    hi = 0;
    for (size_t i = 0; i < m; i++) {
      const uint32_t u = bits[i];
      const bool in = ((u - from) >> shift) == b;
      bits[kept] = u;
      kept += in;
      lo = in ? std::min(lo, u) : lo;
      hi = in ? std::max(hi, u) : hi;
    }
    m = kept;
  }
  return from_order_bits(lo);
}

// The m best of the candidates idx[0..c) (ascending; all of x[0..c) when idx is null) of the row
// x[0..n), into out (ascending, plus base). Every key of the row above the candidates' threshold
// is a candidate. Keys >= hi (NaN: none) are among the m best as soon as fewer than m
// of them exist: the m-th largest key T is then below hi. They are only counted, and T is
// found among the other candidates alone.
void select_among(const AttnKernels& kt, const float* x, size_t n, const int32_t* idx, size_t c, size_t m, float hi, int32_t base,
                  int32_t* out, SelectScratch& s) {
  std::vector<float>& vals = s.vals;
  auto key = [&](size_t i) { return rank_key(x[idx ? idx[i] : static_cast<int32_t>(i)]); };
  // Branch-free splits and picks below: whether a candidate is in is data-dependent, unpredictable.
  vals.resize(c);
  size_t sure = 0, rest = 0;
  for (size_t i = 0; i < c; i++) {
    const float v = key(i);
    const bool in = v >= hi;
    sure += in;
    vals[rest] = v;
    rest += !in;
  }
  vals.resize(rest);
  if (sure >= m) {  // hi was not above the m-th largest: rank every candidate
    select_among(kt, x, n, idx, c, m, NAN, base, out, s);
    return;
  }
  const size_t need = m - sure;
  const float t = kth_largest(vals.data(), rest, need - 1, s.bits, s.hist);  // the m-th largest key
  // Keys > t: the sure ones and those of the rest; and the keys equal to t.
  size_t above = sure, equal = 0;
  for (size_t i = 0; i < rest; i++) {
    above += vals[i] > t;
    equal += vals[i] == t;
  }
  // Usually no tie is cut (one key equals t): the m best are then exactly the x[j] >= t of the
  // row, which one SIMD pass collects in order. Not for t = -inf: NaN keys rank as -inf but fail x >= t.
  if (above + equal == m && t > -INFINITY) {
    s.picked.resize(m + kFilterSlack);
    if (kt.filter_ge(x, n, t, s.picked.data(), m, base) == m) {
      std::copy(s.picked.begin(), s.picked.begin() + m, out);
      return;
    }
  }
  size_t ties = m - above;  // how many keys equal to t to take, lowest index first
  size_t o = 0;
  for (size_t i = 0; i < c && o < m; i++) {
    const float v = key(i);
    const bool tie = v == t && ties > 0;
    ties -= tie;
    out[o] = base + (idx ? idx[i] : static_cast<int32_t>(i));
    o += v > t || tie;
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
  constexpr size_t kSample = 1024;
  if (n <= 4 * kSample) {  // small rows: the candidates would be most of the row anyway
    select_among(kt, x, n, nullptr, n, m, NAN, base, out, s);
    return;
  }
  // Strided sample; thresholds are its keys of given ranks (kth_largest).
  const size_t step = n / kSample;
  s.sample.resize(kSample);
  for (size_t i = 0; i < kSample; i++) s.sample[i] = rank_key(x[i * step + step / 2]);
  // The m-th largest of x sits near rank expect = m kSample / n of the sample, give or take the
  // binomial spread sd = sqrt(expect (1 - m / n)); a threshold at rank expect + 3 sd keeps at least
  // m of x with high probability (and about m + 3 sd n / kSample: few more than needed).
  const double share = static_cast<double>(m) / static_cast<double>(n);
  const double expect = share * kSample, pad = 3.0 * std::sqrt(expect * (1.0 - share)) + 4.0;
  double rank = expect + pad;
  for (int attempt = 0; attempt < 4 && rank < kSample; attempt++) {
    const size_t at = static_cast<size_t>(rank);
    const float t = kth_largest(s.sample.data(), kSample, at, s.bits, s.hist);
    // Room for twice the expected count: more means long runs of equal scores at t.
    const size_t cap = std::min(n, static_cast<size_t>(2.0 * (rank + 1) * static_cast<double>(n) / kSample) + 512);
    s.cand.resize(cap + kFilterSlack);
    const size_t c = kt.filter_ge(x, n, t, s.cand.data(), cap, 0);
    if (c > cap) {
      if (rank <= expect) break;
      rank = expect + (rank - expect) / 2;  // too many kept: raise the threshold
    } else if (c < m) {
      rank += 2 * pad;  // too few (an unlucky sample): lower it
    } else {
      // An upper threshold from the sample, 2 pad ranks above t: the candidates at or above it
      // (most of them) are surely among the m best and skip the exact selection.
      const size_t hi_at = static_cast<size_t>(std::max(0.0, rank - 2 * pad));
      float hi = NAN;
      if (hi_at > 0 && hi_at < at) hi = kth_largest(s.sample.data(), kSample, hi_at, s.bits, s.hist);
      select_among(kt, x, n, s.cand.data(), c, m, hi, base, out, s);
      return;
    }
  }
  select_among(kt, x, n, nullptr, n, m, NAN, base, out, s);
}

}  // namespace sparq
