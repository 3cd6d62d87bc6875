// The integer prefill product for block weights (gemm_q8_avx512.cc with AVX-512
// VNNI, gemm_q8_avx2.cc with AVX2), as ggml computes its quantized products: the activation rows are
// quantized once per call into ggml's activation blocks for the weight type (matvec_q8.h's
// quantize_act_row: a step dx per 32 elements, codes |q| <= 127), and each
// 32-element sub-block of the weights is read as unsigned 8-bit codes u with
//   w_j = dw * (u_j - off) + mw
// (off a constant of the type, dw and mw f32 per sub-block). Then
//   sum_j w_j x_j ~ dw dx (sum_j u_j q_j - off sum_j q_j) + mw dx sum_j q_j,
// the integer sum exact in int32, the rest in f32. q2_k, q3_k and q6_k have 16-element half-blocks
// h of integer scale sc_h (block_codes.h's scale_min16) and integer minimum c_h, w_j = d sc_h u_j + mm c_h
// per 256-element super-block S (q2_k: c_h its minimum mn_h, mm = -dmin; q3_k and q6_k: their offsets
// 4 and 32 as c_h = sc_h, mm = -4 d and -32 d). Their activation step dx is one per super-block too
// (ggml's Q8_K), so the whole super-block is summed in int32 before one f32 step:
//   sum_{j in S} w_j x_j ~ d dx (sum_h sc_h sum_{j in h} u_j q_j) + mm dx (sum_h c_h sum_{j in h} q_j)
// (|sc_h|, |c_h| <= 128, |u| <= 63, |q| <= 127: 16 half-blocks' sum stays within 2^28), as ggml sums
// its K-quant dot products (q3_k and q6_k fold the second sum into the first: gemm_q8_fold_offset;
// docs/int8-products.md, "Prefill GEMM"). The only approximation is the
// activation's rounding (|x - dx q| <= dx / 2 per element), so the product is
// within sum_j |w_j| dx / 2 of the f32 one, plus f32 rounding (test/native/gemm-q8.spec.ts
// derives the bound).
#pragma once
#include <cstdint>
#include <vector>

#include "common/quant.h"

namespace sparq {

// Activation rows quantized per 32-element block for weights with offset `off`.
struct Q8Acts {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;        // (n, cols) codes
  std::vector<float> d;         // (n, cols / 32) block scales dx
  std::vector<float> ds;        // (n, cols / 32) dx * sum q (Q8_1: its f16 sum; quantize_act_row's xs)
  std::vector<int32_t> corr;    // (n, cols / 32) -off * sum q
  std::vector<float> qsum;      // (n, cols / 32) f32(sum q), gemm_q8_super types (their dx factors out)
  std::vector<int32_t> corr16;  // (n, cols / 16) -off16 * sum q per half-block, q3_k and q6_k (gemm_q8_fold_offset)
  std::vector<int32_t>
      qs16;  // (n, cols / 32) the sums of q of each half-block, half 0 in the low int16, half 1 in the high; gemm_q8_halves types only
  std::vector<int32_t>
      qs32;  // (n, cols / 64) the sums of q of sub-blocks 2p and 2p + 1 in the low and high int16; gemm_q8_packs types only
};

// The types of 16-element half-blocks with integer scales (the second form above).
static inline bool gemm_q8_halves(WeightType t) { return block_traits(t).sub_block == 16; }
// The types of 32-element sub-blocks whose activation step dx is one per 256-column super-block (ggml's
// Q8_K): dx factors out of the super-block's 8 sub-blocks,
//   sum_{j in S} w_j x_j ~ dx (sum_{sb in S} f32(sum_{j in sb} (u_j - off) q_j) dw_sb + mw_sb f32(sum_{j in sb} q_j)),
// so the kernels take one or two f32 operations per sub-block and one per super-block (the f32 sum in
// brackets before dx rounds once more per sub-block than f += isum (dw dx); the bound above covers it).
static inline bool gemm_q8_super(WeightType t) { return t == WeightType::q4_k || t == WeightType::q5_k || t == WeightType::iq4_xs; }
// q3_k and q6_k: their half-blocks' minimums are a code offset times the scale (c_h = sc_h, mm = -off16 d,
// off16 = 4 and 32), so the offset goes into the integer sums, sc_h sum (u_j - off16) q_j, and the
// minimums' term disappears (|u - off16| <= 32: 16 half-blocks' sum stays within 2^27).
static inline int gemm_q8_fold_offset(WeightType t) { return block_traits(t).offset8; }
// Activation rows from which the blocked product beats the per-row kernel for type t, on the
// VNNI or the AVX2 kernels (gemm_q8.cc), over the file's layout or (packed) over the weights
// repacked at load. Over the file's layout the blocked product decodes every weight into panels on
// each call, a fixed cost the per-row kernel does not pay; the per-row kernel reads the weights
// once per activation row. Over the repacked weights that cost is gone or smaller, so the
// crossover is lower.
int64_t gemm_q8_min_n(WeightType t, bool vnni, bool packed);
// The weight types the blocked product handles: every block type (f16, bf16 and f32 stay on f32).
static inline bool gemm_q8_supports(WeightType t) { return block_traits(t).gemm_q8; }

// off of w_j = dw (u_j - off) + mw: the code of the value 0 for the types without a minimum.
static inline int gemm_q8_offset(WeightType t) { return block_traits(t).signed_codes ? 128 : block_traits(t).bias; }  // signed codes + 128

// The f32 scales dw and minimums mw per row of a panel: one per sub-block of 32, or per super-block of 256 (gemm_q8_halves: d and mm).
static inline int64_t gemm_q8_steps(WeightType t, int64_t cols) { return gemm_q8_halves(t) ? cols / 256 : cols / 32; }
// Bytes of one panel: 32 weight rows' codes, their scales and minimums, and the half-blocks' integer scales and minimums.
static inline int64_t gemm_q8_panel_bytes(WeightType t, int64_t cols) {
  return 32 * cols + 4 * 32 * (2 * gemm_q8_steps(t, cols) + (gemm_q8_halves(t) ? cols / 16 + cols / 32 : 0));
}
// Panels decoded at a time (gemm_q8_panels): about 2 MB of them, at least one.
static inline int64_t gemm_q8_chunk_panels(WeightType t, int64_t cols) {
  const int64_t panels = (int64_t{1} << 21) / gemm_q8_panel_bytes(t, cols);
  return panels > 1 ? panels : 1;
}
// Scratch bytes a call for `rows` weight rows needs: one chunk of their panels, 64-byte aligned.
static inline int64_t gemm_q8_scratch_bytes(WeightType t, int64_t rows, int64_t cols) {
  const int64_t panels = (rows + 31) / 32, chunk = gemm_q8_chunk_panels(t, cols);
  return (panels < chunk ? panels : chunk) * gemm_q8_panel_bytes(t, cols) + 64;
}

// A panel, as both kernels read it: GEMM_Q8_NR weight rows' sub-blocks decoded once per call into
// unsigned codes u laid out for 4-byte dot products (dword k of the panel is NR rows x 4 bytes, row
// i's codes of columns 4k .. 4k + 3), with their scales dw and minimums mw (and the half-blocks'
// integer scales sc and minimums cm); rows past the weight's end have zero codes, scales and minimums.
constexpr int GEMM_Q8_NR = 32;
struct Q8Panel {
  uint8_t* u;   // (cols / 4) dwords x NR rows x 4 bytes
  float* dw;    // gemm_q8_steps(t, cols) x NR: dw, or d per super-block (gemm_q8_halves)
  float* mw;    // gemm_q8_steps(t, cols) x NR: mw, or mm per super-block (gemm_q8_halves)
  int32_t* sc;  // gemm_q8_halves types: (cols / 16) x NR, sc_h in both int16 halves (vpmaddwd's operand)
  int32_t* cm;  // gemm_q8_halves types: (cols / 32) x NR, c_h of the 32-element block's two halves in the low and high int16
};
// A kernel's product of one panel (weight rows r0 .. r0 + nr, nr <= NR) with activation rows
// [t_begin, t_end): out[t, r0 + i] for i < nr, out (n, rows); with `sums` (tests), the int32
// sub-block sums go there instead, (n, rows, cols / 32; cols / 16 for gemm_q8_halves types), and out is not written.
using Q8PanelKernel = void (*)(WeightType t, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0,
                               int nr, float* out, int32_t* sums);
// The loop both kernels share (portable, gemm_q8.cc): decodes the panels of weight rows
// [row_begin, row_end) a chunk at a time into scratch (gemm_q8_scratch_bytes), and hands `kernel` each
// chunk's panels by blocks of activation rows (multiples of mr, about 256 KB of codes, so they stay in
// L2 while the chunk's panels pass).
// With `packed` (q6_k's packed weights, gemm_q8_repack), the panels are unpacked from them instead.
void gemm_q8_panels(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                    uint8_t* scratch, int mr, Q8PanelKernel kernel, int32_t* sums, const uint8_t* packed = nullptr);

// Weights repacked once (at their first blocked product) so that no call decodes panels: q4_k and q6_k,
// their codes still 4 and 6 bits. A packed panel is 32 weight rows, super-block by super-block (256
// columns, gemm_q8_packed_super(t) bytes each), in the order the kernels read them:
//   codes  4096 bytes: step pair j (columns 8j .. 8j + 7 of the super-block) is 128 bytes, byte 4i + c
//          holding row i's unsigned codes u of columns 8j + c (low nibble) and 8j + 4 + c (high nibble),
//          so masking and shifting 64 bytes gives two of the panels' dword steps (Q8Panel below);
//   q6_k:  2048 bytes more, their top two bits: step quad q (columns 16q .. 16q + 15) is 128 bytes, bits
//          2s, 2s + 1 of byte 4i + c those of row i's column 16q + 4s + c;
//   sc     the integer scales: q4_k's 8 sub-blocks' (6 bits, byte 32 s + i), q6_k's 16 half-blocks' (int8,
//          byte 32 h + i);
//   mn     q4_k: the integer minimums of sub-blocks 2p and 2p + 1, bytes 64 p + 2 i and 64 p + 2 i + 1,
//          which zero-extend to int16 pairs against Q8Acts::qs32;
//   d, mm  f32 per row: the super-block's d, and q4_k's -dmin.
// q4_k's kernels sum a whole super-block in int32, as ggml does,
//   I = sum_s sc_s sum_{j in s} u_j q_j   (|I| <= 8 * 63 * 32 * 15 * 127 < 2^28),
//   C = sum_s mn_s sum_{j in s} q_j       (|C| <= 8 * 63 * 32 * 127),
// and take two f32 steps per super-block, f += f32(I) (d dx), then f += f32(C) (mm dx): the same int32
// sub-block sums, fewer roundings than the panels' per-sub-block steps (within the same bound). q6_k's
// VNNI kernel puts the 6-bit codes together per tile from the two planes (tile_packed_q6), its AVX2
// products unpack each panel once per call (gemm_q8_unpack_panel: bit operations, no block headers) and
// run the panels' kernels; both give the panels' output bit for bit. Rows past the weight's end are
// zero. Bytes per weight: q4_k 0.59 (the file's 0.5625, the panels' 1.25), q6_k 0.83 (the file's 0.82,
// the panels' 1.625).
static inline bool gemm_q8_packs(WeightType t) { return t == WeightType::q4_k || t == WeightType::q6_k; }
static inline int64_t gemm_q8_packed_super(WeightType t) {
  return t == WeightType::q6_k ? 4096 + 2048 + 512 + 4 * GEMM_Q8_NR : 4096 + 256 + 256 + 2 * 4 * GEMM_Q8_NR;
}
static inline int64_t gemm_q8_packed_bytes(WeightType t, int64_t rows, int64_t cols) {
  return gemm_q8_packs(t) ? (rows + GEMM_Q8_NR - 1) / GEMM_Q8_NR * (cols / QK_K) * gemm_q8_packed_super(t) : 0;
}
// w (rows, cols) of a gemm_q8_packs type into packed (gemm_q8_packed_bytes), weight rows [row_begin,
// row_end) (multiples of 32 but the last; AVX2, gemm_q8_pack_avx2.cc: the panel decode's codes).
void gemm_q8_repack(WeightType t, const uint8_t* w, int64_t rows, int64_t cols, uint8_t* packed, int64_t row_begin, int64_t row_end);
// The loop both packed kernels share: the packed panels of weight rows [row_begin, row_end) about 512 KB at
// a time, each such chunk by blocks of activation rows (about 256 KB of codes, so both stay in L2), mr rows at
// a time: tile(pp, t0, m, r0, nr) for activation rows [t0, t0 + m) by the panel at pp (weight rows r0 .. r0 + nr).
template <class Tile>
void gemm_q8_packed_blocks(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t row_begin, int64_t row_end, int mr, Tile tile) {
  const int64_t panel = a.cols / QK_K * gemm_q8_packed_super(t);
  const int64_t chunk = ((int64_t{1} << 19) / panel > 1 ? (int64_t{1} << 19) / panel : 1) * GEMM_Q8_NR;
  const int64_t block = (262144 / a.cols / mr > 1 ? 262144 / a.cols / mr : 1) * mr;
  for (int64_t c0 = row_begin; c0 < row_end; c0 += chunk) {
    const int64_t c1 = row_end - c0 < chunk ? row_end : c0 + chunk;
    for (int64_t tb = 0; tb < a.n; tb += block) {
      const int64_t tend = a.n - tb < block ? a.n : tb + block;
      for (int64_t r0 = c0; r0 < c1; r0 += GEMM_Q8_NR) {
        const int nr = static_cast<int>(c1 - r0 < GEMM_Q8_NR ? c1 - r0 : GEMM_Q8_NR);
        for (int64_t t0 = tb; t0 < tend; t0 += mr)
          tile(packed + r0 / GEMM_Q8_NR * panel, t0, static_cast<int>(tend - t0 < mr ? tend - t0 : mr), r0, nr);
      }
    }
  }
}
// At a few activation rows a packed panel is read from memory once per call, and the kernels' work per
// byte is too small for the hardware prefetchers to keep ahead: each of a super-block's `steps` steps
// prefetches its share of the bytes GEMM_Q8_PACKED_AHEAD past super-block pp (into the next panel at
// the end of one: the panels of a call are contiguous).
constexpr int64_t GEMM_Q8_PACKED_AHEAD = 16384;
inline void gemm_q8_prefetch_packed(const uint8_t* pp, WeightType t, int step, int steps) {
  const int64_t share = (gemm_q8_packed_super(t) / steps + 63) / 64 * 64;
  for (int64_t line = 0; line < share; line += 64) __builtin_prefetch(pp + GEMM_Q8_PACKED_AHEAD + share * step + line, 0, 3);
}
// The panel of packed weights pp (q6_k, for the AVX2 kernels) into p, its nr rows the weight's.
void gemm_q8_unpack_panel(WeightType t, const uint8_t* pp, int64_t cols, int nr, const Q8Panel& p);
// out rows [row_begin, row_end) (row_begin a multiple of 32) of x @ w^T from the packed weights, scratch of
// gemm_q8_scratch_bytes (AVX2 q6_k's panels; VNNI and q4_k need none); with `sums` (tests) the int32 sums of u q go
// there instead, as the panels' kernels give them (n, rows, cols / 32; cols / 16 for q6_k).
void gemm_q8_vnni_packed(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                         uint8_t* scratch, int32_t* sums);
void gemm_q8_avx2_packed(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                         uint8_t* scratch, int32_t* sums);

// Sizes acts for x (n, cols) and weights of type t (gemm_q8.cc); then quantize_q8_acts fills activation rows
// [t_begin, t_end) of them from x (quantize_act_row's codes and steps, gemm_q8_pack_avx2.cc;
// row ranges may run in parallel).
void size_q8_acts(WeightType t, int64_t n, int64_t cols, Q8Acts& a);
void quantize_q8_acts(WeightType t, const float* x, int64_t t_begin, int64_t t_end, Q8Acts& a);
// Weight rows r0 .. r0 + nr (nr <= NR) of w (rows, cols) into the panel p; rows past nr get zero codes,
// scales and minimums (AVX2: gemm_q8_pack_avx2.cc).
void gemm_q8_decode_panel(WeightType t, const uint8_t* w, int64_t cols, int64_t r0, int nr, const Q8Panel& p);
// out rows [row_begin, row_end) of x @ w^T from the quantized activations; scratch of
// gemm_q8_scratch_bytes(t, row_end - row_begin, cols). Needs AVX-512 VNNI and gemm_q8_supports(t).
void gemm_q8_vnni(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch);
// The same with AVX2 (vpmaddubsw + vpmaddwd): the same int32 sums and f32 operations, so the same
// output bit for bit. Needs AVX2 and gemm_q8_supports(t).
void gemm_q8_avx2(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch);

}  // namespace sparq
