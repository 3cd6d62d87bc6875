// The basic ops' dispatchers run the kernels of kernel_table.h's kernel_table().
#pragma once
#include <cstdint>

#include "common/cpu.h"
#include "common/quant.h"

namespace sparq {

// AMX tiles can run here: the CPU has AMX-TILE and AMX-INT8 and Linux granted
// tile permission (cpu.cc), and the kernel path is avx512 (forcing a narrower
// path for comparisons turns AMX off too).
bool amx_int8_available();
// AMX runs matmulInt4 'int8': available and opted in, by SPARQ_NATIVE_AMX=1 or
// force_amx(true). Off by default.
bool amx_int8_enabled();
// Tests and benchmarks: force_amx(1 | 0) turns the opt-in on or off, -1 restores the
// environment's choice. Forcing it on never bypasses amx_int8_available().
void force_amx(int on);

// The activation rows n from which the 'int8' product of block type t takes the blocked kernel on the
// current path: gemm_q8_min_n's measured crossover, over the weights repacked at load if `packed`
// and the path repacks t (q8_packed_bytes), else over the file's layout; or the n forced by
// force_q8_gemm_min_n.
int64_t q8_gemm_min_n(WeightType t, bool packed);
// Tests and benchmarks: every block type takes the blocked kernels from n rows on (n > 0), or the
// measured crossovers again (n = 0). Lets the tests reach the blocked kernels with small products.
void force_q8_gemm_min_n(int64_t n);

// The kernels matmul's 'int8' product of block weights can run (basic_dispatch.cc's q8_route).
enum class Q8Route { rows, blocked, packed };
// Tests: how many of matmul's 'int8' products of block weights took each Q8Route since the addon
// loaded, indexed by the route (a relaxed counter per route; nothing else reads them).
void q8_routes(uint64_t counts[3]);

// Tests: the int32 sums sum_j c_j q_j of every sub-block of the 'int8' product for block weights
// (matvec_q8.h) -> sums (n, rows, cols / sub_block_elements(t)), from the kernel matmul runs for t and
// n on the current path; returns its name: "ref" (the scalar twin), "avx2", "avx2-gemm" (AVX2 blocked), "avx512" (VNNI per row)
// or "vnni" (VNNI blocked); with `packed`, for a type the path repacks (q8_packed_bytes), the blocked
// kernels over the repacked weights, "avx2-packed" or "vnni-packed".
const char* q8_block_sums(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, int32_t* sums,
                          bool packed);

}  // namespace sparq
