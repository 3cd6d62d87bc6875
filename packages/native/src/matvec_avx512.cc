// AVX-512 kernels: matvec_simd.h and gemm_simd.h at 16 lanes.
#include "matvec.h"
#include "gemm_simd.h"
#include "int4.h"
#include "matvec_simd.h"

SPARQ_WEIGHT_PRODUCT_ENTRY_POINTS(avx512, Vec512)
