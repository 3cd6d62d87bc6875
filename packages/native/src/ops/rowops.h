// Row-wise ops: rmsnorm, rope, softmax, top-k. Scalar only, on purpose: they mirror
// the reference's f32 arithmetic operation by operation (llama2.c's run.c), because
// the end-to-end test compares generated text byte for byte, and they are a
// negligible part of a decode step's time. A prefill's hundreds of rows are split
// over the thread pool (rmsnorm_rows, rope_rows: each row's arithmetic unchanged).
#pragma once
#include <cstdint>

namespace sparq {

// x, out (n, dim); weight (dim). out may be x.
void rmsnorm_ref(float* out, const float* x, const float* weight, int64_t n, int64_t dim, float eps);
// x (n, n_heads, head_dim) in place; positions (n).
// freqs (head_dim / 2) replaces theta^(-2i / head_dim) when not null; scale multiplies cos and sin;
// halves pairs (i, i + head_dim / 2) instead of (2i, 2i + 1).
void rope_ref(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim, float theta, const float* freqs,
              float scale, bool halves);
// The same over row ranges on the thread pool (rowops.cc).
void rmsnorm_rows(float* out, const float* x, const float* weight, int64_t n, int64_t dim, float eps);
void rope_rows(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim, float theta, const float* freqs,
               float scale, bool halves);
// Each row of x (n, len) in place.
void softmax_ref(float* x, int64_t n, int64_t len);
// out (n, k): indices of the k largest of each row of x (n, len); NaN first, ties to the lowest index.
void topk_ref(int32_t* out, const float* x, int64_t n, int64_t len, int64_t k);

}  // namespace sparq
