// INT4 'int8' path with AMX: the int32 group sums of 16 activation rows x 16
// weight rows come from one tile dot product (_tile_dpbssd, signed x signed
// int8 -> int32) per K bytes of the group; the f32 epilogue then follows the
// reference step by step, so the covered block is bit-identical to it.
//
// Only whole 16 x 16 blocks run here; basic_dispatch.cc sends the tails (n or
// rows not a multiple of 16) to the VNNI / scalar kernels. Nothing in this file
// may run unless cpu_features() reports amx_tile and amx_int8 (CPU support AND
// Linux's arch_prctl permission): an AMX instruction without them is SIGILL.
//
// Tiles (palette 1), for K = 64 bytes per step if the group is a multiple of
// 64, else 32:
//   tmm0 C: 16 rows (activation rows t0..t0+15) x 16 int32 (weight rows r0..r0+15)
//   tmm1 A: 16 rows x K int8: the activation codes q_x of K consecutive columns,
//           loaded in place from Int8Acts::q (row stride = cols)
//   tmm2 B: K/4 rows x 64 bytes, the "VNNI" layout _tile_dpbssd wants:
//           B[k][4n + i] = q_w of weight row r0 + n at column 4k + i, so that
//           C[t][n] += sum_k sum_i A[t][4k + i] * B[k][4n + i].
// The weight block is unpacked once into that layout for all its columns: as
// int32 words, wbuf[d * 16 + n] holds columns 4d..4d+3 of weight row r0 + n
// (the nibbles sign-extended to int8; the zero point is NOT subtracted: as in
// the reference, isum = S_wx - zero * S_x, with S_x = Int8Acts::qsum).
// No overflow: |S_wx| <= 8 * 127 * group fits int32 for any group of < 2^21.
#include "kernels/x86/intrinsics.h"

#include <vector>

#include "ops/int4.h"

namespace sparq {
namespace {

constexpr int B16 = 16;  // the block edge: activation rows and weight rows per tile
constexpr int NEAREST = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// The 64-byte tile configuration of palette 1 (Intel SDM, LDTILECFG).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

int64_t step_bytes(int64_t group) { return group % 64 == 0 ? 64 : 32; }

// Loads the configuration for K-byte steps; _tile_release() undoes it.
void configure_tiles(int64_t k) {
  TileConfig cfg;
  cfg.rows[0] = B16, cfg.colsb[0] = B16 * 4;                          // C
  cfg.rows[1] = B16, cfg.colsb[1] = static_cast<uint16_t>(k);         // A
  cfg.rows[2] = static_cast<uint8_t>(k / 4), cfg.colsb[2] = B16 * 4;  // B
  _tile_loadconfig(&cfg);
}

// Weight rows r0..r0+15 -> wbuf (cols / 4 words x 16), the B layout above.
void unpack_block(const Int4View& w, int64_t r0, int32_t* wbuf) {
  const __m512i low = _mm512_set1_epi16(0x0f), eight = _mm512_set1_epi8(8);
  // Word d of row n goes to wbuf[d * 16 + n]: a scatter with a 16-word stride.
  const __m512i stride =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(B16));
  for (int n = 0; n < B16; ++n) {
    const uint8_t* row = w.packed + (r0 + n) * w.cols / 2;
    for (int64_t j = 0; j < w.cols; j += 64) {  // 64 columns = 32 packed bytes = 16 words
      // cols is a multiple of 32 (int4_amx_supports): a last half step takes 16 bytes, 8 words.
      const bool half = j + 64 > w.cols;
      // Each byte widened to 16 bits: low nibble (column 2j) to the low byte, high nibble to the high byte.
      const __m512i b = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(half ? 0xffffu : ~0u, row + j / 2));
      const __m512i pairs = _mm512_or_si512(_mm512_and_si512(b, low), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(b, 4), low), 8));
      const __m512i q = _mm512_sub_epi8(_mm512_xor_si512(pairs, eight), eight);  // (n ^ 8) - 8 sign-extends each nibble
      _mm512_mask_i32scatter_epi32(wbuf + (j / 4) * B16 + n, half ? 0x00ff : 0xffff, stride, q, 4);
    }
  }
}

// The int32 S_wx of activation rows t0..t0+15 x the unpacked weight block, every group:
// sums[(g * 16 + t) * 16 + n]. Tiles must be configured for step_bytes(w.group).
void block_sums(const Int4View& w, const Int8Acts& a, int64_t t0, const int32_t* wbuf, int32_t* sums) {
  const int64_t k = step_bytes(w.group), steps = w.group / k;
  const int8_t* x = a.q.data() + t0 * a.cols;
  for (int64_t g = 0; g < w.groups(); ++g) {
    _tile_zero(0);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t col = g * w.group + s * k;
      _tile_loadd(1, x + col, a.cols);
      _tile_loadd(2, wbuf + (col / 4) * B16, B16 * 4);
      _tile_dpbssd(0, 1, 2);
    }
    _tile_stored(0, sums + g * B16 * B16, B16 * 4);
  }
}

// Calls fn(r0, t0, sums) for every whole 16 x 16 block, sums as block_sums leaves them.
template <class Fn>
void for_each_block(const Int4View& w, const Int8Acts& a, Fn fn) {
  std::vector<int32_t> wbuf(static_cast<size_t>(w.cols / 4 * B16));
  std::vector<int32_t> sums(static_cast<size_t>(w.groups() * B16 * B16));
  configure_tiles(step_bytes(w.group));
  for (int64_t r0 = 0; r0 + B16 <= w.rows; r0 += B16) {
    unpack_block(w, r0, wbuf.data());
    for (int64_t t0 = 0; t0 + B16 <= a.n; t0 += B16) {
      block_sums(w, a, t0, wbuf.data(), sums.data());
      fn(r0, t0, sums.data());
    }
  }
  _tile_release();
}

}  // namespace

bool int4_amx_supports(int64_t group) { return group % 32 == 0; }

void matmul_int4_int8_amx(const Int4View& w, const Int8Acts& a, float* out) {
  const int64_t groups = w.groups();
  // The block's weight scales and zeros, group-major: 16 lanes = 16 weight rows.
  std::vector<float> wscale(static_cast<size_t>(groups * B16));
  std::vector<int32_t> wzero(wscale.size());
  int64_t loaded = -1;
  for_each_block(w, a, [&](int64_t r0, int64_t t0, const int32_t* sums) {
    if (loaded != r0) {
      for (int n = 0; n < B16; ++n)
        for (int64_t g = 0; g < groups; ++g) {
          wscale[g * B16 + n] = w.scales[(r0 + n) * groups + g];
          wzero[g * B16 + n] = w.zeros[(r0 + n) * groups + g];
        }
      loaded = r0;
    }
    // The reference's f32 steps, 16 weight rows per vector: groups in order,
    // acc = acc + f32(isum) * (scale_w * scale_x), a separate multiply and add. The
    // _round_ forms (round to nearest, as MXCSR's default) are builtins GCC never
    // contracts into an FMA; plain _mm512_mul_ps / _add_ps are vector operators it
    // would fuse (-mavx512f implies FMA), which changes the last bit.
    __m512 acc[B16];
    for (int t = 0; t < B16; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m512 sw = _mm512_loadu_ps(wscale.data() + g * B16);
      const __m512i zero = _mm512_loadu_si512(wzero.data() + g * B16);
      for (int t = 0; t < B16; ++t) {
        const int64_t ag = (t0 + t) * groups + g;
        __m512i isum = _mm512_loadu_si512(sums + (g * B16 + t) * B16);
        if (!w.symmetric) isum = _mm512_sub_epi32(isum, _mm512_mullo_epi32(zero, _mm512_set1_epi32(a.qsum[ag])));
        const __m512 scale = _mm512_mul_round_ps(sw, _mm512_set1_ps(a.scale[ag]), NEAREST);
        acc[t] = _mm512_add_round_ps(acc[t], _mm512_mul_round_ps(_mm512_cvtepi32_ps(isum), scale, NEAREST), NEAREST);
      }
    }
    for (int t = 0; t < B16; ++t) _mm512_storeu_ps(out + (t0 + t) * w.rows + r0, acc[t]);
  });
}

void int4_group_sums_amx(const Int4View& w, const Int8Acts& a, int32_t* out) {
  const int64_t groups = w.groups();
  for_each_block(w, a, [&](int64_t r0, int64_t t0, const int32_t* sums) {
    for (int64_t g = 0; g < groups; ++g)
      for (int t = 0; t < B16; ++t)
        for (int n = 0; n < B16; ++n) {
          const int64_t r = r0 + n;
          out[((t0 + t) * w.rows + r) * groups + g] =
              sums[(g * B16 + t) * B16 + n] - w.zeros[r * groups + g] * a.qsum[(t0 + t) * groups + g];
        }
  });
}

}  // namespace sparq
