// AVX2 + FMA + F16C kernels: matvec_simd.h at 8 lanes.
#include "matvec.h"
#include "matvec_simd.h"

SPARQ_MATVEC_ENTRY_POINTS(avx2, Vec256)
