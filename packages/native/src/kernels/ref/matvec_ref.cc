// Scalar matmul for every weight type: dequantize a row to f32 (exactly as
// dequantize_blocks_ref does), then the reference's f32 dot product.
#include <vector>

#include "common/half.h"
#include "ops/matvec.h"

namespace sparq {

void matmul_ref(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
                int64_t row_end) {
  std::vector<float> row(static_cast<size_t>(cols));
  const int64_t row_bytes = weight_bytes(t, cols);
  for (int64_t r = row_begin; r < row_end; ++r) {
    // Row r of w as f32.
    const uint8_t* src = w + r * row_bytes;
    if (is_block_type(t)) {
      dequantize_blocks_ref(t, src, row.data(), cols / block_shape(t).elements);
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        if (t == WeightType::f32) std::memcpy(&row[j], src + 4 * j, 4);
        else if (t == WeightType::f16) row[j] = fp16_to_fp32_ref(load_u16(src + 2 * j));
        else row[j] = bf16_to_fp32(load_u16(src + 2 * j));
      }
    }
    // One dot product per activation row.
    // One f32 accumulator, left to right, no FMA: the reference's dotF32 (llama2.c's matmul) bit for bit.
    for (int64_t k = 0; k < n; ++k) {
      float acc = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const float prod = row[j] * x[k * cols + j];
        acc += prod;
      }
      out[k * rows + r] = acc;
    }
  }
}

}  // namespace sparq
