// The integer per-row product for block weights on AVX2 (matvec_q8_avx2.cc),
// used for decode-sized products (n < GEMM_MIN_N activation rows), where the
// f32 kernels spend more time unpacking codes to floats than reading memory.
//
// As in gemm_q8.h, the activation rows are quantized once per call to 8 bits
// per 32-element block (step dx = amax / 127, codes q = round(x / dx)), and the
// weights are read as small integer codes c with
//   w_j = dl_h c_j + mw_h,   c_j = u_j - off  (u the stored code, off a constant of the type)
// per 16-element half-block h (the K-quants q2_k, q3_k and q6_k scale halves of
// 32 separately; every other type has one dl and mw per 32). Then
//   sum_j w_j x_j ~ sum_h dl_h dx (sum_j c_j q_j) + mw_h (dx sum_j q_j),
// the integer sums exact in int32 (vpmaddubsw + vpmaddwd), the rest in f32. The
// only approximation is the activation's rounding, |x - dx q| <= dx / 2 per
// element (test/native/matmul.spec.ts derives the bound).
#pragma once
#include <cstdint>
#include <vector>

#include "quant.h"

namespace sparq {

// Activation rows quantized for one weight type.
struct RowActs {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;       // (n, cols) codes
  std::vector<float> d;        // (n, cols / 32) block steps dx
  std::vector<int32_t> bias;   // (n, cols / 4): -off * (sum of 4 consecutive codes); empty when off = 0
  std::vector<float> sum16;    // (n, cols / 16): dx * (sum of 16 codes); types with a minimum only
  std::vector<float> sum32;    // (n, cols / 32): dx * (sum of 32 codes); types with a minimum only
};

// x (n, cols) -> a, for weights of type t (a block type). Scalar, with the INT4 'int8' path's quantizer.
void quantize_row_acts_avx2(WeightType t, const float* x, int64_t n, int64_t cols, RowActs& a);
// out rows [row_begin, row_end) of x @ w^T (out (n, rows)) from the quantized activations. t a block type.
void matmul_q8_avx2(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);

}  // namespace sparq
