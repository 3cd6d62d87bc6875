// The arm64 kernel entry points (arm64 builds only), behind the same dispatch as the x86 ones
// (basic_dispatch.cc): the f32-activation product (matvec.h's contract) with NEON, and the 'int8'
// product of block weights (matvec_q8.h's contract) with plain NEON and with the dot-product
// instructions (SDOT, Armv8.2 DotProd; the CPU is asked first: cpu_features().dotprod).
#pragma once
#include <cstdint>

#include "common/quant.h"
#include "ops/matvec.h"
#include "ops/matvec_q8.h"

namespace sparq {

extern const PerWeightType<MatmulFn> matmul_neon;
void matmul_q8_neon(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
void matmul_q8_dotprod(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
void q8_sums_neon(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums);
void q8_sums_dotprod(WeightType t, const uint8_t* w, const RowActs& a, int64_t rows, int32_t* sums);

}  // namespace sparq
