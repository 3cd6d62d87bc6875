// The engine's group-wise INT4 matrix (core/int4-matrix.ts, SPEC 5): signed
// nibbles q in [-8, 7], element 2j in the low nibble of byte j and 2j + 1 in
// the high one; per group an f32 scale and an int8 zero; w = (q - zero) * scale.
#pragma once
#include <cstdint>
#include <vector>

namespace sparq {

struct Int4View {
  const uint8_t* packed;  // (rows, cols / 2)
  const float* scales;    // (rows, cols / group)
  const int8_t* zeros;    // (rows, cols / group)
  int64_t rows, cols, group;
  bool symmetric;  // all zeros are 0 (Int4Matrix.symmetric): the VNNI kernel then skips them
  int64_t groups() const { return cols / group; }
};

// Activations quantized for the 'int8' path, per group of the weight's size:
// scale = max(amax / 127, 2^-126), q = roundf(x / scale) (halves away from zero), all f32.
struct Int8Acts {
  int64_t n = 0, cols = 0, group = 0;
  std::vector<int8_t> q;      // (n, cols)
  std::vector<float> scale;   // (n, cols / group)
  std::vector<int32_t> qsum;  // (n, cols / group): sum of q over the group
};

// x (rows, cols) f32 -> packed nibbles, scales, zeros, rows [row_begin, row_end).
void quantize_int4_ref(const float* x, int64_t rows, int64_t cols, int64_t group, bool symmetric, uint8_t* packed, float* scales,
                       int8_t* zeros, int64_t row_begin, int64_t row_end);
// w -> out (rows, cols) f32.
void dequantize_int4_ref(const Int4View& w, float* out, int64_t row_begin, int64_t row_end);

// Scalar, shared by every kernel path so the int32 sums never depend on the path.
void quantize_acts(const float* x, int64_t n, int64_t cols, int64_t group, Int8Acts& acts);

// x (n, cols) @ w^T -> out (n, rows); only rows [row_begin, row_end) of every output row are written.
void matmul_int4_dequant_ref(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_dequant_avx2(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_dequant_avx512(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_int8_ref(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
bool int4_vnni_supports(int64_t group, int64_t cols);  // group sizes the VNNI lane layout handles
void matmul_int4_int8_vnni(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
// AMX (int4_amx.cc): only whole 16 x 16 blocks, out[t, r] for t < n / 16 * 16 and r < rows / 16 * 16
// (the caller does the tails). Call only when cpu_features().amx_tile && amx_int8: else SIGILL.
bool int4_amx_supports(int64_t group);  // groups of a multiple of 32 columns
void matmul_int4_int8_amx(const Int4View& w, const Int8Acts& a, float* out);

// The int32 group sums sum_j (q_w - zero) * q_x -> sums (n, rows, groups), for tests.
void int4_group_sums_ref(const Int4View& w, const Int8Acts& a, int32_t* sums);
void int4_group_sums_vnni(const Int4View& w, const Int8Acts& a, int32_t* sums);
void int4_group_sums_amx(const Int4View& w, const Int8Acts& a, int32_t* sums);  // whole blocks only, as above

// Dispatch by kernel_path(); int8 = true picks the 'int8' path.
void matmul_int4(const Int4View& w, const float* x, int64_t n, float* out, bool int8);
void int4_group_sums(const Int4View& w, const float* x, int64_t n, int32_t* sums);

// The signed nibble of byte b: (n ^ 8) - 8 sign-extends four bits.
inline int nibble_lo(uint8_t b) { return ((b & 0x0f) ^ 8) - 8; }
inline int nibble_hi(uint8_t b) { return ((b >> 4) ^ 8) - 8; }

}  // namespace sparq
