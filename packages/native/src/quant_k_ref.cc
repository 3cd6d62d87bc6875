// Scalar dequantizers of the block types native only reads: q5_0, q5_1 and
// iq4_nl (32 elements), the K-quants (q2_k .. q6_k) and iq4_xs (256-element
// super-blocks). ggml's layouts (core/dtype.ts draws each; the reference's
// qx-0.ts, qx-1.ts, q2-k.ts, q3-k.ts, qx-k.ts, q6-k.ts and iq4.ts read them bit
// by bit), and the reference's values: every scale product d * sc and dl * q is
// exact in f32 (an f16 times a code of at most 8 bits), so the one rounding is
// the final subtraction of the minimum, as there.
#include "half.h"
#include "quant.h"

namespace sparq {
namespace {

// Bits 2k, 2k + 1 of byte 32 * (e / 128) + e % 32: element e's two-bit code (q2_k's codes, q3_k's
// low bits, q6_k's high bits), where k = (e / 32) % 4.
int crumb(const uint8_t* p, int e) { return (p[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3; }
// Bit e / 32 of byte e % 32: element e's bit in a 32-byte plane (q3_k's hmask, q5_k's qh).
int plane_bit(const uint8_t* p, int e) { return (p[e & 31] >> (e >> 5)) & 1; }
// q4_k / q5_k: element e's low four bits, in byte 32 * (e / 64) + e % 32, high nibble when e % 64 >= 32.
int nibble_k(const uint8_t* p, int e) {
  const uint8_t b = p[32 * (e >> 6) + (e & 31)];
  return (e & 32) ? b >> 4 : b & 0x0f;
}

// The decoders, as decode_read_only (quant.h) calls them.
struct ScalarBlocks {
// q5_0: d | qh (bit j: element j's fifth bit) | qs[16]; q5_1: d | m | qh | qs. Byte j of qs holds
// elements j (low nibble) and j + 16 (high nibble). q d is exact (an f16 times 5 bits), so q5_1's
// q d + m rounds once, as the reference's f32(q * d + m).
static void q5(const uint8_t* x, float* y, bool with_min) {
  const float d = fp16_to_fp32_ref(load_u16(x)), m = with_min ? fp16_to_fp32_ref(load_u16(x + 2)) : 0.0f;
  const uint8_t* qh = x + (with_min ? 4 : 2);
  const uint8_t* qs = qh + 4;
  for (int j = 0; j < QK; ++j) {
    const int q = (j < QK / 2 ? qs[j] & 0x0f : qs[j - QK / 2] >> 4) | (((qh[j >> 3] >> (j & 7)) & 1) << 4);
    y[j] = with_min ? static_cast<float>(q) * d + m : static_cast<float>(q - 16) * d;
  }
}

// iq4_nl: d | qs[16], the nibbles (elements j, j + 16 in byte j) indexing the non-linear levels.
static void iq4_nl(const uint8_t* x, float* y) {
  const float d = fp16_to_fp32_ref(load_u16(x));
  for (int j = 0; j < QK / 2; ++j) {
    y[j] = d * static_cast<float>(IQ4_LEVELS[x[2 + j] & 0x0f]);
    y[j + QK / 2] = d * static_cast<float>(IQ4_LEVELS[x[2 + j] >> 4]);
  }
}

// q2_k: scales[16] (low nibble scale, high nibble min) | qs[64] | d | dmin; 16 sub-blocks of 16.
static void q2_k(const uint8_t* x, float* y) {
  const float d = fp16_to_fp32_ref(load_u16(x + 80)), dmin = fp16_to_fp32_ref(load_u16(x + 82));
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(x[s] & 0x0f), ml = dmin * static_cast<float>(x[s] >> 4);
    for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * static_cast<float>(crumb(x + 16, e)) - ml;
  }
}

// q3_k: hmask[32] | qs[64] | scales[12] (6-bit, + 32) | d; 16 sub-blocks of 16, codes q + 4 in 0..7.
static void q3_k(const uint8_t* x, float* y) {
  const uint8_t* sc = x + 96;
  const float d = fp16_to_fp32_ref(load_u16(x + 108));
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? sc[s] & 0x0f : sc[s - 8] >> 4;
    const int high = (sc[8 + s % 4] >> (2 * (s >> 2))) & 3;
    const float dl = d * static_cast<float>((low | (high << 4)) - 32);
    for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * static_cast<float>((crumb(x + 32, e) | (plane_bit(x, e) << 2)) - 4);
  }
}

// q4_k (bits 4) and q5_k (bits 5): d | dmin | scales[12] | (qh[32]) | qs[128]; 8 sub-blocks of 32.
static void qx_k(const uint8_t* x, float* y, bool five) {
  const float d = fp16_to_fp32_ref(load_u16(x)), dmin = fp16_to_fp32_ref(load_u16(x + 2));
  const uint8_t* qs = x + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    int sc, mn;
    scale_min_k(x + 4, s, sc, mn);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
    for (int e = 32 * s; e < 32 * s + 32; ++e) {
      const int q = nibble_k(qs, e) | (five ? plane_bit(x + 16, e) << 4 : 0);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

// q6_k: ql[128] | qh[64] | scales[16] int8 | d; 16 sub-blocks of 16, codes q + 32 in 0..63.
static void q6_k(const uint8_t* x, float* y) {
  const float d = fp16_to_fp32_ref(load_u16(x + 208));
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(static_cast<int8_t>(x[192 + s]));
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      // Low nibble: byte 64 * (e / 128) + 32 * (k % 2) + e % 32, the high one when k >= 2 (k = (e / 32) % 4).
      const int k = (e >> 5) & 3;
      const uint8_t b = x[64 * (e >> 7) + 32 * (k & 1) + (e & 31)];
      const int q = ((k >= 2 ? b >> 4 : b & 0x0f) | (crumb(x + 128, e) << 4)) - 32;
      y[e] = dl * static_cast<float>(q);
    }
  }
}

// iq4_xs: d | scales_h u16 | scales_l[4] | qs[128]; 8 sub-blocks of 32 with 6-bit scales (+ 32),
// each an iq4_nl block's nibbles (elements j and j + 16 in byte j) into the non-linear levels.
static void iq4_xs(const uint8_t* x, float* y) {
  const float d = fp16_to_fp32_ref(load_u16(x));
  const int scales_h = load_u16(x + 2);
  for (int s = 0; s < 8; ++s) {
    const int low = (x[4 + (s >> 1)] >> (4 * (s & 1))) & 0x0f;
    const float dl = d * static_cast<float>((low | (((scales_h >> (2 * s)) & 3) << 4)) - 32);
    const uint8_t* qs = x + 8 + 16 * s;
    for (int j = 0; j < 16; ++j) {
      y[32 * s + j] = dl * static_cast<float>(IQ4_LEVELS[qs[j] & 0x0f]);
      y[32 * s + j + 16] = dl * static_cast<float>(IQ4_LEVELS[qs[j] >> 4]);
    }
  }
}

};

}  // namespace

void dequantize_read_only_block(WeightType t, const uint8_t* x, float* y) { decode_read_only<ScalarBlocks>(t, x, y); }

}  // namespace sparq
