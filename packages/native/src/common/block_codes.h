// The integer form of every block type for the 'int8' product (matvec_q8.h): a row is a run of
// sub-blocks s (16 elements for q2_k, q3_k and q6_k, 32 for the other types), each element
//   w_j = dl_s c_j + m_s
// with c_j a small integer code (int8), dl_s and m_s f32. Scalar and header-only (`static`, so
// the scalar twin and the SIMD files each keep their own copy, never one compiled with ISA flags).
//
// The codes, per type (the layouts: core/dtype.ts and the reference's ops/ files; quant_ref.cc dequantizes through them):
//   q4_0 u - 8, q5_0 u - 16, q8_0 and iq4_* signed, with m_s = -0;
//   q4_1, q5_1, q2_k, q4_k, q5_k u >= 0 with their minimum (-dmin * min for the K-quants);
//   q3_k u in 0..7 and q6_k u in 0..63 with the offsets 4 and 32 moved into the minimum, m_s = -4 dl_s
//   and -32 dl_s (exact: a power of two times dl_s) (the SIMD kernels subtract the offsets in their integer sums instead).
// dl_s and m_s are the dequantizers' f32 values (d * sc exact in f32: an f16 times 6 bits).
#pragma once
#include <cstdint>

#include "common/half.h"
#include "common/quant.h"

namespace sparq {

// Elements per sub-block of a block type.
static inline int sub_block_elements(WeightType t) { return block_traits(t).sub_block; }

// Of a q2_k, q3_k or q6_k super-block x: the integer scale sc (returned) and minimum m of its 16-element
// sub-block `sub` (0 .. 15), and the super-block's scale d; the sub-block's dl is d * sc (exact in f32: an
// f16 times 6 or 8 bits).
static inline int scale_min16(WeightType t, const uint8_t* x, int sub, float& d, float& m) {
  switch (t) {
    case WeightType::q2_k: {  // scales[16] (low nibble scale, high nibble minimum) | qs[64] | d | dmin
      d = fp16_to_fp32_ref(load_u16(x + 80));
      m = -(fp16_to_fp32_ref(load_u16(x + 82)) * static_cast<float>(x[sub] >> 4));
      return x[sub] & 0x0f;
    }
    case WeightType::q3_k: {  // hmask[32] | qs[64] | scales[12] (6-bit, + 32) | d
      // Low nibbles of scales[0..8) then their high nibbles; the top two bits at 2 (sub / 4) of scales[8 + sub % 4].
      const uint8_t* sc = x + 96;
      const int low = sub < 8 ? sc[sub] & 0x0f : sc[sub - 8] >> 4;
      const int high = (sc[8 + sub % 4] >> (2 * (sub >> 2))) & 3;
      d = fp16_to_fp32_ref(load_u16(x + 108));
      const int s = (low | (high << 4)) - 32;
      m = -4.0f * (d * static_cast<float>(s));
      return s;
    }
    default: {  // q6_k: ql[128] | qh[64] | scales[16] int8 | d
      d = fp16_to_fp32_ref(load_u16(x + 208));
      const int s = static_cast<int8_t>(x[192 + sub]);
      m = -32.0f * (d * static_cast<float>(s));
      return s;
    }
  }
}

// The codes c of elements 32 k4 .. 32 k4 + 31 (k4 < 8) of a q2_k, q3_k or q6_k super-block x. With
// H = k4 / 4, k = k4 % 4 and l < 32: q2_k's are bits 2k of qs[32 H + l]; q3_k's the same of its qs with
// bit k4 of hmask[l] as their third bit; q6_k's the low (k < 2) or high nibble of ql[64 H + 32 (k % 2) + l]
// with bits 2k of qh[32 H + l] as bits 4-5. One loop per type over the 32 bytes, so the compiler vectorizes it.
static inline void chunk_codes16(WeightType t, const uint8_t* x, int k4, int8_t* c) {
  const int H = k4 >> 2, k = k4 & 3;
  switch (t) {
    case WeightType::q2_k:
      for (int l = 0; l < 32; ++l) c[l] = static_cast<int8_t>((x[16 + 32 * H + l] >> (2 * k)) & 3);
      return;
    case WeightType::q3_k:
      for (int l = 0; l < 32; ++l) c[l] = static_cast<int8_t>(((x[32 + 32 * H + l] >> (2 * k)) & 3) | (((x[l] >> k4) & 1) << 2));
      return;
    default:  // q6_k
      for (int l = 0; l < 32; ++l)
        c[l] =
            static_cast<int8_t>(((x[64 * H + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f) | (((x[128 + 32 * H + l] >> (2 * k)) & 3) << 4));
      return;
  }
}

// Of sub-block s (32 elements) of a weight row, t a block type other than q2_k, q3_k, q6_k: the scale dl
// and minimum m; x gets the address of its block.
static inline void sub_block_scale(WeightType t, const uint8_t* row, int64_t s, const uint8_t*& x, float& dl, float& m) {
  const BlockShape shape = block_shape(t);
  m = -0.0f;  // no minimum: -0, as the reference's (y = dl c + m keeps the sign of a zero product)
  if (shape.elements == QK) {
    x = row + s * shape.bytes;
    dl = fp16_to_fp32_ref(load_u16(x));
    if (t == WeightType::q4_1 || t == WeightType::q5_1) m = fp16_to_fp32_ref(load_u16(x + 2));
    return;
  }
  x = row + (s / (QK_K / QK)) * shape.bytes;
  const int sub = static_cast<int>(s % (QK_K / QK));
  if (t == WeightType::iq4_xs) {
    const int low = (x[4 + (sub >> 1)] >> (4 * (sub & 1))) & 0x0f;
    dl = fp16_to_fp32_ref(load_u16(x)) * static_cast<float>((low | (((load_u16(x + 2) >> (2 * sub)) & 3) << 4)) - 32);
    return;
  }
  int sc, mn;  // q4_k, q5_k
  scale_min_k(x + 4, sub, sc, mn);
  dl = fp16_to_fp32_ref(load_u16(x)) * static_cast<float>(sc);
  m = -(fp16_to_fp32_ref(load_u16(x + 2)) * static_cast<float>(mn));
}

// Sub-block s of a weight row (t a block type): codes c[0 .. sub_block_elements(t)), scale dl and minimum m.
static inline void sub_block_codes(WeightType t, const uint8_t* row, int64_t s, int8_t* c, float& dl, float& m) {
  // The 32 nibbles of a 16-byte run into c: byte j holds element j (low) and j + 16 (high). Two
  // loops without a branch, so the compiler vectorizes them (the blocked products decode per call).
  auto nibbles = [c](const uint8_t* qs) {
    for (int j = 0; j < 16; ++j) c[j] = static_cast<int8_t>(qs[j] & 0x0f);
    for (int j = 0; j < 16; ++j) c[j + 16] = static_cast<int8_t>(qs[j] >> 4);
  };
  if (sub_block_elements(t) == 16) {  // q2_k, q3_k, q6_k
    const uint8_t* x = row + (s / (QK_K / 16)) * block_shape(t).bytes;
    const int sub = static_cast<int>(s % (QK_K / 16));
    float d;
    const int sc = scale_min16(t, x, sub, d, m);
    dl = d * static_cast<float>(sc);
    int8_t chunk[32];
    chunk_codes16(t, x, sub / 2, chunk);
    for (int j = 0; j < 16; ++j) c[j] = chunk[16 * (sub % 2) + j];
    return;
  }
  const uint8_t* x;
  sub_block_scale(t, row, s, x, dl, m);
  const int sub = static_cast<int>(s % (QK_K / QK));  // the K-quants' sub-block of x
  switch (t) {
    case WeightType::q4_0:
      nibbles(x + 2);
      for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(c[j] - 8);
      return;
    case WeightType::q4_1: nibbles(x + 4); return;
    case WeightType::q8_0:
      for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(x[2 + j]);
      return;
    case WeightType::iq4_nl:
      nibbles(x + 2);
      for (int j = 0; j < 32; ++j) c[j] = IQ4_LEVELS[c[j]];
      return;
    case WeightType::q5_0:
    case WeightType::q5_1: {  // the fifth bits in a little-endian 32-bit qh
      const bool q5_1 = t == WeightType::q5_1;
      const uint8_t* qh = x + (q5_1 ? 4 : 2);
      nibbles(qh + 4);
      for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>((c[j] | (((qh[j >> 3] >> (j & 7)) & 1) << 4)) - (q5_1 ? 0 : 16));
      return;
    }
    case WeightType::iq4_xs:
      nibbles(x + 8 + 16 * sub);
      for (int j = 0; j < 32; ++j) c[j] = IQ4_LEVELS[c[j]];
      return;
    default: {  // q4_k / q5_k: sub-block `sub` is the low (even) or high (odd) nibbles of qs[32 (sub / 2) ..], fifth bits bit `sub` of qh
      const bool five = t == WeightType::q5_k;
      const uint8_t* qs = x + (five ? 48 : 16) + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>((qs[j] >> shift) & 0x0f);
      if (five) {
        for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(c[j] | ((x[16 + j] >> sub) & 1) << 4);
      }
      return;
    }
  }
}

}  // namespace sparq
