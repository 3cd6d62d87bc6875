// The f32-activation product for every weight type with NEON (arm64's baseline): out rows
// [row_begin, row_end) of x (n, cols) @ w^T. f32 rows are read in place, f16 rows widened by FCVTL,
// bf16 rows by a 16-bit shift (exact); a row of blocks is first dequantized into a buffer by
// dequantize_blocks_ref (the values are the reference's; its loops are vectorized by the compiler)
// and then meets each activation row from L1. Each dot product keeps 4 FMA chains of 4 lanes, then
// a scalar tail; the sums differ from matmul_ref's left-to-right ones by f32 rounding only.
#include <cstring>
#include <vector>

#include "common/half.h"
#include "kernels/arm64/kernels_arm64.h"
#include "kernels/simd.h"
#include "ops/matvec.h"

namespace sparq {
namespace {

// sum_j w_j x_j over cols, with w's 4 elements at j from row.vec(j) and one from row.at(j).
template <class Row>
float dot(const Row& row, const float* x, int64_t cols) {
  Neon::F acc[4] = {Neon::zero(), Neon::zero(), Neon::zero(), Neon::zero()};
  int64_t j = 0;
  for (; j + 16 <= cols; j += 16)
    for (int a = 0; a < 4; ++a) acc[a] = Neon::fma(row.vec(j + 4 * a), Neon::load(x + j + 4 * a), acc[a]);
  for (; j + 4 <= cols; j += 4) acc[0] = Neon::fma(row.vec(j), Neon::load(x + j), acc[0]);
  float sum = Neon::reduce_add(Neon::add(Neon::add(acc[0], acc[1]), Neon::add(acc[2], acc[3])));
  for (; j < cols; ++j) sum += row.at(j) * x[j];
  return sum;
}

struct F32Row {
  const float* p;
  Neon::F vec(int64_t j) const { return Neon::load(p + j); }
  float at(int64_t j) const { return p[j]; }
};
struct F16Row {
  const uint16_t* p;
  Neon::F vec(int64_t j) const { return Neon::load(p + j); }
  float at(int64_t j) const { return fp16_to_fp32_ref(p[j]); }
};
struct Bf16Row {
  const uint16_t* p;
  Neon::F vec(int64_t j) const { return Neon::load_bf16(p + j); }
  float at(int64_t j) const { return bf16_to_fp32(p[j]); }
};

template <class Row>
void rows_against_x(const Row& row, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t r) {
  for (int64_t k = 0; k < n; ++k) out[k * rows + r] = dot(row, x + k * cols, cols);
}

// The kernel of weight type T: plain rows read in place, block rows dequantized first.
template <WeightType T>
void matmul_type(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin,
                 int64_t row_end) {
  const int64_t row_bytes = weight_bytes(T, cols);
  thread_local std::vector<float> decoded;
  if (is_block_type(T) && decoded.size() < static_cast<size_t>(cols)) decoded.resize(static_cast<size_t>(cols));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* src = w + r * row_bytes;
    if constexpr (T == WeightType::f32) {
      rows_against_x(F32Row{reinterpret_cast<const float*>(src)}, x, n, rows, cols, out, r);
    } else if constexpr (T == WeightType::f16) {
      rows_against_x(F16Row{reinterpret_cast<const uint16_t*>(src)}, x, n, rows, cols, out, r);
    } else if constexpr (T == WeightType::bf16) {
      rows_against_x(Bf16Row{reinterpret_cast<const uint16_t*>(src)}, x, n, rows, cols, out, r);
    } else {
      dequantize_blocks_ref(t, src, decoded.data(), cols / block_shape(T).elements);
      rows_against_x(F32Row{decoded.data()}, x, n, rows, cols, out, r);
    }
  }
}

}  // namespace

constexpr PerWeightType<MatmulFn> matmul_neon = per_weight_type<MatmulFn>([](auto type) { return &matmul_type<decltype(type)::value>; });

}  // namespace sparq
