// ggml's block formats (spec.md §5), byte-exact: q4_0 (f16 d + 16 bytes of
// nibbles), q4_1 (f16 d, f16 m + 16 bytes), q8_0 (f16 d + 32 int8), and the
// read-only ones of model files: q5_0, q5_1, the K-quants, iq4_nl, iq4_xs. Blocks are
// addressed as bytes (field offsets below) because a Uint8Array view may start
// at any byte, so no block struct is ever dereferenced unaligned.
#pragma once
#include <cstdint>

#include "common/block_traits.h"

namespace sparq {

// Elements and bytes of one block (one element for the plain types): block_traits.h's layout.
struct BlockShape {
  int64_t elements, bytes;
};
// `static`: every translation unit keeps its own copy (no inline function shared with ISA files).
static inline BlockShape block_shape(WeightType t) { return {block_traits(t).elements, block_traits(t).bytes}; }

static inline bool is_block_type(WeightType t) { return static_cast<int>(t) >= static_cast<int>(WeightType::q4_0); }
// The block types this backend also quantizes (the others it only reads).
static inline bool is_quantizable(WeightType t) { return block_traits(t).quantizable; }

// Bytes of `count` elements of `t` (count whole blocks for block types).
static inline int64_t weight_bytes(WeightType t, int64_t count) {
  const BlockShape s = block_shape(t);
  return count / s.elements * s.bytes;
}

// iq4_nl / iq4_xs: the 16 non-linear levels a nibble indexes (times the block scale).
static constexpr int8_t IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// q4_k / q5_k: the 6-bit scale and minimum of 32-element sub-block j from the block's 12 packed bytes.
static inline void scale_min_k(const uint8_t* p, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = p[j] & 63;
    mn = p[j + 4] & 63;
  } else {
    sc = (p[j + 4] & 0x0f) | ((p[j - 4] >> 6) << 4);
    mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
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

// x (nblocks) blocks of t -> y (nblocks * block elements) f32, any block type: the reference
// dequantizers' values bit for bit (quant_ref.cc).
void dequantize_blocks_ref(WeightType t, const uint8_t* x, float* y, int64_t nblocks);
void dequantize_blocks_avx512(WeightType t, const uint8_t* x, float* y, int64_t nblocks);  // q4_0, q4_1, q8_0 only
void dequantize_blocks(WeightType t, const uint8_t* x, float* y, int64_t nblocks);         // dispatch

}  // namespace sparq
