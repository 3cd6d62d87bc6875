// The 'int8' product of block weights with plain NEON (every arm64 CPU): matvec_q8_neon.h over
// 8 x 8-bit products widened into 16-bit lanes (SMULL, SMLAL: two products per lane), pairs of
// lanes added into 32-bit ones (SADALP).
#include "kernels/arm64/kernels_arm64.h"
#include "kernels/arm64/matvec_q8_neon.h"

namespace sparq {
namespace {

struct NeonDot {
  static int32_t dot(const int8_t* c, const int8_t* q, int size) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < size; j += 16) {
      const int8x16_t cv = vld1q_s8(c + j), qv = vld1q_s8(q + j);
      int16x8_t p = vmull_s8(vget_low_s8(cv), vget_low_s8(qv));
      p = vmlal_s8(p, vget_high_s8(cv), vget_high_s8(qv));
      acc = vpadalq_s16(acc, p);
    }
    return vaddvq_s32(acc);
  }
};

}  // namespace
}  // namespace sparq

SPARQ_Q8_ARM64_ENTRY_POINTS(neon, NeonDot)
