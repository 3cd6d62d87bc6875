// The basic ops' dispatchers: each picks the kernel family of kernel_path()
// and falls back to the scalar _ref twin where a family has no kernel.
#include "basic_dispatch.h"

#include "int4.h"
#include "matvec.h"
#include "quant.h"

namespace sparq {

bool basic_vnni_enabled() { return kernel_path() == KernelPath::avx512 && cpu_features().avx512vnni; }

void quantize_blocks(WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  if (kernel_path() == KernelPath::avx512) quantize_blocks_avx512(t, x, y, nblocks);
  else quantize_blocks_ref(t, x, y, nblocks);
}

void dequantize_blocks(WeightType t, const uint8_t* x, float* y, int64_t nblocks) {
  if (kernel_path() == KernelPath::avx512) dequantize_blocks_avx512(t, x, y, nblocks);
  else dequantize_blocks_ref(t, x, y, nblocks);
}

void matmul(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out) {
  switch (kernel_path()) {
    case KernelPath::avx512: return matmul_avx512(t, w, x, n, rows, cols, out, 0, rows);
    case KernelPath::avx2: return matmul_avx2(t, w, x, n, rows, cols, out, 0, rows);
    case KernelPath::scalar: return matmul_ref(t, w, x, n, rows, cols, out, 0, rows);
  }
}

void matmul_int4(const Int4View& w, const float* x, int64_t n, float* out, bool int8) {
  if (int8) {
    Int8Acts acts;
    quantize_acts(x, n, w.cols, w.group, acts);
    if (basic_vnni_enabled() && int4_vnni_supports(w.group, w.cols)) matmul_int4_int8_vnni(w, acts, out, 0, w.rows);
    else matmul_int4_int8_ref(w, acts, out, 0, w.rows);
    return;
  }
  switch (kernel_path()) {
    case KernelPath::avx512: return matmul_int4_dequant_avx512(w, x, n, out, 0, w.rows);
    case KernelPath::avx2: return matmul_int4_dequant_avx2(w, x, n, out, 0, w.rows);
    case KernelPath::scalar: return matmul_int4_dequant_ref(w, x, n, out, 0, w.rows);
  }
}

void int4_group_sums(const Int4View& w, const float* x, int64_t n, int32_t* sums) {
  Int8Acts acts;
  quantize_acts(x, n, w.cols, w.group, acts);
  if (basic_vnni_enabled() && int4_vnni_supports(w.group, w.cols)) int4_group_sums_vnni(w, acts, sums);
  else int4_group_sums_ref(w, acts, sums);
}

}  // namespace sparq
