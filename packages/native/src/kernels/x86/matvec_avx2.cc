// AVX2 + FMA + F16C kernels: matvec_simd.h and gemm_simd.h at 8 lanes.
#include "ops/matvec.h"
#include "kernels/x86/gemm_simd.h"
#include "ops/int4.h"
#include "kernels/x86/matvec_simd.h"

SPARQ_WEIGHT_PRODUCT_ENTRY_POINTS(avx2, Avx2)
