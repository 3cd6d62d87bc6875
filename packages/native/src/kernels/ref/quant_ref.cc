// Scalar ggml block quantization: the reference every SIMD twin must match byte
// for byte. Plain f32 arithmetic in ggml's order; this file is compiled without
// FMA, so no multiply-add is ever contracted.
#include <algorithm>
#include <cmath>

#include "common/block_codes.h"
#include "common/half.h"
#include "common/quant.h"

namespace sparq {
namespace {

// C's (int8_t) cast of a float as x86 compilers emit it (cvttss2si: truncate toward zero to an int32,
// 0x80000000 for NaN, infinities and anything out of int32 range), then the low byte, as a signed
// code. Written out so it is defined C++: the plain cast of NaN or infinity is undefined behaviour
// (UBSan's float-cast-overflow), reached when a block's values are so tiny that 1 / d overflows f32.
// The reference backend's truncToByte (ops/round.ts) is the same function.
inline int trunc_to_int8(float v) {
  const int32_t i = std::isfinite(v) && std::fabs(v) < 2147483648.0f ? static_cast<int32_t>(v) : INT32_MIN;
  return static_cast<int8_t>(static_cast<uint8_t>(i & 0xff));
}

void quantize_q4_0_block(const float* x, uint8_t* y) {
  // max = the signed value of largest magnitude (the first one on ties); d = max / -8.
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < QK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, fp32_to_fp16_ref(d));
  for (int j = 0; j < QK / 2; ++j) {
    // Truncation toward zero after +8.5 rounds x/d + 8 to nearest (x/d + 8 >= 0).
    const int lo = std::min(15, trunc_to_int8(x[j] * id + 8.5f));
    const int hi = std::min(15, trunc_to_int8(x[j + QK / 2] * id + 8.5f));
    y[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_q4_1_block(const float* x, uint8_t* y) {
  float min = 3.402823466e+38f, max = -3.402823466e+38f;
  for (int j = 0; j < QK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, fp32_to_fp16_ref(d));
  store_u16(y + 2, fp32_to_fp16_ref(min));
  for (int j = 0; j < QK / 2; ++j) {
    const int lo = std::min(15, trunc_to_int8((x[j] - min) * id + 0.5f));
    const int hi = std::min(15, trunc_to_int8((x[j + QK / 2] - min) * id + 0.5f));
    y[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_q8_0_block(const float* x, uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(y, fp32_to_fp16_ref(d));
  // roundf: half away from zero, as ggml.
  for (int j = 0; j < QK; ++j) y[2 + j] = static_cast<uint8_t>(trunc_to_int8(std::roundf(x[j] * id)));
}

}  // namespace

void quantize_blocks_ref(WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  quantize_blocks_with({quantize_q4_0_block, quantize_q4_1_block, quantize_q8_0_block}, t, x, y, nblocks);
}

namespace {

// One block of a type native only reads (q5_0, q5_1, iq4_nl, the K-quants, iq4_xs) -> y, from
// block_codes.h's integer form, as the reference's makeCodec dequantizes: y_j = f32(dl_s c_j) + m_s.
// Every product dl_s c_j is exact in f32 (an f16 times codes and scales of at most 8 bits each), so
// the one rounding is the minimum's addition, as in ggml. q3_k and q6_k keep their offsets 4 and 32
// in m_s = -off dl_s there; the reference's codes are c_j - off with m_s = -0, so those two take
// dl_s (c_j - off) instead, the product ggml rounds.
void dequantize_read_only_block(WeightType t, const uint8_t* x, float* y) {
  const int sub = sub_block_elements(t);
  const int off = t == WeightType::q3_k ? 4 : t == WeightType::q6_k ? 32 : 0;
  int8_t c[32];
  float dl, m;
  for (int s = 0; s < block_shape(t).elements / sub; ++s) {
    sub_block_codes(t, x, s, c, dl, m);
    float* ys = y + s * sub;
    for (int j = 0; j < sub; ++j) ys[j] = off ? dl * static_cast<float>(c[j] - off) : dl * static_cast<float>(c[j]) + m;
  }
}

}  // namespace

void dequantize_blocks_ref(WeightType t, const uint8_t* x, float* y, int64_t nblocks) {
  if (t != WeightType::q4_0 && t != WeightType::q4_1 && t != WeightType::q8_0) {
    const BlockShape s = block_shape(t);
    for (int64_t b = 0; b < nblocks; ++b) {
      dequantize_read_only_block(t, x + b * s.bytes, y + b * s.elements);
    }
    return;
  }
  for (int64_t b = 0; b < nblocks; ++b) {
    float* yb = y + b * QK;
    if (t == WeightType::q4_0) {
      const uint8_t* xb = x + b * Q4_0_BYTES;
      const float d = fp16_to_fp32_ref(load_u16(xb));
      for (int j = 0; j < QK / 2; ++j) {
        yb[j] = static_cast<float>((xb[2 + j] & 0x0f) - 8) * d;
        yb[j + QK / 2] = static_cast<float>((xb[2 + j] >> 4) - 8) * d;
      }
    } else if (t == WeightType::q4_1) {
      const uint8_t* xb = x + b * Q4_1_BYTES;
      const float d = fp16_to_fp32_ref(load_u16(xb));
      const float m = fp16_to_fp32_ref(load_u16(xb + 2));
      for (int j = 0; j < QK / 2; ++j) {
        yb[j] = static_cast<float>(xb[4 + j] & 0x0f) * d + m;
        yb[j + QK / 2] = static_cast<float>(xb[4 + j] >> 4) * d + m;
      }
    } else if (t == WeightType::q8_0) {
      const uint8_t* xb = x + b * Q8_0_BYTES;
      const float d = fp16_to_fp32_ref(load_u16(xb));
      for (int j = 0; j < QK; ++j) yb[j] = static_cast<float>(static_cast<int8_t>(xb[2 + j])) * d;
    }
  }
}

}  // namespace sparq
