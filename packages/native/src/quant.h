// ggml's block formats (SPEC 5), byte-exact: q4_0 (f16 d + 16 bytes of
// nibbles), q4_1 (f16 d, f16 m + 16 bytes), q8_0 (f16 d + 32 int8). Blocks are
// addressed as bytes (field offsets below) because a Uint8Array view may start
// at any byte, so no block struct is ever dereferenced unaligned.
#pragma once
#include <cstdint>

namespace sparq {

// Weight element types of matvec/matmul; the numbers are the binding's dtype codes.
enum class WeightType : int { f32 = 0, f16 = 1, bf16 = 2, q4_0 = 3, q4_1 = 4, q8_0 = 5 };

constexpr int64_t QK = 32;  // elements per block
constexpr int64_t Q4_0_BYTES = 2 + QK / 2;
constexpr int64_t Q4_1_BYTES = 4 + QK / 2;
constexpr int64_t Q8_0_BYTES = 2 + QK;
static_assert(Q4_0_BYTES == 18 && Q4_1_BYTES == 20 && Q8_0_BYTES == 34, "ggml block sizes");

inline bool is_block_type(WeightType t) { return t == WeightType::q4_0 || t == WeightType::q4_1 || t == WeightType::q8_0; }

// Bytes of `count` elements of `t` (count whole blocks for block types).
inline int64_t weight_bytes(WeightType t, int64_t count) {
  switch (t) {
    case WeightType::f32: return count * 4;
    case WeightType::f16:
    case WeightType::bf16: return count * 2;
    case WeightType::q4_0: return count / QK * Q4_0_BYTES;
    case WeightType::q4_1: return count / QK * Q4_1_BYTES;
    case WeightType::q8_0: return count / QK * Q8_0_BYTES;
  }
  return 0;
}

// Block quantizers of one kernel family: 32 f32 -> one block.
struct BlockQuantizers {
  void (*q4_0)(const float* x, uint8_t* y);
  void (*q4_1)(const float* x, uint8_t* y);
  void (*q8_0)(const float* x, uint8_t* y);
};

// Quantizes nblocks blocks with the family's function for t. `static`: each file keeps its own copy.
static inline void quantize_blocks_with(const BlockQuantizers& q, WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  void (*fn)(const float*, uint8_t*) = t == WeightType::q4_0 ? q.q4_0 : t == WeightType::q4_1 ? q.q4_1 : q.q8_0;
  const int64_t bytes = weight_bytes(t, QK);
  for (int64_t b = 0; b < nblocks; ++b) fn(x + b * QK, y + b * bytes);
}

// x (nblocks * 32) f32 -> y (nblocks) blocks of t; t a block type.
void quantize_blocks_ref(WeightType t, const float* x, uint8_t* y, int64_t nblocks);
void quantize_blocks_avx512(WeightType t, const float* x, uint8_t* y, int64_t nblocks);
void quantize_blocks(WeightType t, const float* x, uint8_t* y, int64_t nblocks);  // dispatch

// x (nblocks) blocks of t -> y (nblocks * 32) f32.
void dequantize_blocks_ref(WeightType t, const uint8_t* x, float* y, int64_t nblocks);
void dequantize_blocks_avx512(WeightType t, const uint8_t* x, float* y, int64_t nblocks);
void dequantize_blocks(WeightType t, const uint8_t* x, float* y, int64_t nblocks);  // dispatch

}  // namespace sparq
