// The integer prefill product (gemm_q8.h) with AVX2: the panels of the VNNI
// kernel (gemm_q8_pack_avx2.cc decodes them: dword k is 32 rows x 4 bytes of unsigned
// codes u), read half a panel (16 rows, two vectors of 8 int32 lanes) at a time
// by MR activation rows at a time. vpmaddubsw multiplies 4-byte runs of codes
// by the broadcast activation codes into int16 pair sums, vpmaddwd against ones
// adds the pairs into the int32 lanes that vpdpbusd fills, so every lane's int32
// sum is the VNNI kernel's; the f32 steps per sub-block are its steps too
// (f += f32(isum) * (dw * dx), then f += mw * (dx sum q)), in the same order,
// so the outputs are the same bit for bit.
//
// vpmaddubsw (unsigned x signed) saturates its int16 pair sums; with |q| <= 127
// (quantize_act_row):
// - 4-bit codes (q4_0, q4_1, q4_k: u <= 15) give pairs within 2 * 15 * 127 = 3810,
//   so 8 steps (a whole sub-block, 30480) add up in int16 before one vpmaddwd;
// - 5-bit codes (q5_0, q5_1, q5_k: u <= 31) give pairs within 7874: 4 steps (31496);
// - signed codes (q8_0, iq4_nl, iq4_xs: u = c + 128) would reach 2 * 255 * 127:
//   they multiply |c| by q with c's sign moved onto q (vpsignb), pairs within
//   2 * 128 * 127 = 32512, one step per vpmaddwd. That sums c q directly, which is
//   the VNNI lanes' -128 sum q + sum u q, so these lanes start from 0 instead of
//   the activation's correction -off sum q (which the unsigned types start from);
// - q2_k, q3_k (u <= 3, 7: pairs within 1778) add up a whole 16-element half-block (4 steps, 7112)
//   and q6_k (u <= 63: pairs within 16002) 2 steps (32004); their vpmaddwd multiplies by the
//   half-block's integer scale (both int16 halves of the panel's sc lane) instead of ones, which gives
//   the VNNI kernel's int32 sum over the super-block of sc_h (half-block h's sum).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "ops/gemm_q8.h"
#include "ops/matvec_q8.h"

namespace sparq {
namespace {

constexpr int NR = GEMM_Q8_NR;  // weight rows per panel, read in halves of 16 (two vectors of 8 int32 lanes)
// Codes of 4 and 5 bits, signed 8-bit, and the 16-element half-block types' 2, 3 and 6 bits.
enum class Codes { u4, u5, s8, u2, u3, u6 };
template <Codes C>
constexpr bool HALVES = C == Codes::u2 || C == Codes::u3 || C == Codes::u6;
// Steps (4 columns each) whose int16 pair sums add up before one vpmaddwd (bounds above).
template <Codes C>
constexpr int GROUP = C == Codes::u4                                       ? 8
                      : C == Codes::u5 || C == Codes::u2 || C == Codes::u3 ? 4
                      : C == Codes::u6                                     ? 2
                                                                           : 1;
// q3_k's and q6_k's code offsets, which their integer sums take out (gemm_q8_fold_offset).
template <Codes C>
constexpr int FOLD = C == Codes::u3   ? 4
                     : C == Codes::u6 ? 32
                                      : 0;
// Activation rows per tile: 2 MR running sums (int16, or int32 for signed codes), 2 vectors of codes
// (4 for signed codes: c and |c|) and a broadcast fill the 16 vector registers; the f32 accumulators
// (and the 5-bit codes' int32 sums) wait in L1 between sub-blocks. Measured best of 3 .. 6 per width
// (q6_k: 5, 4% faster than 4; q2_k and q3_k take q4's 6 untried).
template <Codes C>
constexpr int MR = C == Codes::u4 || C == Codes::u2 || C == Codes::u3 ? 6
                   : C == Codes::u6                                   ? 5
                                                                      : 4;

#define SPARQ_INLINE __attribute__((always_inline)) inline

// An empty asm that takes v and gives it back in a vector register: the compiler keeps each int16
// sum a running sum in its register, where it would regroup a sub-block's additions into a tree
// of all its products at once (more live values than registers, so spills).
SPARQ_INLINE void in_register(__m256i& v) { asm("" : "+x"(v)); }

// One step: columns 4k .. 4k + 3 (the 4-byte runs at up, two vectors of 8 rows; the codes of
// activation row m at xk + m * cols), into the int16 pair sums s (assigned if FIRST, else added).
template <int M, Codes C, bool FIRST>
SPARQ_INLINE void step(const uint8_t* up, const int8_t* xk, int64_t cols, __m256i (&s)[M][2]) {
  __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(up));
  __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(up + 32));
  __m256i c0 = w0, c1 = w1;  // the signed codes c = u - 128 (s8), whose sign moves onto q
  if constexpr (C == Codes::s8) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    c0 = _mm256_xor_si256(w0, flip), c1 = _mm256_xor_si256(w1, flip);
    w0 = _mm256_abs_epi8(c0), w1 = _mm256_abs_epi8(c1);  // |c| <= 128, read unsigned
  }
  for (int m = 0; m < M; ++m) {
    int32_t x4;
    std::memcpy(&x4, xk + m * cols, 4);
    const __m256i xb = _mm256_set1_epi32(x4);
    __m256i p0, p1;
    if constexpr (C == Codes::s8) {
      p0 = _mm256_maddubs_epi16(w0, _mm256_sign_epi8(xb, c0));
      p1 = _mm256_maddubs_epi16(w1, _mm256_sign_epi8(xb, c1));
    } else {
      p0 = _mm256_maddubs_epi16(w0, xb);
      p1 = _mm256_maddubs_epi16(w1, xb);
    }
    s[m][0] = FIRST ? p0 : _mm256_add_epi16(s[m][0], p0);
    s[m][1] = FIRST ? p1 : _mm256_add_epi16(s[m][1], p1);
    in_register(s[m][0]);
    in_register(s[m][1]);
  }
}

// Stores the f32 sums f of activation rows t0 .. t0 + M by weight rows r0 .. r0 + nh (nh <= 16) into out (n, rows).
template <int M>
void store_out(const __m256 (&f)[M][2], float* out, int64_t t0, int64_t rows, int64_t r0, int nh) {
  for (int m = 0; m < M; ++m) {
    float* o = out + (t0 + m) * rows + r0;
    if (nh == 16) {
      _mm256_storeu_ps(o, f[m][0]);
      _mm256_storeu_ps(o + 8, f[m][1]);
    } else {
      alignas(32) float last[16];  // the panel's last rows: only nh of them are the weight's
      _mm256_store_ps(last, f[m][0]);
      _mm256_store_ps(last + 8, f[m][1]);
      std::memcpy(o, last, sizeof(float) * static_cast<size_t>(nh));
    }
  }
}

// Tests: the int32 sums acc of activation rows t0 .. t0 + M by weight rows r0 .. r0 + nh, as sub- or
// half-block s of sums (n, rows, per_row).
template <int M>
void store_sums(const __m256i (&acc)[M][2], int32_t* sums, int64_t t0, int64_t rows, int64_t r0, int nh, int64_t per_row, int64_t s) {
  for (int m = 0; m < M; ++m) {
    alignas(32) int32_t lane[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane), acc[m][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane + 8), acc[m][1]);
    for (int i = 0; i < nh; ++i) sums[((t0 + m) * rows + r0 + i) * per_row + s] = lane[i];
  }
}

// Activation rows t0 .. t0 + M by rows 16 h .. 16 h + nh of the panel (weight rows r0 + 16 h ..) -> out
// (n, rows), the types of 32-element sub-blocks; SUPER (q4_k, q5_k, iq4_xs: gemm_q8_super) takes the
// VNNI tile_super's f32 steps, F += f32(isum) dw (+ mw f32(sum q)) per sub-block and f += F dx per
// super-block. With `sums` (tests: gemm_q8_avx2_sums), the int32 sub-block sums go there instead, (n, rows, cols / 32).
template <int M, Codes C, bool MIN, bool SUPER>
void tile(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int h, int nh, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  // Unsigned codes with an offset (q4_0, q5_0) start from the correction; with a minimum the offset
  // is 0, and signed codes need none (above).
  constexpr bool OFFSET = C != Codes::s8 && !MIN;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[M][2], F[M][2];  // F: SUPER's sum of the super-block so far, before dx
  for (int m = 0; m < M; ++m) f[m][0] = f[m][1] = F[m][0] = F[m][1] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < subs; ++sb) {
    const uint8_t* up = p.u + sb * 8 * NR * 4 + h * 64;
    const int8_t* xs = a.q.data() + t0 * cols + sb * QK;
    __m256i acc[M][2];  // int32 sums
    for (int g = 0; g < 8; g += GROUP<C>) {
      __m256i s[M][2];
      step<M, C, true>(up + g * NR * 4, xs + 4 * g, cols, s);
      for (int k = g + 1; k < g + GROUP<C>; ++k) step<M, C, false>(up + k * NR * 4, xs + 4 * k, cols, s);
      for (int m = 0; m < M; ++m) {  // the int16 sums to int32
        const __m256i i0 = _mm256_madd_epi16(s[m][0], ones), i1 = _mm256_madd_epi16(s[m][1], ones);
        if (g > 0) {
          acc[m][0] = _mm256_add_epi32(acc[m][0], i0);
          acc[m][1] = _mm256_add_epi32(acc[m][1], i1);
        } else if (OFFSET) {  // the lanes start from the activation's correction -off sum q
          const __m256i corr = _mm256_set1_epi32(a.corr[(t0 + m) * subs + sb]);
          acc[m][0] = _mm256_add_epi32(corr, i0);
          acc[m][1] = _mm256_add_epi32(corr, i1);
        } else {
          acc[m][0] = i0;
          acc[m][1] = i1;
        }
      }
    }
    if (sums) {
      store_sums<M>(acc, sums, t0, rows, r0 + 16 * h, nh, subs, sb);
      continue;
    }
    const __m256 d0 = _mm256_load_ps(p.dw + sb * NR + 16 * h), d1 = _mm256_load_ps(p.dw + sb * NR + 16 * h + 8);
    if constexpr (SUPER) {
      for (int m = 0; m < M; ++m) {
        F[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m][0]), d0, F[m][0]);
        F[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m][1]), d1, F[m][1]);
      }
      if (MIN) {
        const __m256 m0 = _mm256_load_ps(p.mw + sb * NR + 16 * h), m1 = _mm256_load_ps(p.mw + sb * NR + 16 * h + 8);
        for (int m = 0; m < M; ++m) {
          const __m256 qs = _mm256_set1_ps(a.qsum[(t0 + m) * subs + sb]);
          F[m][0] = _mm256_fmadd_ps(m0, qs, F[m][0]);
          F[m][1] = _mm256_fmadd_ps(m1, qs, F[m][1]);
        }
      }
      if (sb % 8 != 7) continue;
      for (int m = 0; m < M; ++m) {
        const __m256 dx = _mm256_set1_ps(a.d[(t0 + m) * subs + sb]);
        f[m][0] = _mm256_fmadd_ps(F[m][0], dx, f[m][0]);
        f[m][1] = _mm256_fmadd_ps(F[m][1], dx, f[m][1]);
        F[m][0] = F[m][1] = _mm256_setzero_ps();
      }
      continue;
    }
    for (int m = 0; m < M; ++m) {
      const __m256 dx = _mm256_set1_ps(a.d[(t0 + m) * subs + sb]);
      f[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m][0]), _mm256_mul_ps(d0, dx), f[m][0]);
      f[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m][1]), _mm256_mul_ps(d1, dx), f[m][1]);
    }
    if (!MIN) continue;
    // One minimum per sub-block (against dx times its codes' sum).
    const __m256 m0 = _mm256_load_ps(p.mw + sb * NR + 16 * h), m1 = _mm256_load_ps(p.mw + sb * NR + 16 * h + 8);
    for (int m = 0; m < M; ++m) {
      const __m256 x = _mm256_set1_ps(a.ds[(t0 + m) * subs + sb]);
      f[m][0] = _mm256_fmadd_ps(m0, x, f[m][0]);
      f[m][1] = _mm256_fmadd_ps(m1, x, f[m][1]);
    }
  }
  if (!sums) store_out<M>(f, out, t0, rows, r0 + 16 * h, nh);
}

// The same for q2_k, q3_k and q6_k (gemm_q8_halves), a super-block of 256 columns at a time: each
// half-block's int16 sums go to int32 through vpmaddwd by its integer scale sc_h (instead of ones),
// into the super-block's int32 sums I; vpmaddwd adds the integer minimums' products c_h (sum q) into C;
// then f += f32(I) (d dx) + f32(C) (mm dx), or for q3_k and q6_k f += f32(I - off16 C) (d dx): the VNNI
// kernel's int32 sums and f32 steps (gemm_q8_fold_offset).
template <int M, Codes C>
void tile_halves(const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int h, int nh, float* out, int32_t* sums) {
  constexpr int OFF16 = FOLD<C>;
  const int64_t cols = a.cols, subs = cols / QK;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[M][2];
  for (int m = 0; m < M; ++m) f[m][0] = f[m][1] = _mm256_setzero_ps();
  for (int64_t S = 0; S < cols / QK_K; ++S) {
    __m256i I[M][2];
    for (int m = 0; m < M; ++m) I[m][0] = I[m][1] = _mm256_setzero_si256();
    for (int64_t hb = 16 * S; hb < 16 * S + 16; ++hb) {  // half-block hb of the row
      const uint8_t* up = p.u + hb * 4 * NR * 4 + h * 64;
      const int8_t* xs = a.q.data() + t0 * cols + 16 * hb;
      // The int16 sums to int32 times the half-block's integer scales, or (tests' sums) times ones.
      const int32_t* sc = p.sc + hb * NR + 16 * h;
      const __m256i mul0 = sums ? ones : _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
      const __m256i mul1 = sums ? ones : _mm256_load_si256(reinterpret_cast<const __m256i*>(sc + 8));
      __m256i acc[M][2];  // the half-block's int32 sums
      for (int g = 0; g < 4; g += GROUP<C>) {
        __m256i s[M][2];
        step<M, C, true>(up + g * NR * 4, xs + 4 * g, cols, s);
        for (int k = g + 1; k < g + GROUP<C>; ++k) step<M, C, false>(up + k * NR * 4, xs + 4 * k, cols, s);
        for (int m = 0; m < M; ++m) {
          const __m256i i0 = _mm256_madd_epi16(s[m][0], mul0), i1 = _mm256_madd_epi16(s[m][1], mul1);
          acc[m][0] = g > 0 ? _mm256_add_epi32(acc[m][0], i0) : i0;
          acc[m][1] = g > 0 ? _mm256_add_epi32(acc[m][1], i1) : i1;
        }
      }
      if (sums) {
        store_sums<M>(acc, sums, t0, rows, r0 + 16 * h, nh, 2 * subs, hb);
        continue;
      }
      for (int m = 0; m < M; ++m) {
        I[m][0] = _mm256_add_epi32(I[m][0], acc[m][0]);
        I[m][1] = _mm256_add_epi32(I[m][1], acc[m][1]);
      }
    }
    if (sums) continue;
    const __m256 d0 = _mm256_load_ps(p.dw + S * NR + 16 * h), d1 = _mm256_load_ps(p.dw + S * NR + 16 * h + 8);
    const __m256 mm0 = _mm256_load_ps(p.mw + S * NR + 16 * h), mm1 = _mm256_load_ps(p.mw + S * NR + 16 * h + 8);
    __m256i c[M][2];  // the minimums' products
    for (int m = 0; m < M; ++m) c[m][0] = c[m][1] = _mm256_setzero_si256();
    for (int64_t sb = 8 * S; sb < 8 * S + 8; ++sb) {
      const __m256i cm0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.cm + sb * NR + 16 * h));
      const __m256i cm1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.cm + sb * NR + 16 * h + 8));
      for (int m = 0; m < M; ++m) {
        const __m256i qs = _mm256_set1_epi32(a.qs16[(t0 + m) * subs + sb]);
        const __m256i p0 = _mm256_madd_epi16(cm0, qs), p1 = _mm256_madd_epi16(cm1, qs);
        c[m][0] = _mm256_add_epi32(c[m][0], p0);
        c[m][1] = _mm256_add_epi32(c[m][1], p1);
      }
    }
    for (int m = 0; m < M; ++m) {
      const __m256i c0 = c[m][0], c1 = c[m][1];
      const __m256 dx = _mm256_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      if constexpr (OFF16 > 0) {
        // q3_k, q6_k (c_h = sc_h): the VNNI kernel's sums with the offset folded in, I - off16 C, exact in int32.
        const __m256i fold = _mm256_set1_epi32(OFF16);
        f[m][0] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(I[m][0], _mm256_mullo_epi32(c0, fold))), _mm256_mul_ps(d0, dx), f[m][0]);
        f[m][1] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(I[m][1], _mm256_mullo_epi32(c1, fold))), _mm256_mul_ps(d1, dx), f[m][1]);
        continue;
      }
      f[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[m][0]), _mm256_mul_ps(d0, dx), f[m][0]);
      f[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[m][1]), _mm256_mul_ps(d1, dx), f[m][1]);
      f[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c0), _mm256_mul_ps(mm0, dx), f[m][0]);
      f[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c1), _mm256_mul_ps(mm1, dx), f[m][1]);
    }
  }
  if (!sums) store_out<M>(f, out, t0, rows, r0 + 16 * h, nh);
}

// Packed q4_k (gemm_q8.h, gemm_q8_packs), rows 16 h .. 16 h + nh of the panel at pp: per sub-block s the
// 8 steps' int16 pair sums (the codes unpacked from nibbles by a mask and a shift), then vpmaddwd by the
// sub-block's integer scale sc_s into the super-block's int32 sums I (or, with `sums`, by ones: the
// sub-block's sum); vpmaddwd adds the minimums' products into C; per super-block f += f32(I) (d dx), then
// f += f32(C) (mm dx): the VNNI tile_packed's int32 sums and f32 steps, in its order.
template <int M>
void tile_packed(const uint8_t* pp, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int h, int nh, float* out, int32_t* sums) {
  const int64_t cols = a.cols, subs = cols / QK;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256 f[M][2];
  for (int m = 0; m < M; ++m) f[m][0] = f[m][1] = _mm256_setzero_ps();
  for (int64_t S = 0; S < cols / QK_K; ++S, pp += gemm_q8_packed_super(WeightType::q4_k)) {
    __m256i I[M][2];
    for (int m = 0; m < M; ++m) I[m][0] = I[m][1] = _mm256_setzero_si256();
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* up = pp + 512 * sb + 64 * h;
      const int8_t* xq = a.q.data() + t0 * cols + QK_K * S + QK * sb;
      if (h == 0) gemm_q8_prefetch_packed(pp, WeightType::q4_k, sb, 8);  // both halves' lines
      __m256i s16[M][2];
      for (int j = 0; j < 4; ++j) {  // step pair j: columns 8j .. 8j + 3 in the low nibbles, 8j + 4 .. 8j + 7 in the high
        const __m256i p0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + 128 * j));
        const __m256i p1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(up + 128 * j + 32));
        const __m256i w0 = _mm256_and_si256(p0, low4), w1 = _mm256_and_si256(p1, low4);
        const __m256i v0 = _mm256_and_si256(_mm256_srli_epi16(p0, 4), low4), v1 = _mm256_and_si256(_mm256_srli_epi16(p1, 4), low4);
        for (int m = 0; m < M; ++m) {
          int32_t lo, hi;
          std::memcpy(&lo, xq + m * cols + 8 * j, 4);
          std::memcpy(&hi, xq + m * cols + 8 * j + 4, 4);
          const __m256i xl = _mm256_set1_epi32(lo), xh = _mm256_set1_epi32(hi);
          // u <= 15: 8 steps' pair sums stay within 8 * 2 * 15 * 127 = 30480 (the header above).
          const __m256i q0 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, xl), _mm256_maddubs_epi16(v0, xh));
          const __m256i q1 = _mm256_add_epi16(_mm256_maddubs_epi16(w1, xl), _mm256_maddubs_epi16(v1, xh));
          s16[m][0] = j ? _mm256_add_epi16(s16[m][0], q0) : q0;
          s16[m][1] = j ? _mm256_add_epi16(s16[m][1], q1) : q1;
          in_register(s16[m][0]);
          in_register(s16[m][1]);
        }
      }
      if (sums) {
        __m256i acc[M][2];
        for (int m = 0; m < M; ++m) acc[m][0] = _mm256_madd_epi16(s16[m][0], ones), acc[m][1] = _mm256_madd_epi16(s16[m][1], ones);
        store_sums<M>(acc, sums, t0, rows, r0 + 16 * h, nh, subs, 8 * S + sb);
        continue;
      }
      // sc_s in both int16 halves of each row's lane.
      const __m256i c0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pp + 4096 + 32 * sb + 16 * h)));
      const __m256i c1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pp + 4096 + 32 * sb + 16 * h + 8)));
      const __m256i sc0 = _mm256_or_si256(c0, _mm256_slli_epi32(c0, 16)), sc1 = _mm256_or_si256(c1, _mm256_slli_epi32(c1, 16));
      for (int m = 0; m < M; ++m) {
        I[m][0] = _mm256_add_epi32(I[m][0], _mm256_madd_epi16(s16[m][0], sc0));
        I[m][1] = _mm256_add_epi32(I[m][1], _mm256_madd_epi16(s16[m][1], sc1));
      }
    }
    if (sums) continue;
    __m256i c[M][2];  // the minimums' products
    for (int m = 0; m < M; ++m) c[m][0] = c[m][1] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const uint8_t* mn = pp + 4352 + 64 * p + 32 * h;
      const __m256i m0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mn)));
      const __m256i m1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mn + 16)));
      for (int m = 0; m < M; ++m) {
        const __m256i qs = _mm256_set1_epi32(a.qs32[(t0 + m) * (subs / 2) + 4 * S + p]);
        c[m][0] = _mm256_add_epi32(c[m][0], _mm256_madd_epi16(m0, qs));
        c[m][1] = _mm256_add_epi32(c[m][1], _mm256_madd_epi16(m1, qs));
      }
    }
    const float* dm = reinterpret_cast<const float*>(pp + 4608) + 16 * h;
    const __m256 d0 = _mm256_loadu_ps(dm), d1 = _mm256_loadu_ps(dm + 8), mm0 = _mm256_loadu_ps(dm + NR), mm1 = _mm256_loadu_ps(dm + NR + 8);
    for (int m = 0; m < M; ++m) {
      const __m256 dx = _mm256_set1_ps(a.d[(t0 + m) * subs + 8 * S]);
      f[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[m][0]), _mm256_mul_ps(d0, dx), f[m][0]);
      f[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[m][1]), _mm256_mul_ps(d1, dx), f[m][1]);
      f[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[m][0]), _mm256_mul_ps(mm0, dx), f[m][0]);
      f[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[m][1]), _mm256_mul_ps(mm1, dx), f[m][1]);
    }
  }
  if (!sums) store_out<M>(f, out, t0, rows, r0 + 16 * h, nh);
}

template <int M = MR<Codes::u4>>
void tiles_packed(int m, const uint8_t* pp, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int h, int nh, float* out,
                  int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) return tile_packed<M>(pp, a, t0, rows, r0, h, nh, out, sums);
    tiles_packed<M - 1>(m, pp, a, t0, rows, r0, h, nh, out, sums);
  }
}

template <Codes C, bool MIN, bool SUPER, int M = MR<C>>
void tiles(int m, const Q8Panel& p, const Q8Acts& a, int64_t t0, int64_t rows, int64_t r0, int h, int nh, float* out, int32_t* sums) {
  if constexpr (M > 0) {
    if (m == M) {
      if constexpr (HALVES<C>) return tile_halves<M, C>(p, a, t0, rows, r0, h, nh, out, sums);
      else return tile<M, C, MIN, SUPER>(p, a, t0, rows, r0, h, nh, out, sums);
    }
    tiles<C, MIN, SUPER, M - 1>(m, p, a, t0, rows, r0, h, nh, out, sums);
  }
}

// One panel by activation rows [t_begin, t_end): each half panel (while it has weight rows) by MR<C> rows at a time.
template <Codes C, bool MIN, bool SUPER = false>
void panel_avx2(WeightType, const Q8Panel& p, const Q8Acts& a, int64_t t_begin, int64_t t_end, int64_t rows, int64_t r0, int nr, float* out,
                int32_t* sums) {
  for (int h = 0; 16 * h < nr; ++h) {
    const int nh = nr - 16 * h < 16 ? nr - 16 * h : 16;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += MR<C>)
      tiles<C, MIN, SUPER>(static_cast<int>(t_end - t0 < MR<C> ? t_end - t0 : MR<C>), p, a, t0, rows, r0, h, nh, out, sums);
  }
}

// The panel kernel of block type T, from its traits: its codes' width, a minimum, and whether its
// sub-blocks of 32 share a super-block's scale (q4_k, q5_k, iq4_xs; q2_k, q3_k, q6_k go by half-blocks).
template <WeightType T>
constexpr Codes codes_of() {
  constexpr BlockTraits b = block_traits(T);
  return b.signed_codes     ? Codes::s8
         : b.code_bits == 4 ? Codes::u4
         : b.code_bits == 5 ? Codes::u5
         : b.code_bits == 2 ? Codes::u2
         : b.code_bits == 3 ? Codes::u3
                            : Codes::u6;
}
struct PanelEntry {
  int mr;
  Q8PanelKernel kernel;
};
constexpr PerWeightType<PanelEntry> PANELS = per_weight_type<PanelEntry>([](auto type) {
  constexpr WeightType T = decltype(type)::value;
  if constexpr (block_traits(T).gemm_q8) {
    constexpr Codes C = codes_of<T>();
    constexpr bool super = block_traits(T).elements == QK_K && block_traits(T).sub_block == QK;
    return PanelEntry{MR<C>, panel_avx2<C, block_traits(T).has_min, super>};
  } else {
    return PanelEntry{0, nullptr};
  }
});

// gemm_q8_avx2, or with `sums` its integer sums (tile); t one of gemm_q8_supports.
void run(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end, uint8_t* scratch,
         int32_t* sums, const uint8_t* packed = nullptr) {
  const PanelEntry& p = PANELS[static_cast<int>(t)];
  gemm_q8_panels(t, w, a, rows, out, row_begin, row_end, scratch, p.mr, p.kernel, sums, packed);
}

}  // namespace

void gemm_q8_avx2(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                  uint8_t* scratch) {
  run(t, w, a, rows, out, row_begin, row_end, scratch, nullptr);
}

void gemm_q8_avx2_packed(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                         uint8_t* scratch, int32_t* sums) {
  // q6_k: its panels unpacked from the packed weights, then the panels' kernel.
  if (t == WeightType::q6_k) return run(t, nullptr, a, rows, out, row_begin, row_end, scratch, sums, packed);
  gemm_q8_packed_blocks(t, packed, a, row_begin, row_end, MR<Codes::u4>, [&](const uint8_t* pp, int64_t t0, int m, int64_t r0, int nr) {
    for (int h = 0; 16 * h < nr; ++h) tiles_packed(m, pp, a, t0, rows, r0, h, nr - 16 * h < 16 ? nr - 16 * h : 16, out, sums);
  });
}

void gemm_q8_avx2_sums(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums) {
  std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_scratch_bytes(t, rows, a.cols)));
  run(t, w, a, rows, nullptr, 0, rows, scratch.data(), sums);
}

}  // namespace sparq
