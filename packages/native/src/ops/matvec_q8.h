// The 'int8' product for block weights (ProductPath in core/backend.ts), per weight row: the
// scalar twin (matvec_q8_ref.cc), AVX2 and AVX-512 VNNI (matvec_q8_simd.h); gemm_q8.h is the
// AVX-512 VNNI and AVX2 product for many activation rows.
//
// The activation rows are quantized once per call into the activation blocks ggml pairs with the
// weight type (act_blocks below; docs/int8-products.md; the reference's activations-q8-*.ts), and
// the weights are read as block_codes.h's integer codes c, per sub-block s (16 elements for q2_k,
// q3_k, q6_k, 32 for the other types),
//   w_j = dl_s c_j + m_s.
// Then, with dx the step of the sub-block's activation block and xs its activation sum,
//   sum_j w_j x_j ~ sum_s dl_s dx (sum_j c_j q_j) + m_s xs_s,   xs_s = dx (sum_j q_j), or Q8_1's f16 sum,
// the integer sums exact in int32, the rest in f32 in any order. The only approximation is the
// activation's rounding (test/native/matmul.spec.ts derives the bound); the kernels differ from
// each other by f32 rounding only, and their integer sums (q8_sums_*) agree bit for bit.
#pragma once
#include <cstdint>
#include <vector>

#include "common/quant.h"

namespace sparq {

// The activation blocks ggml pairs with t (its vec_dot_type; block_traits.h describes them).
constexpr ActBlocks act_blocks(WeightType t) { return block_traits(t).act; }

// One activation row x (cols) for weights of type t (a block type), portable scalar code that
// every kernel path shares: codes q (cols), and per 32 elements the step dx of their activation
// block (q8_k's repeated 8 times), xs = dx * (their codes' sum) in f32 (q8_1: f16(d * sum), d
// the unrounded step), and the codes' integer sum.
void quantize_act_row(WeightType t, const float* x, int64_t cols, int8_t* q, float* dx, float* xs, int32_t* sum);

// Activation rows quantized for one weight type.
struct RowActs {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;        // (n, cols) codes
  std::vector<float> d;         // (n, cols / 32) steps dx of the 32 elements' activation block
  std::vector<float> sum16;     // (n, cols / 16): dx * (sum of 16 codes); types with a minimum only
  std::vector<float> sum32;     // (n, cols / 32): quantize_act_row's xs; types with a minimum only
  std::vector<int16_t> isum16;  // (n, cols / 16): sum of 16 codes; q2_k, q3_k, q6_k only (the SIMD kernels' minimums and offsets)
};

// Whether sub-blocks of t have a minimum m_s (block_codes.h): q4_1, q5_1 and the K-quants.
constexpr bool q8_has_min(WeightType t) { return block_traits(t).has_min; }

// The codes' offset that the x86 per-row kernels subtract in their integer sums (matvec_q8_simd.h's
// GroupActs; the other kernels take block_codes.h's signed codes).
constexpr int q8_bias(WeightType t) { return block_traits(t).bias; }
// The constant code offset of q3_k (4) and q6_k (32) (block_codes.h), which the SIMD kernels
// subtract once per super-block against RowActs::isum16, instead of as a minimum; 0 otherwise.
constexpr int q8_offset8(WeightType t) { return block_traits(t).offset8; }
// Types whose codes are stored signed (q8_0, iq4_*).
constexpr bool q8_signed(WeightType t) { return block_traits(t).signed_codes; }

// x (n, cols) -> a, for weights of type t (a block type). Portable scalar code, every kernel path's.
void quantize_row_acts(WeightType t, const float* x, int64_t n, int64_t cols, RowActs& a);

// out rows [row_begin, row_end) of x @ w^T (out (n, rows)) from the quantized activations, t a block type:
// the portable scalar twin, AVX2, and AVX-512 VNNI (needs avx512vnni and avx512vl).
// Tests: the int32 sums sum_j c_j q_j of every sub-block -> sums (n, rows, cols / sub_block_elements(t)),
// as each kernel computes them (gemm_q8_vnni_sums, gemm_q8_avx2_sums: the blocked products', gemm_q8_supports(t) only).
using Q8RowsFn = void (*)(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
using Q8SumsFn = void (*)(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums);
// The scalar twin takes every block type; the SIMD kernels (matvec_q8_simd.h) are one per block type,
// the kernel of type t at [t] (called with that t), null for f32, f16 and bf16.
void matmul_q8_ref(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
void q8_sums_ref(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums);
extern const PerWeightType<Q8RowsFn> matmul_q8_avx2, matmul_q8_avx512;
extern const PerWeightType<Q8SumsFn> q8_sums_avx2, q8_sums_avx512;
struct Q8Acts;
void gemm_q8_vnni_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums);
void gemm_q8_avx2_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums);

}  // namespace sparq
