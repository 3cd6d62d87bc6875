// The integer per-row product of matvec_q8.h with AVX2 (matvec_q8_simd.h: vpmaddubsw + vpmaddwd).
#include "kernels/x86/matvec_q8_simd.h"

SPARQ_Q8_ENTRY_POINTS(avx2)
