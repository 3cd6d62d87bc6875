// The integer form of every block type for the 'int8' product (matvec_q8.h): a row is a run of
// sub-blocks s (16 elements for q2_k, q3_k and q6_k, 32 for the other types), each element
//   w_j = dl_s c_j + m_s
// with c_j a small integer code (int8), dl_s and m_s f32. Scalar and header-only (`static` and an
// anonymous namespace, so the scalar twin and the SIMD files each keep their own copy, never one
// compiled with ISA flags).
//
// The codes, per type (the layouts: core/dtype.ts and the reference's ops/ files; quant_ref.cc dequantizes through them):
//   q4_0 u - 8, q5_0 u - 16, q8_0 and iq4_* signed, with m_s = -0;
//   q4_1, q5_1, q2_k, q4_k, q5_k u >= 0 with their minimum (-dmin * min for the K-quants);
//   q3_k u in 0..7 and q6_k u in 0..63 with the offsets 4 and 32 moved into the minimum, m_s = -4 dl_s
//   and -32 dl_s (exact: a power of two times dl_s) (the SIMD kernels subtract the offsets in their integer sums instead).
// dl_s and m_s are the dequantizers' f32 values (d * sc exact in f32: an f16 times 6 bits).
//
// Each type's decoder is a specialization of the templates below (scale_min16 and chunk_codes16 for the
// 16-element sub-blocks, sub_block_scale and codes32 for the 32-element ones); sub_block_codes reaches
// them through a table built from the type list (block_traits.h's per_weight_type).
#pragma once
#include <cstdint>

#include "common/half.h"
#include "common/quant.h"

namespace sparq {

// Elements per sub-block of a block type.
static inline int sub_block_elements(WeightType t) { return block_traits(t).sub_block; }

namespace {

// ---- q2_k, q3_k, q6_k: 16-element sub-blocks of a 256-element super-block x ----

// The integer scale sc (returned) and minimum m of sub-block `sub` (0 .. 15), and the super-block's
// scale d; the sub-block's dl is d * sc (exact in f32: an f16 times 6 or 8 bits).
template <WeightType T>
int scale_min16(const uint8_t* x, int sub, float& d, float& m);
// The codes c of elements 32 k4 .. 32 k4 + 31 (k4 < 8). With H = k4 / 4 and k = k4 % 4: one loop over
// the 32 bytes per type, so the compiler vectorizes it.
template <WeightType T>
void chunk_codes16(const uint8_t* x, int k4, int8_t* c);

// q2_k: scales[16] (low nibble scale, high nibble minimum) | qs[64] | d | dmin; codes bits 2k of qs[32 H + l].
template <>
inline int scale_min16<WeightType::q2_k>(const uint8_t* x, int sub, float& d, float& m) {
  d = fp16_to_fp32_ref(load_u16(x + 80));
  m = -(fp16_to_fp32_ref(load_u16(x + 82)) * static_cast<float>(x[sub] >> 4));
  return x[sub] & 0x0f;
}
template <>
inline void chunk_codes16<WeightType::q2_k>(const uint8_t* x, int k4, int8_t* c) {
  const int H = k4 >> 2, k = k4 & 3;
  for (int l = 0; l < 32; ++l) c[l] = static_cast<int8_t>((x[16 + 32 * H + l] >> (2 * k)) & 3);
}

// q3_k: hmask[32] | qs[64] | scales[12] (6-bit, + 32) | d; codes q2_k's of its qs with bit k4 of hmask[l] as their third bit.
template <>
inline int scale_min16<WeightType::q3_k>(const uint8_t* x, int sub, float& d, float& m) {
  // Low nibbles of scales[0..8) then their high nibbles; the top two bits at 2 (sub / 4) of scales[8 + sub % 4].
  const uint8_t* sc = x + 96;
  const int low = sub < 8 ? sc[sub] & 0x0f : sc[sub - 8] >> 4;
  const int high = (sc[8 + sub % 4] >> (2 * (sub >> 2))) & 3;
  d = fp16_to_fp32_ref(load_u16(x + 108));
  const int s = (low | (high << 4)) - 32;
  m = -4.0f * (d * static_cast<float>(s));
  return s;
}
template <>
inline void chunk_codes16<WeightType::q3_k>(const uint8_t* x, int k4, int8_t* c) {
  const int H = k4 >> 2, k = k4 & 3;
  for (int l = 0; l < 32; ++l) c[l] = static_cast<int8_t>(((x[32 + 32 * H + l] >> (2 * k)) & 3) | (((x[l] >> k4) & 1) << 2));
}

// q6_k: ql[128] | qh[64] | scales[16] int8 | d; codes the low (k < 2) or high nibble of
// ql[64 H + 32 (k % 2) + l] with bits 2k of qh[32 H + l] as bits 4-5.
template <>
inline int scale_min16<WeightType::q6_k>(const uint8_t* x, int sub, float& d, float& m) {
  d = fp16_to_fp32_ref(load_u16(x + 208));
  const int s = static_cast<int8_t>(x[192 + sub]);
  m = -32.0f * (d * static_cast<float>(s));
  return s;
}
template <>
inline void chunk_codes16<WeightType::q6_k>(const uint8_t* x, int k4, int8_t* c) {
  const int H = k4 >> 2, k = k4 & 3;
  for (int l = 0; l < 32; ++l)
    c[l] = static_cast<int8_t>(((x[64 * H + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f) | (((x[128 + 32 * H + l] >> (2 * k)) & 3) << 4));
}

// ---- The other block types: 32-element sub-blocks ----

// Sub-block `sub` of the block x (0 for the 32-element blocks, 0 .. 7 of a K-quant or iq4_xs super-block):
// its scale dl and minimum m (m is left as it is, -0, for the types without one). The 32-element
// blocks start with the f16 d, then (q4_1, q5_1: has_min) the f16 minimum; the super-block types
// specialize it.
template <WeightType T>
void block_scale(const uint8_t* x, int, float& dl, float& m) {
  static_assert(block_traits(T).elements == 32, "a super-block type has its own block_scale");
  dl = fp16_to_fp32_ref(load_u16(x));
  if constexpr (block_traits(T).has_min) m = fp16_to_fp32_ref(load_u16(x + 2));
}
// Its 32 codes.
template <WeightType T>
void codes32(const uint8_t* x, int sub, int8_t* c);

// The 32 nibbles of a 16-byte run into c: byte j holds element j (low) and j + 16 (high). Two loops
// without a branch, so the compiler vectorizes them (the blocked products decode per call).
inline void nibbles32(const uint8_t* qs, int8_t* c) {
  for (int j = 0; j < 16; ++j) c[j] = static_cast<int8_t>(qs[j] & 0x0f);
  for (int j = 0; j < 16; ++j) c[j + 16] = static_cast<int8_t>(qs[j] >> 4);
}
// q5_0 / q5_1: the nibbles after a little-endian 32-bit qh of fifth bits, minus `off`.
inline void codes_q5(const uint8_t* qh, int off, int8_t* c) {
  nibbles32(qh + 4, c);
  for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>((c[j] | (((qh[j >> 3] >> (j & 7)) & 1) << 4)) - off);
}
// iq4_*: nibbles through the levels.
inline void codes_iq4(const uint8_t* qs, int8_t* c) {
  nibbles32(qs, c);
  for (int j = 0; j < 32; ++j) c[j] = IQ4_LEVELS[c[j]];
}

// q4_0: d | qs[16], codes u - 8.
template <>
inline void codes32<WeightType::q4_0>(const uint8_t* x, int, int8_t* c) {
  nibbles32(x + 2, c);
  for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(c[j] - 8);
}
// q4_1: d | m | qs[16].
template <>
inline void codes32<WeightType::q4_1>(const uint8_t* x, int, int8_t* c) {
  nibbles32(x + 4, c);
}
// q8_0: d | qs[32] signed.
template <>
inline void codes32<WeightType::q8_0>(const uint8_t* x, int, int8_t* c) {
  for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(x[2 + j]);
}
// q5_0: d | qh[4] | qs[16], codes u - 16.
template <>
inline void codes32<WeightType::q5_0>(const uint8_t* x, int, int8_t* c) {
  codes_q5(x + 2, 16, c);
}
// q5_1: d | m | qh[4] | qs[16].
template <>
inline void codes32<WeightType::q5_1>(const uint8_t* x, int, int8_t* c) {
  codes_q5(x + 4, 0, c);
}
// iq4_nl: d | qs[16] through the levels.
template <>
inline void codes32<WeightType::iq4_nl>(const uint8_t* x, int, int8_t* c) {
  codes_iq4(x + 2, c);
}
// iq4_xs: d | scales_h (2 bits per sub-block) | scales_l[4] (nibbles) | qs[128]; dl = d (scale - 32).
template <>
inline void block_scale<WeightType::iq4_xs>(const uint8_t* x, int sub, float& dl, float&) {
  const int low = (x[4 + (sub >> 1)] >> (4 * (sub & 1))) & 0x0f;
  dl = fp16_to_fp32_ref(load_u16(x)) * static_cast<float>((low | (((load_u16(x + 2) >> (2 * sub)) & 3) << 4)) - 32);
}
template <>
inline void codes32<WeightType::iq4_xs>(const uint8_t* x, int sub, int8_t* c) {
  codes_iq4(x + 8 + 16 * sub, c);
}
// q4_k, q5_k: d | dmin | scales[12] (scale_min_k) [| qh[32] (q5_k)] | qs; sub-block `sub` is the low
// (even) or high (odd) nibbles of qs[32 (sub / 2) ..], q5_k's fifth bits bit `sub` of qh.
template <>
inline void block_scale<WeightType::q4_k>(const uint8_t* x, int sub, float& dl, float& m) {
  int sc, mn;
  scale_min_k(x + 4, sub, sc, mn);
  dl = fp16_to_fp32_ref(load_u16(x)) * static_cast<float>(sc);
  m = -(fp16_to_fp32_ref(load_u16(x + 2)) * static_cast<float>(mn));
}
template <>
inline void block_scale<WeightType::q5_k>(const uint8_t* x, int sub, float& dl, float& m) {
  block_scale<WeightType::q4_k>(x, sub, dl, m);
}
inline void codes_k(const uint8_t* qs, int sub, int8_t* c) {
  const int shift = 4 * (sub % 2);
  for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>((qs[32 * (sub / 2) + j] >> shift) & 0x0f);
}
template <>
inline void codes32<WeightType::q4_k>(const uint8_t* x, int sub, int8_t* c) {
  codes_k(x + 16, sub, c);
}
template <>
inline void codes32<WeightType::q5_k>(const uint8_t* x, int sub, int8_t* c) {
  codes_k(x + 48, sub, c);
  for (int j = 0; j < 32; ++j) c[j] = static_cast<int8_t>(c[j] | ((x[16 + j] >> sub) & 1) << 4);
}

// ---- Any block type ----

// Of sub-block s (32 elements) of a weight row of type T (not q2_k, q3_k, q6_k): the scale dl and
// minimum m; x gets the address of its block.
template <WeightType T>
inline void sub_block_scale(const uint8_t* row, int64_t s, const uint8_t*& x, float& dl, float& m) {
  constexpr int64_t per_block = block_traits(T).elements / QK;  // sub-blocks per block: 1, or 8 for the K-quants and iq4_xs
  x = row + s / per_block * block_traits(T).bytes;
  m = -0.0f;  // no minimum: -0, as the reference's (y = dl c + m keeps the sign of a zero product)
  block_scale<T>(x, static_cast<int>(s % per_block), dl, m);
}

// Sub-block s of a weight row of block type T: codes c[0 .. sub_block_elements(T)), scale dl and minimum m.
template <WeightType T>
void sub_block_codes_of(const uint8_t* row, int64_t s, int8_t* c, float& dl, float& m) {
  if constexpr (block_traits(T).sub_block == 16) {
    const uint8_t* x = row + (s / (QK_K / 16)) * block_traits(T).bytes;
    const int sub = static_cast<int>(s % (QK_K / 16));
    float d;
    const int sc = scale_min16<T>(x, sub, d, m);
    dl = d * static_cast<float>(sc);
    int8_t chunk[32];
    chunk_codes16<T>(x, sub / 2, chunk);
    for (int j = 0; j < 16; ++j) c[j] = chunk[16 * (sub % 2) + j];
  } else {
    const uint8_t* x;
    sub_block_scale<T>(row, s, x, dl, m);
    codes32<T>(x, static_cast<int>(s % (block_traits(T).elements / QK)), c);
  }
}

}  // namespace

// Sub-block s of a weight row (t a block type): codes c[0 .. sub_block_elements(t)), scale dl and minimum m.
static inline void sub_block_codes(WeightType t, const uint8_t* row, int64_t s, int8_t* c, float& dl, float& m) {
  using Decode = void (*)(const uint8_t* row, int64_t s, int8_t* c, float& dl, float& m);
  static constexpr PerWeightType<Decode> DECODERS = per_weight_type<Decode>([](auto type) -> Decode {
    constexpr WeightType T = decltype(type)::value;
    if constexpr (block_traits(T).elements > 1) return &sub_block_codes_of<T>;
    else return nullptr;
  });
  DECODERS[static_cast<int>(t)](row, s, c, dl, m);
}

}  // namespace sparq
