// The portable parts of the integer prefill product (gemm_q8.h): the activation
// quantization (scalar, once per call, with the INT4 'int8' path's group
// quantizer, 32-element groups), the weights' decoding into panels and the
// loop over panels and blocks of activation rows that the SIMD kernels share.
#include "gemm_q8.h"

#include <cstddef>
#include <cstring>

#include "block_codes.h"
#include "int4.h"

namespace sparq {
namespace {

// Sub-block sb (32 elements) of a weight row: codes u, scale dw and minimum mw, w_j = dw (u_j - off) + mw.
void decode_sub(WeightType t, const uint8_t* row, int64_t sb, uint8_t* u, float& dw, float& mw) {
  int8_t c[32];
  sub_block_codes(t, row, sb, c, dw, mw);
  const int off = gemm_q8_offset(t);
  for (int j = 0; j < 32; ++j) u[j] = static_cast<uint8_t>(c[j] + off);
}

// Rows r0 .. r0 + nr of w into the panel; rows past nr get zero codes and scales.
void decode_panel(WeightType t, const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p) {
  const int64_t row_bytes = weight_bytes(t, cols), subs = cols / QK;
  alignas(64) uint8_t u[32];
  for (int i = 0; i < GEMM_Q8_NR; ++i) {
    for (int64_t sb = 0; sb < subs; ++sb) {
      float dw = 0, mw = 0;
      if (i < nr) decode_sub(t, w + (r0 + i) * row_bytes, sb, u, dw, mw);
      else std::memset(u, 0, sizeof u);
      p.dw[sb * GEMM_Q8_NR + i] = dw;
      p.mw[sb * GEMM_Q8_NR + i] = mw;
      for (int k = 0; k < 8; ++k) std::memcpy(p.u + ((sb * 8 + k) * GEMM_Q8_NR + i) * 4, u + 4 * k, 4);
    }
  }
}

}  // namespace

void size_q8_acts(int64_t n, int64_t cols, Q8Acts& a) {
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * (cols / QK)));
  a.ds.resize(a.d.size());
  a.corr.resize(a.d.size());
}

void quantize_q8_acts(const float* x, int64_t t_begin, int64_t t_end, int off, Q8Acts& a) {
  const int64_t cols = a.cols, blocks = cols / QK;
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t sum = 0;
      const float d = quantize_int8_group(x + t * cols + b * QK, QK, a.q.data() + t * cols + b * QK, sum);
      a.d[t * blocks + b] = d;
      a.ds[t * blocks + b] = d * static_cast<float>(sum);
      a.corr[t * blocks + b] = -off * sum;
    }
  }
}

void gemm_q8_panels(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                    uint8_t* scratch, int mr, Q8PanelKernel kernel, int32_t* sums) {
  constexpr int NR = GEMM_Q8_NR;
  const int64_t cols = a.cols, subs = cols / QK, panel_bytes = gemm_q8_panel_bytes(cols);
  // 64-byte aligned panels inside the scratch buffer, one per 32 rows of the range.
  uint8_t* base = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64;
  auto panel = [&](int64_t r0) {
    uint8_t* u = base + (r0 - row_begin) / NR * panel_bytes;
    float* dw = reinterpret_cast<float*>(u + NR * cols);
    return Q8Panel{u, dw, dw + subs * NR};
  };
  auto height = [&](int64_t r0) { return static_cast<int>(row_end - r0 < NR ? row_end - r0 : NR); };
  for (int64_t r0 = row_begin; r0 < row_end; r0 += NR) decode_panel(t, w, cols, r0, height(r0), panel(r0));
  // Token blocks of about 256 KB of codes stay in L2 while every panel of the range passes.
  const int64_t block = (262144 / cols / mr > 1 ? 262144 / cols / mr : 1) * mr;
  for (int64_t tb = 0; tb < a.n; tb += block) {
    const int64_t tend = a.n - tb < block ? a.n : tb + block;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += NR) kernel(t, panel(r0), a, tb, tend, rows, r0, height(r0), out, sums);
  }
}

}  // namespace sparq
