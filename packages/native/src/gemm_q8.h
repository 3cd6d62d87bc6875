// The integer prefill product for block weights (gemm_q8_avx512.cc with AVX-512
// VNNI, gemm_q8_avx2.cc with AVX2), as ggml computes its quantized products: the activation rows are
// quantized once per call to 8 bits per 32-element block (scale dx = amax / 127,
// floored at 2^-126; codes round(x / dx), halves away from zero), and each
// 32-element sub-block of the weights is read as unsigned 8-bit codes u with
//   w_j = dw * (u_j - off) + mw
// (off a constant of the type, dw and mw f32 per sub-block). Then
//   sum_j w_j x_j ~ dw dx (sum_j u_j q_j - off sum_j q_j) + mw dx sum_j q_j,
// the integer sum exact in int32, the rest in f32. The only approximation is the
// activation's rounding (|x - dx q| <= dx / 2 per element), so the product is
// within sum_j |w_j| dx / 2 of the f32 one, plus f32 rounding (test/native/gemm-q8.spec.ts
// derives the bound).
#pragma once
#include <cstdint>
#include <vector>

#include "quant.h"

namespace sparq {

// Activation rows quantized per 32-element block for weights with offset `off`.
struct Q8Acts {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;      // (n, cols) codes
  std::vector<float> d;       // (n, cols / 32) block scales dx
  std::vector<float> ds;      // (n, cols / 32) dx * sum q
  std::vector<int32_t> corr;  // (n, cols / 32) -off * sum q
};

// The weight types whose sub-blocks are 32 elements of one scale and minimum (the others stay on f32).
static inline bool gemm_q8_supports(WeightType t) {
  switch (t) {
    case WeightType::q4_0: case WeightType::q4_1: case WeightType::q8_0: case WeightType::q5_0: case WeightType::q5_1:
    case WeightType::iq4_nl: case WeightType::q4_k: case WeightType::q5_k: case WeightType::iq4_xs: return true;
    default: return false;
  }
}

// off of w_j = dw (u_j - off) + mw: the code of the value 0 for the types without a minimum.
static inline int gemm_q8_offset(WeightType t) {
  switch (t) {
    case WeightType::q4_0: return 8;
    case WeightType::q5_0: return 16;
    case WeightType::q8_0: case WeightType::iq4_nl: case WeightType::iq4_xs: return 128;  // signed codes + 128
    default: return 0;  // q4_1, q5_1, q4_k, q5_k: codes >= 0 and a minimum
  }
}

// Bytes of one panel: 32 weight rows' codes and their sub-blocks' scales and minimums.
static inline int64_t gemm_q8_panel_bytes(int64_t cols) { return 32 * cols + 2 * 4 * 32 * (cols / 32); }
// Scratch bytes a call for `rows` weight rows needs: their panels, 64-byte aligned.
static inline int64_t gemm_q8_scratch_bytes(int64_t rows, int64_t cols) { return (rows + 31) / 32 * gemm_q8_panel_bytes(cols) + 64; }

// A panel, as both kernels read it: GEMM_Q8_NR weight rows' sub-blocks decoded once per call into
// unsigned codes u laid out for 4-byte dot products (dword k of the panel is NR rows x 4 bytes, row
// i's codes of columns 4k .. 4k + 3), with their scales dw and minimums mw; rows past the weight's
// end have zero codes, scales and minimums.
constexpr int GEMM_Q8_NR = 32;
struct Q8Panel {
  uint8_t* u;  // (cols / 4) dwords x NR rows x 4 bytes
  float* dw;   // (cols / 32) x NR
  float* mw;   // (cols / 32) x NR
};
// A kernel's product of one panel (weight rows r0 .. r0 + nr, nr <= NR) with activation rows
// [t_begin, t_end): out[t, r0 + i] for i < nr, out (n, rows); with `sums` (tests), the int32
// sub-block sums go there instead, (n, rows, cols / 32), and out is not written.
using Q8PanelKernel = void (*)(WeightType t, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0,
                               int nr, float* out, int32_t* sums);
// The loop both kernels share (portable, gemm_q8.cc): decodes every panel of weight rows
// [row_begin, row_end) into scratch (gemm_q8_scratch_bytes), then hands `kernel` blocks of
// activation rows (multiples of mr, about 256 KB of codes, so they stay in L2 while every panel passes).
void gemm_q8_panels(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                    uint8_t* scratch, int mr, Q8PanelKernel kernel, int32_t* sums);

// Sizes acts for x (n, cols); then quantize_q8_acts fills activation rows [t_begin, t_end) of
// them from x, for weights of offset `off` (portable, gemm_q8.cc; row ranges may run in parallel).
void size_q8_acts(int64_t n, int64_t cols, Q8Acts& a);
void quantize_q8_acts(const float* x, int64_t t_begin, int64_t t_end, int off, Q8Acts& a);
// out rows [row_begin, row_end) of x @ w^T from the quantized activations; scratch of
// gemm_q8_scratch_bytes(cols). Needs AVX-512 VNNI and gemm_q8_supports(t).
void gemm_q8_vnni(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch);
// The same with AVX2 (vpmaddubsw + vpmaddwd): the same int32 sums and f32 operations, so the same
// output bit for bit. Needs AVX2 and gemm_q8_supports(t).
void gemm_q8_avx2(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch);

}  // namespace sparq
