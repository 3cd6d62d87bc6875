// arm64 NEON attention kernels: attention_kernels.h's template at 4 lanes (arm64/simd_neon.h).
#include "kernels/simd.h"
#include "kernels/attention_kernels.h"

namespace sparq {
const AttnKernels& attn_kernels_neon() {
  static const AttnKernels table = make_kernels<Neon>("neon");
  return table;
}
}  // namespace sparq
