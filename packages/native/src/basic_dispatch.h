// The basic ops' dispatchers run the kernel family of cpu.h's kernel_path().
#pragma once
#include "cpu.h"

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

}  // namespace sparq
