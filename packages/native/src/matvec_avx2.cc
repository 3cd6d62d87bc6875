// AVX2 + FMA + F16C kernels: matvec_simd.h and gemm_simd.h at 8 lanes.
#include "matvec.h"
#include "gemm_simd.h"
#include "int4.h"
#include "matvec_simd.h"

SPARQ_WEIGHT_PRODUCT_ENTRY_POINTS(avx2, Vec256)
