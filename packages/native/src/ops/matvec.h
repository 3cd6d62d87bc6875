// Dense products with f32 activations: w (rows, cols) of f32 | f16 | bf16 |
// q4_0 | q4_1 | q8_0 @ x (n, cols)^T -> out (n, rows). Every kernel reads one
// row of w once for a tile of up to 4 rows of x, and works on a row range
// [row_begin, row_end) so callers can split the rows across threads.
#pragma once
#include <cstdint>

#include "common/quant.h"

namespace sparq {

// A per-row kernel: out rows [row_begin, row_end) of x (n, cols) @ w^T, w of type t.
using MatmulFn = void (*)(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out,
                          int64_t row_begin, int64_t row_end);
// The scalar one (every type), and the SIMD ones per weight type (matvec_simd.h; the kernel of type t
// at [t], called with that t).
void matmul_ref(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
                int64_t row_end);
extern const PerWeightType<MatmulFn> matmul_avx2;
extern const PerWeightType<MatmulFn> matmul_avx512;
// The cache-blocked product for many activation rows (gemm_simd.h), same contract.
void gemm_avx2(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
               int64_t row_end);
void gemm_avx512(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
                 int64_t row_end);
// Activation rows from which matmul takes the blocked product (below it the per-row kernels win).
constexpr int64_t GEMM_MIN_N = 8;
// Dispatch by kernel_path(), all rows, split across the native thread pool. int8 = true takes the
// 'int8' product (matvec_q8.h) for block types; f32, f16 and bf16 weights always take the f32 one.
// `packed`: w repacked by q8_repack, which the blocked 'int8' product then reads instead of decoding w.
void matmul(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, bool int8,
            const uint8_t* packed = nullptr);
// Bytes of w (rows, cols) repacked for the blocked 'int8' product on the current path (gemm_q8.h's
// packed panels), 0 if it does not repack type t; q8_repack fills them (split across the pool).
int64_t q8_packed_bytes(WeightType t, int64_t rows, int64_t cols);
void q8_repack(WeightType t, const uint8_t* w, int64_t rows, int64_t cols, uint8_t* packed);

}  // namespace sparq
