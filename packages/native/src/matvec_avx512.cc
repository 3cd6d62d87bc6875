// AVX-512 kernels: matvec_simd.h at 16 lanes.
#include "matvec.h"
#include "matvec_simd.h"

SPARQ_MATVEC_ENTRY_POINTS(avx512, Vec512)
