// The prefill product out (n, rows) = x (n, cols) @ w^T for many activation
// rows, cache-blocked, written once over the wrapper layer's vector traits (kernels/simd.h).
//
// Blocking. Weight rows go in panels of NR = 2 vectors' width of rows (16 on
// AVX2, 32 on AVX-512) by KC columns. A panel is decoded to f32 once, stored
// column-major (panel[k * NR + i] = w[r0 + i, k0 + k]: NR KB at most, it stays
// in L1/L2), and then multiplied with every activation row, MR rows at a time:
// the micro-kernel keeps an MR x NR tile of out in registers (2 * MR vector
// accumulators), and per column k loads the panel's two vectors once and
// broadcasts x[t, k] for each of its MR rows. So each weight element is read
// from memory and decoded once per call, and each activation element once per
// panel (from L2: MR x KC floats per tile, n x KC per panel).
//
// Arithmetic: plain f32 FMAs, so every output is within the f32 dot-product
// bound of the exact product of the decoded weights, like the matvec kernels
// (only the order of the additions differs).
#pragma once
#include "kernels/x86/matvec_simd.h"

namespace sparq {
namespace {

constexpr int64_t GEMM_KC = 256;  // panel columns: 32 x 256 f32 = 32 KB on AVX-512

template <class V>
struct GemmShape {
  static constexpr int NR = 2 * V::W;             // weight rows per panel
  static constexpr int MR = V::W == 16 ? 12 : 6;  // activation rows per tile: 2 * MR accumulators + 3 <= 32 (16 on AVX2)
};

// out tile (MR rows of x) x (NR panel rows) over the panel's kc columns; `first`: the
// first column block, which stores instead of adding. Rows of the tile past `nr` are not stored.
template <class V, int M>
inline void gemm_tile(const float* panel, int64_t kc, const float* x, int64_t cols, float* out, int64_t rows, int nr, bool first) {
  using F = typename V::F;
  constexpr int W = V::W, NR = 2 * W;
  F acc0[M], acc1[M];
  for (int m = 0; m < M; ++m) acc0[m] = acc1[m] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    const F w0 = V::load(panel + k * NR), w1 = V::load(panel + k * NR + W);
    for (int m = 0; m < M; ++m) {
      const F b = V::set1(x[m * cols + k]);
      acc0[m] = V::fma(w0, b, acc0[m]);
      acc1[m] = V::fma(w1, b, acc1[m]);
    }
  }
  for (int m = 0; m < M; ++m) {
    float* o = out + m * rows;
    if (nr == NR) {
      V::store(o, first ? acc0[m] : V::add(acc0[m], V::load(o)));
      V::store(o + W, first ? acc1[m] : V::add(acc1[m], V::load(o + W)));
    } else {
      alignas(64) float tmp[NR];
      V::store(tmp, acc0[m]);
      V::store(tmp + W, acc1[m]);
      for (int i = 0; i < nr; ++i) o[i] = first ? tmp[i] : o[i] + tmp[i];
    }
  }
}

// Calls gemm_tile<V, M> for the remaining m < MR activation rows (a switch over the tile heights).
template <class V, int M>
inline void gemm_tile_tail(int m, const float* panel, int64_t kc, const float* x, int64_t cols, float* out, int64_t rows, int nr,
                           bool first) {
  if constexpr (M > 0) {
    if (m == M) return gemm_tile<V, M>(panel, kc, x, cols, out, rows, nr, first);
    gemm_tile_tail<V, M - 1>(m, panel, kc, x, cols, out, rows, nr, first);
  }
}

// Weight rows [row_begin, row_end) of the product. decode(r, k0, kc, dst) writes
// w[r, k0 .. k0 + kc) as f32 to dst (k0 and kc are multiples of 32 unless kc
// reaches the end of the row).
template <class V, class Decode>
void gemm_rows(Decode decode, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin, int64_t row_end) {
  constexpr int NR = GemmShape<V>::NR, MR = GemmShape<V>::MR;
  alignas(64) float panel[GEMM_KC * NR];
  alignas(64) float segment[GEMM_KC];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += NR) {
    const int nr = static_cast<int>(row_end - r0 < NR ? row_end - r0 : NR);
    for (int64_t k0 = 0; k0 < cols; k0 += GEMM_KC) {
      const int64_t kc = cols - k0 < GEMM_KC ? cols - k0 : GEMM_KC;
      // Decode the panel column-major; rows past nr are zeros (their sums are never stored).
      for (int i = 0; i < NR; ++i) {
        if (i < nr) decode(r0 + i, k0, kc, segment);
        for (int64_t k = 0; k < kc; ++k) panel[k * NR + i] = i < nr ? segment[k] : 0.0f;
      }
      const bool first = k0 == 0;
      int64_t t0 = 0;
      for (; t0 + MR <= n; t0 += MR) gemm_tile<V, MR>(panel, kc, x + t0 * cols + k0, cols, out + t0 * rows + r0, rows, nr, first);
      if (t0 < n)
        gemm_tile_tail<V, MR - 1>(static_cast<int>(n - t0), panel, kc, x + t0 * cols + k0, cols, out + t0 * rows + r0, rows, nr, first);
    }
  }
}

// Decodes w[r, k0 .. k0 + kc) of a weight type to f32 with the vector type's loads.
template <class V>
struct DecodeWeights {
  WeightType t;
  const uint8_t* w;
  int64_t row_bytes;
  void operator()(int64_t r, int64_t k0, int64_t kc, float* dst) const {
    constexpr int W = V::W;
    const uint8_t* row = w + r * row_bytes;
    if (is_block_type(t)) return decode_blocks(row + weight_bytes(t, k0), kc / block_shape(t).elements, dst);
    int64_t k = 0;
    for (; k + W <= kc; k += W) {
      const int64_t j = k0 + k;
      V::store(dst + k, t == WeightType::f32   ? V::load(reinterpret_cast<const float*>(row) + j)
                        : t == WeightType::f16 ? V::load(reinterpret_cast<const uint16_t*>(row) + j)
                                               : V::load_bf16(reinterpret_cast<const uint16_t*>(row) + j));
    }
    for (; k < kc; ++k)
      dst[k] = t == WeightType::f32 ? scalar_f32(row, k0 + k) : t == WeightType::f16 ? scalar_f16(row, k0 + k) : scalar_bf16(row, k0 + k);
  }
  void decode_blocks(const uint8_t* blk, int64_t count, float* dst) const {
    constexpr int W = V::W;
    if (!is_quantizable(t)) {
      const BlockShape s = block_shape(t);
      for (int64_t b = 0; b < count; ++b) BlockDecoder<V>::block(t, blk + b * s.bytes, dst + b * s.elements);
      return;
    }
    const int64_t bytes = weight_bytes(t, QK);
    for (int64_t b = 0; b < count; ++b, blk += bytes, dst += QK) {
      const typename V::F d = V::set1(f16_at(blk));
      if (t == WeightType::q8_0) {
        for (int h = 0; h < QK; h += W) V::store(dst + h, V::mul(V::from_i8(blk + 2 + h), d));
        continue;
      }
      // The reference's values, q4_0 (q - 8) d and q4_1 q d + m: q d is exact (an f16 times 4 bits),
      // so the FMA rounds once, as the reference does. Byte j holds elements j and j + 16.
      const bool q4_0 = t == WeightType::q4_0;
      const typename V::F m = q4_0 ? V::mul(V::set1(-8.0f), d) : V::set1(f16_at(blk + 2));
      for (int h = 0; h < QK / 2; h += W) {
        typename V::F lo, hi;
        V::nibbles(blk + (q4_0 ? 2 : 4) + h, lo, hi);
        V::store(dst + h, V::fma(lo, d, m));
        V::store(dst + QK / 2 + h, V::fma(hi, d, m));
      }
    }
  }
};

// Decodes an INT4 row segment: (q - zero) * scale per element, scalar (the panel amortizes it).
struct DecodeInt4 {
  const Int4View* w;
  void operator()(int64_t r, int64_t k0, int64_t kc, float* dst) const {
    const uint8_t* row = w->packed + r * (w->cols / 2);
    const float* scales = w->scales + r * w->groups();
    const int8_t* zeros = w->zeros + r * w->groups();
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t j = k0 + k, g = j / w->group;
      const uint8_t b = row[j / 2];
      dst[k] = static_cast<float>((j % 2 == 0 ? nibble_lo(b) : nibble_hi(b)) - zeros[g]) * scales[g];
    }
  }
};

}  // namespace
}  // namespace sparq

// The entry points of one ISA file: the per-row kernels matmul_<isa> and matmul_int4_dequant_<isa>
// (matvec_simd.h), the blocked ones gemm_<isa> and gemm_int4_<isa>.
#define SPARQ_WEIGHT_PRODUCT_ENTRY_POINTS(isa, V)                                                                                       \
  namespace sparq {                                                                                                                     \
  constexpr PerWeightType<MatmulFn> matmul_##isa = matmul_simd_kernels<V>();                                                            \
  void matmul_int4_dequant_##isa(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end) {        \
    matmul_int4_dequant_simd<V>(w, x, n, out, row_begin, row_end);                                                                      \
  }                                                                                                                                     \
  void gemm_##isa(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, int64_t row_begin, \
                  int64_t row_end) {                                                                                                    \
    gemm_rows<V>(DecodeWeights<V>{t, w, weight_bytes(t, cols)}, x, n, rows, cols, out, row_begin, row_end);                             \
  }                                                                                                                                     \
  void gemm_int4_##isa(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end) {                  \
    gemm_rows<V>(DecodeInt4{&w}, x, n, w.rows, w.cols, out, row_begin, row_end);                                                        \
  }                                                                                                                                     \
  }
