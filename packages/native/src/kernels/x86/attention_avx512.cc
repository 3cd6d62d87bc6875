// AVX-512 (F, BW, VL, DQ) attention kernels: masked tails, vgather for the
// single-k layout, vscalefps in exp.
#include "kernels/simd.h"
#include "kernels/attention_kernels.h"

namespace sparq {
const AttnKernels& attn_kernels_avx512() {
  static const AttnKernels table = make_kernels<Avx512>("avx512");
  return table;
}
}  // namespace sparq
