// The integer per-row product of matvec_q8.h with AVX-512 VNNI (matvec_q8_simd.h: vpdpbusd on
// 256-bit vectors, AVX512VL).
#include "kernels/x86/intrinsics.h"

#include "kernels/x86/matvec_q8_simd.h"

SPARQ_Q8_ENTRY_POINTS(avx512)
