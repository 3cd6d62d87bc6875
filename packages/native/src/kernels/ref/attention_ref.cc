// Scalar attention kernels: the always-compiled reference twin of the SIMD paths
// (the same templates with a one-lane vector type).
#include "kernels/simd.h"
#include "kernels/attention_kernels.h"

namespace sparq {
const AttnKernels& attn_kernels_ref() {
  static const AttnKernels table = make_kernels<Scalar>("scalar");
  return table;
}
}  // namespace sparq
