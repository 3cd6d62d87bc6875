// AVX2 + FMA + F16C attention kernels (compiled with -mavx2 -mfma -mf16c).
#include "kernels/simd.h"
#include "kernels/attention_kernels.h"

namespace sparq {
const AttnKernels& attn_kernels_avx2() {
  static const AttnKernels table = make_kernels<Avx2>("avx2");
  return table;
}
}  // namespace sparq
