// The 'int8' product of block weights with the Armv8.2 dot-product instructions (compiled with
// +dotprod; dispatched only where cpu_features().dotprod): matvec_q8_neon.h over SDOT, four
// 4-element int8 dot products added into the 32-bit lanes per instruction.
#include "kernels/arm64/kernels_arm64.h"
#include "kernels/arm64/matvec_q8_neon.h"

namespace sparq {
namespace {

struct SdotDot {
  static int32_t dot(const int8_t* c, const int8_t* q, int size) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < size; j += 16) acc = vdotq_s32(acc, vld1q_s8(c + j), vld1q_s8(q + j));
    return vaddvq_s32(acc);
  }
};

}  // namespace
}  // namespace sparq

SPARQ_Q8_ARM64_ENTRY_POINTS(dotprod, SdotDot)
