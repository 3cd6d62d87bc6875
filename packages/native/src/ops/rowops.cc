// rmsnorm and rope over many rows (a prefill's): rowops_ref.cc's kernels on ranges of rows run
// by the thread pool. A row's result depends on that row alone, so the split changes no bit.
#include <algorithm>

#include "common/threads.h"
#include "ops/rowops.h"

namespace sparq {
namespace {

// Runs body(first, count) over [0, n) in ranges of at most kRows rows, on the pool when the call
// has enough work (run_tasks).
constexpr int64_t kRows = 16;
template <class Body>
void over_rows(int64_t n, int64_t row_elements, Body body) {
  const size_t tasks = static_cast<size_t>((n + kRows - 1) / kRows);
  run_tasks(tasks, static_cast<double>(n) * static_cast<double>(row_elements), [&](size_t task) {
    const int64_t first = static_cast<int64_t>(task) * kRows;
    body(first, std::min(kRows, n - first));
  });
}

}  // namespace

void rmsnorm_rows(float* out, const float* x, const float* weight, int64_t n, int64_t dim, float eps) {
  over_rows(n, dim, [&](int64_t first, int64_t count) { rmsnorm_ref(out + first * dim, x + first * dim, weight, count, dim, eps); });
}

void rope_rows(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim, float theta, const float* freqs,
               float scale, bool halves) {
  const int64_t row = n_heads * head_dim;
  over_rows(n, row, [&](int64_t first, int64_t count) {
    rope_ref(x + first * row, positions + first, count, n_heads, head_dim, theta, freqs, scale, halves);
  });
}

}  // namespace sparq
