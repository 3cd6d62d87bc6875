// The basic ops' dispatchers run the kernel family of cpu.h's kernel_path().
#pragma once
#include <cstdint>

#include "cpu.h"
#include "quant.h"

namespace sparq {

// AVX-512 VNNI integer dot products are usable on the current path.
bool basic_vnni_enabled();

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

// matmul's integer prefill product (gemm_q8.h) runs for this weight type and n activation rows:
// n >= GEMM_MIN_N, AVX-512 VNNI on the current path, a type it handles, and not switched off
// (SPARQ_NATIVE_INT8_PREFILL=0, or force_int8_prefill(0); -1 restores the environment's choice).
bool int8_prefill_runs(WeightType t, int64_t n);
void force_int8_prefill(int on);
// matmul's integer per-row product (matvec_q8.h) runs: n < GEMM_MIN_N, a block type, the AVX2 path,
// and switched on (off by default; SPARQ_NATIVE_INT8_DECODE=1, or force_int8_decode(1) for the
// calling thread's products; -1 restores the environment's choice).
bool int8_decode_runs(WeightType t, int64_t n);
void force_int8_decode(int on);

}  // namespace sparq
