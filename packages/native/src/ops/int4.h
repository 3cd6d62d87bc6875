// The engine's group-wise INT4 matrix (core/int4-matrix.ts, spec.md §5): signed
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
// The SIMD kernels read them rearranged for packed nibbles: low nibbles hold the even
// elements and high nibbles the odd ones, so q is also split into even and odd
// halves; and an int32 lane of their dot products covers 8 consecutive elements
// (lane l: elements 8l .. 8l + 7), whose sums and group scales are kept per lane.
struct Int8Acts {
  int64_t n = 0, cols = 0, group = 0;
  std::vector<int8_t> q;           // (n, cols)
  std::vector<float> scale;        // (n, cols / group)
  std::vector<int32_t> qsum;       // (n, cols / group): sum of q over the group
  std::vector<int8_t> even, odd;   // (n, cols / 2): q[2j], q[2j + 1]
  std::vector<int32_t> lane_sum;   // (n, cols / 8): sum of q over the lane's 8 elements
  std::vector<int32_t> lane_bias;  // (n, cols / 8): -8 * lane_sum (packed nibbles are q + 8)
  std::vector<float> lane_scale;   // (n, cols / 8): scale of the group of the lane's first element
  int64_t half() const { return cols / 2; }
  int64_t lanes() const { return cols / 8; }
};

// x (rows, cols) f32 -> packed nibbles, scales, zeros, rows [row_begin, row_end).
void quantize_int4_ref(const float* x, int64_t rows, int64_t cols, int64_t group, bool symmetric, uint8_t* packed, float* scales,
                       int8_t* zeros, int64_t row_begin, int64_t row_end);
// w -> out (rows, cols) f32.
void dequantize_int4_ref(const Int4View& w, float* out, int64_t row_begin, int64_t row_end);

// 2^-126, the floor on every quantization scale (the reference's).
constexpr float QUANT_MIN_SCALE = 1.17549435e-38f;
// x[0 .. len) -> q: scale = max(amax / 127, 2^-126), q = roundf(x / scale) (halves away from
// zero); returns the scale, sum gets sum q. Every 8-bit activation quantizer uses it (the blocked
// products' quantize_q8_acts as its AVX2 twin).
float quantize_int8_group(const float* x, int64_t len, int8_t* q, int32_t& sum);
// Scalar, shared by every kernel path so the int32 sums never depend on the path.
void quantize_acts(const float* x, int64_t n, int64_t cols, int64_t group, Int8Acts& acts);

// x (n, cols) @ w^T -> out (n, rows); only rows [row_begin, row_end) of every output row are written.
void matmul_int4_dequant_ref(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_dequant_avx2(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_dequant_avx512(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
// The cache-blocked 'dequant' product for many activation rows (gemm_simd.h).
void gemm_int4_avx2(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void gemm_int4_avx512(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
void matmul_int4_int8_ref(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
bool int4_vnni_supports(int64_t group, int64_t cols);  // group sizes the VNNI lane layout handles
void matmul_int4_int8_vnni(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
// AVX2 (int4_avx2.cc): the same lanes from vpmaddubsw + vpmaddwd, 64 elements per step.
bool int4_avx2_int8_supports(int64_t group, int64_t cols);
void matmul_int4_int8_avx2(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
// sum over columns [from, cols) of (q_w - zero) * q_x, scaled per group in f32, for weight row r and
// activation row t: the scalar tail of the SIMD 'int8' kernels.
float int4_int8_tail(const Int4View& w, const Int8Acts& a, int64_t r, int64_t t, int64_t from);
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
