// The portable parts of the integer prefill product (gemm_q8.h): the activation
// quantization (scalar, once per call, with the INT4 'int8' path's group
// quantizer, 32-element groups), the weights' decoding into panels and the
// loop over panels and blocks of activation rows that the SIMD kernels share.
#include "gemm_q8.h"

#include <cstddef>
#include <cstring>
#include <limits>

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

// decode_panel for the gemm_q8_halves types: per 32-element block of a row, its codes and its two
// half-blocks' integer scales and minimums (block_codes.h), w_j = d sc_h u_j + mw_h.
void decode_panel_halves(WeightType t, const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p) {
  constexpr int NR = GEMM_Q8_NR;
  const int64_t row_bytes = weight_bytes(t, cols), block_bytes = block_shape(t).bytes, blocks = cols / QK;
  alignas(64) int8_t c[32];
  for (int i = 0; i < NR; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* x = w + (r0 + i) * row_bytes + b / 8 * block_bytes;  // the super-block
      float d = 0;
      for (int h = 0; h < 2; ++h) {
        float mw = 0;
        int sc = 0;
        if (i < nr) sc = scale_min16(t, x, static_cast<int>(2 * (b % 8) + h), d, mw);
        p.mw[(2 * b + h) * NR + i] = mw;
        p.sc[(2 * b + h) * NR + i] = static_cast<int32_t>((static_cast<uint32_t>(sc) << 16) | (static_cast<uint32_t>(sc) & 0xffff));
      }
      p.dw[b * NR + i] = d;
      if (i < nr) chunk_codes16(t, x, static_cast<int>(b % 8), c);
      else std::memset(c, 0, sizeof c);
      for (int k = 0; k < 8; ++k) std::memcpy(p.u + ((b * 8 + k) * NR + i) * 4, c + 4 * k, 4);
    }
  }
}

// Rows r0 .. r0 + nr of w into the panel; rows past nr get zero codes and scales.
void decode_panel(WeightType t, const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p) {
  if (gemm_q8_halves(t)) return decode_panel_halves(t, w, cols, r0, nr, p);
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

// Measured on a 2-core AMD EPYC (Zen 4), one thread, a 2048 x 4096 weight, CPU time of both kernels
// at n = 8, 16, .. 96 (`pnpm bench:gemm-crossover`, and with `--kernel avx2`): the first of those n
// where the blocked product was as fast. Types whose panel decode is dear (Q5_0 / Q5_1's
// fifth bits, the K-quants' scales) need more rows to repay it; AVX2's blocked kernels gain less
// per row over their per-row ones than VNNI's.
int64_t gemm_q8_min_n(WeightType t, bool vnni) {
  switch (t) {
    case WeightType::q4_0: case WeightType::q4_1: return 16;
    case WeightType::q8_0: return vnni ? 16 : 32;
    case WeightType::q5_0: return 48;
    case WeightType::q5_1: return 56;
    case WeightType::q2_k: return vnni ? 64 : 56;
    case WeightType::q3_k: return vnni ? 48 : 24;
    case WeightType::q4_k: case WeightType::q5_k: return vnni ? 48 : 40;
    case WeightType::q6_k: return vnni ? 48 : 72;
    case WeightType::iq4_nl: return vnni ? 40 : 80;
    case WeightType::iq4_xs: return vnni ? 32 : 64;
    default: return std::numeric_limits<int64_t>::max();  // not a block type
  }
}

void size_q8_acts(WeightType t, int64_t n, int64_t cols, Q8Acts& a) {
  a.n = n;
  a.cols = cols;
  a.q.resize(static_cast<size_t>(n * cols));
  a.d.resize(static_cast<size_t>(n * (cols / QK)));
  a.ds.resize(a.d.size());
  a.corr.resize(a.d.size());
  a.ds16.resize(gemm_q8_halves(t) ? static_cast<size_t>(n * (cols / 16)) : 0);
}

void quantize_q8_acts(WeightType t, const float* x, int64_t t_begin, int64_t t_end, Q8Acts& a) {
  const int64_t cols = a.cols, blocks = cols / QK;
  const int off = gemm_q8_offset(t);
  const bool halves = gemm_q8_halves(t);
  for (int64_t r = t_begin; r < t_end; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t sum = 0;
      int8_t* q = a.q.data() + r * cols + b * QK;
      const float d = quantize_int8_group(x + r * cols + b * QK, QK, q, sum);
      a.d[r * blocks + b] = d;
      a.ds[r * blocks + b] = d * static_cast<float>(sum);
      a.corr[r * blocks + b] = -off * sum;
      if (!halves) continue;
      int32_t first = 0;
      for (int j = 0; j < 16; ++j) first += q[j];
      a.ds16[2 * (r * blocks + b)] = d * static_cast<float>(first);
      a.ds16[2 * (r * blocks + b) + 1] = d * static_cast<float>(sum - first);
    }
  }
}

void gemm_q8_panels(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                    uint8_t* scratch, int mr, Q8PanelKernel kernel, int32_t* sums) {
  constexpr int NR = GEMM_Q8_NR;
  const int64_t cols = a.cols, subs = cols / QK, panel_bytes = gemm_q8_panel_bytes(t, cols);
  // 64-byte aligned panels inside the scratch buffer, one per 32 rows of the range.
  uint8_t* base = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64;
  auto panel = [&](int64_t r0) {
    uint8_t* u = base + (r0 - row_begin) / NR * panel_bytes;
    float* dw = reinterpret_cast<float*>(u + NR * cols);
    float* mw = dw + subs * NR;
    return Q8Panel{u, dw, mw, reinterpret_cast<int32_t*>(mw + gemm_q8_mins(t, cols) * NR)};
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
