// Bindings of the basic ops: argument checks and buffer-length re-checks, then
// one call into the dispatchers (basic_dispatch.cc). Offsets and counts are in
// elements, as in core; block tensors' element offsets become bytes here.
// Every bad call throws a JS TypeError / RangeError, never aborts.
#include <algorithm>
#include <string>

#include "ops/attention.h"
#include "ops/basic_dispatch.h"
#include "bindings/bindings.h"
#include "common/block_codes.h"
#include "bindings/common.h"
#include "ops/gemm_q8.h"
#include "ops/int4.h"
#include "ops/matvec.h"
#include "common/quant.h"
#include "ops/rowops.h"

namespace sparq {
namespace {

using Call = const Napi::CallbackInfo&;

[[noreturn]] void range_error(Call call, const std::string& op, const std::string& what) {
  throw Napi::RangeError::New(call.Env(), op + ": " + what);
}

// Elements [offset, offset + count) of argument `index` (common.h's typed_span).
template <typename T>
T* span(Call call, int index, int64_t offset, int64_t count, const char* op, const char* name) {
  return typed_span<T>(call[index], offset, count, op, name);
}

int64_t arg(Call call, int index, const char* op, const char* name) {
  const int64_t v = int_arg(call[index], op, name);
  // Keeps every product of two sizes far from int64 overflow.
  if (v > (int64_t{1} << 40)) range_error(call, op, std::string(name) + " " + std::to_string(v) + " is too large");
  return v;
}

int64_t product(Call call, const char* op, int64_t a, int64_t b) {
  int64_t p;
  if (__builtin_mul_overflow(a, b, &p) || p > (int64_t{1} << 48)) range_error(call, op, "sizes overflow");
  return p;
}

WeightType weight_type(Call call, int index, const char* op, bool blocks_only) {
  const int64_t code = int_arg(call[index], op, "dtype code");
  const int64_t first = blocks_only ? static_cast<int64_t>(WeightType::q4_0) : 0, last = WEIGHT_TYPE_COUNT - 1;
  if (code < first || code > last)
    range_error(call, op, "dtype code " + std::to_string(code) + ", expected " + std::to_string(first) + ".." + std::to_string(last));
  return static_cast<WeightType>(code);
}

// Block types store `count` elements (whole blocks) from element `offset` (a block boundary).
const uint8_t* blocks_at(Call call, int index, WeightType t, int64_t offset, int64_t count, const char* op, const char* name) {
  const int64_t block = block_shape(t).elements;
  if (offset % block != 0 || count % block != 0) {
    range_error(call, op, std::string(name) + " offset and size must be whole " + std::to_string(block) + "-element blocks");
  }
  return span<uint8_t>(call, index, weight_bytes(t, offset), weight_bytes(t, count), op, name);
}

// quantize(dtype, out u8, outOffset, x f32, xOffset, count)
Napi::Value quantize(Call call) {
  const char* op = "quantize";
  const WeightType t = weight_type(call, 0, op, true);
  if (!is_quantizable(t))
    range_error(call, op, "dtype code " + std::to_string(static_cast<int>(t)) + ": native quantizes q4_0, q4_1 and q8_0 (codes 3..5) only");
  const int64_t out_off = arg(call, 2, op, "outOffset"), x_off = arg(call, 4, op, "xOffset"), count = arg(call, 5, op, "count");
  uint8_t* out = const_cast<uint8_t*>(blocks_at(call, 1, t, out_off, count, op, "out"));
  const float* x = span<float>(call, 3, x_off, count, op, "x");
  quantize_blocks(t, x, out, count / QK);
  return call.Env().Undefined();
}

// dequantize(dtype, out f32, outOffset, x u8, xOffset, count)
Napi::Value dequantize(Call call) {
  const char* op = "dequantize";
  const WeightType t = weight_type(call, 0, op, true);
  const int64_t out_off = arg(call, 2, op, "outOffset"), x_off = arg(call, 4, op, "xOffset"), count = arg(call, 5, op, "count");
  float* out = span<float>(call, 1, out_off, count, op, "out");
  const uint8_t* x = blocks_at(call, 3, t, x_off, count, op, "x");
  dequantize_blocks(t, x, out, count / block_shape(t).elements);
  return call.Env().Undefined();
}

// Int4Matrix parts at arguments [first, first + 7): packed, scales, zeros, rows, cols, group, symmetric.
struct Int4Args {
  uint8_t* packed;
  float* scales;
  int8_t* zeros;
  Int4View view;
};

Int4Args int4_args(Call call, int first, const char* op) {
  const int64_t rows = arg(call, first + 3, op, "rows"), cols = arg(call, first + 4, op, "cols"),
                group = arg(call, first + 5, op, "groupSize");
  if (rows < 1 || cols < 2 || cols % 2 != 0 || group < 2 || group % 2 != 0 || cols % group != 0) {
    range_error(call, op,
                "Int4Matrix shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "] with group " + std::to_string(group) +
                    ", expected rows >= 1, an even cols and an even group dividing it");
  }
  const int64_t groups = product(call, op, rows, cols / group);
  Int4Args a;
  a.packed = span<uint8_t>(call, first, 0, product(call, op, rows, cols / 2), op, "packed");
  a.scales = span<float>(call, first + 1, 0, groups, op, "scales");
  a.zeros = span<int8_t>(call, first + 2, 0, groups, op, "zeros");
  a.view = Int4View{a.packed, a.scales, a.zeros, rows, cols, group, call[first + 6].ToBoolean()};
  return a;
}

// quantizeInt4(packed, scales, zeros, rows, cols, group, symmetric, x f32, xOffset)
Napi::Value quantize_int4(Call call) {
  const char* op = "quantizeInt4";
  const Int4Args w = int4_args(call, 0, op);
  const float* x = span<float>(call, 7, arg(call, 8, op, "xOffset"), w.view.rows * w.view.cols, op, "x");
  quantize_int4_ref(x, w.view.rows, w.view.cols, w.view.group, w.view.symmetric, w.packed, w.scales, w.zeros, 0, w.view.rows);
  return call.Env().Undefined();
}

// dequantizeInt4(out f32, outOffset, packed, scales, zeros, rows, cols, group, symmetric)
Napi::Value dequantize_int4(Call call) {
  const char* op = "dequantizeInt4";
  const Int4Args w = int4_args(call, 2, op);
  float* out = span<float>(call, 0, arg(call, 1, op, "outOffset"), w.view.rows * w.view.cols, op, "out");
  dequantize_int4_ref(w.view, out, 0, w.view.rows);
  return call.Env().Undefined();
}

// The weight argument of matmul and q8BlockSums: `count` elements of w from wOffset, as bytes.
const uint8_t* weight_arg(Call call, int index, WeightType t, int64_t offset, int64_t count, int64_t cols, const char* op) {
  if (t == WeightType::f32) return reinterpret_cast<const uint8_t*>(span<float>(call, index, offset, count, op, "w"));
  if (t == WeightType::f16 || t == WeightType::bf16)
    return reinterpret_cast<const uint8_t*>(span<uint16_t>(call, index, offset, count, op, "w"));
  const int64_t block = block_shape(t).elements;
  if (cols % block != 0)
    range_error(call, op, "cols " + std::to_string(cols) + " of a block-quantized w must be a multiple of " + std::to_string(block));
  return blocks_at(call, index, t, offset, count, op, "w");
}

// The repacked weights of argument `index` (a Uint8Array of gemm_q8_packed_bytes), or nullptr if it is
// undefined or the type is not repacked.
const uint8_t* packed_arg(Call call, int index, WeightType t, int64_t rows, int64_t cols, const char* op) {
  if (call[index].IsUndefined() || call[index].IsNull() || !gemm_q8_packs(t)) return nullptr;
  return span<uint8_t>(call, index, 0, gemm_q8_packed_bytes(t, rows, cols), op, "packed");
}

// matmul(dtype, out f32, outOffset, w, wOffset, x f32, xOffset, n, rows, cols, int8, packed?): x (n, cols) @ w^T -> out (n, rows),
// int8 = true: the 'int8' product for block weights (matvec_q8.h); packed: w as q8Repack laid it out.
Napi::Value matmul_binding(Call call) {
  const char* op = "matmul";
  const WeightType t = weight_type(call, 0, op, false);
  const int64_t n = arg(call, 7, op, "n"), rows = arg(call, 8, op, "rows"), cols = arg(call, 9, op, "cols");
  float* out = span<float>(call, 1, arg(call, 2, op, "outOffset"), product(call, op, n, rows), op, "out");
  const float* x = span<float>(call, 5, arg(call, 6, op, "xOffset"), product(call, op, n, cols), op, "x");
  const uint8_t* w = weight_arg(call, 3, t, arg(call, 4, op, "wOffset"), product(call, op, rows, cols), cols, op);
  matmul(t, w, x, n, rows, cols, out, call[10].ToBoolean(), packed_arg(call, 11, t, rows, cols, op));
  return call.Env().Undefined();
}

// q8PackedBytes(dtype, rows, cols) -> the bytes q8Repack writes on the current path, 0 if it does not repack dtype.
Napi::Value q8_packed_bytes_binding(Call call) {
  const char* op = "q8PackedBytes";
  const WeightType t = weight_type(call, 0, op, false);
  const int64_t rows = arg(call, 1, op, "rows"), cols = arg(call, 2, op, "cols");
  if (is_block_type(t) && cols % block_shape(t).elements != 0)
    range_error(
        call, op,
        "cols " + std::to_string(cols) + " of a block-quantized w must be a multiple of " + std::to_string(block_shape(t).elements));
  return Napi::Number::New(call.Env(), static_cast<double>(q8_packed_bytes(t, rows, cols)));
}

// q8Repack(dtype, packed u8 (q8PackedBytes), w, wOffset, rows, cols): w repacked for matmul's blocked 'int8' product.
Napi::Value q8_repack_binding(Call call) {
  const char* op = "q8Repack";
  const WeightType t = weight_type(call, 0, op, true);
  const int64_t rows = arg(call, 4, op, "rows"), cols = arg(call, 5, op, "cols");
  const uint8_t* w = weight_arg(call, 2, t, arg(call, 3, op, "wOffset"), product(call, op, rows, cols), cols, op);
  const int64_t bytes = q8_packed_bytes(t, rows, cols);
  if (bytes == 0) range_error(call, op, "dtype code " + std::to_string(static_cast<int>(t)) + " is not repacked on this kernel path");
  q8_repack(t, w, rows, cols, span<uint8_t>(call, 1, 0, bytes, op, "packed"));
  return call.Env().Undefined();
}

// q8BlockSums(dtype, sums i32 (n, rows, cols / sub-block), w, wOffset, x f32, xOffset, n, rows, cols, packed?) -> the
// kernel's name (packed: over w repacked, as matmul with q8Repack's weights): the integer sums of matmul's 'int8' product (basic_dispatch.h). Tests only.
Napi::Value q8_block_sums_binding(Call call) {
  const char* op = "q8BlockSums";
  const WeightType t = weight_type(call, 0, op, true);
  const int64_t n = arg(call, 6, op, "n"), rows = arg(call, 7, op, "rows"), cols = arg(call, 8, op, "cols");
  const float* x = span<float>(call, 4, arg(call, 5, op, "xOffset"), product(call, op, n, cols), op, "x");
  const uint8_t* w = weight_arg(call, 2, t, arg(call, 3, op, "wOffset"), product(call, op, rows, cols), cols, op);
  int32_t* sums = span<int32_t>(call, 1, 0, product(call, op, product(call, op, n, rows), cols / sub_block_elements(t)), op, "sums");
  return Napi::String::New(call.Env(), q8_block_sums(t, w, x, n, rows, cols, sums, call[9].ToBoolean()));
}

// matmulInt4(out f32, outOffset, packed, scales, zeros, rows, cols, group, symmetric, x f32, xOffset, n, int8)
Napi::Value matmul_int4_binding(Call call) {
  const char* op = "matmulInt4";
  const Int4Args w = int4_args(call, 2, op);
  const int64_t n = arg(call, 11, op, "n");
  float* out = span<float>(call, 0, arg(call, 1, op, "outOffset"), product(call, op, n, w.view.rows), op, "out");
  const float* x = span<float>(call, 9, arg(call, 10, op, "xOffset"), product(call, op, n, w.view.cols), op, "x");
  matmul_int4(w.view, x, n, out, call[12].ToBoolean());
  return call.Env().Undefined();
}

// int4GroupSums(sums i32 (n, rows, groups), packed, scales, zeros, rows, cols, group, symmetric, x f32, xOffset, n): tests only.
Napi::Value int4_group_sums_binding(Call call) {
  const char* op = "int4GroupSums";
  const Int4Args w = int4_args(call, 1, op);
  const int64_t n = arg(call, 10, op, "n");
  int32_t* sums = span<int32_t>(call, 0, 0, product(call, op, n, product(call, op, w.view.rows, w.view.groups())), op, "sums");
  const float* x = span<float>(call, 8, arg(call, 9, op, "xOffset"), product(call, op, n, w.view.cols), op, "x");
  int4_group_sums(w.view, x, n, sums);
  return call.Env().Undefined();
}

// rmsnorm(out, outOffset, x, xOffset, weight, weightOffset, n, dim, eps)
Napi::Value rmsnorm(Call call) {
  const char* op = "rmsnorm";
  const int64_t n = arg(call, 6, op, "n"), dim = arg(call, 7, op, "dim"), size = product(call, op, n, dim);
  float* out = span<float>(call, 0, arg(call, 1, op, "outOffset"), size, op, "out");
  const float* x = span<float>(call, 2, arg(call, 3, op, "xOffset"), size, op, "x");
  const float* weight = span<float>(call, 4, arg(call, 5, op, "weightOffset"), dim, op, "weight");
  if (!call[8].IsNumber()) throw Napi::TypeError::New(call.Env(), "rmsnorm: eps must be a number");
  rmsnorm_rows(out, x, weight, n, dim, call[8].As<Napi::Number>().FloatValue());
  return call.Env().Undefined();
}

// rope(x, xOffset, positions i32, positionsOffset, n, nHeads, headDim, theta, freqs f32 | null, freqsOffset, scale, halves)
Napi::Value rope(Call call) {
  const char* op = "rope";
  const int64_t n = arg(call, 4, op, "n"), heads = arg(call, 5, op, "nHeads"), head_dim = arg(call, 6, op, "headDim");
  if (head_dim % 2 != 0) range_error(call, op, "headDim " + std::to_string(head_dim) + " must be even");
  float* x = span<float>(call, 0, arg(call, 1, op, "xOffset"), product(call, op, n, product(call, op, heads, head_dim)), op, "x");
  const int32_t* positions = span<int32_t>(call, 2, arg(call, 3, op, "positionsOffset"), n, op, "positions");
  if (!call[7].IsNumber()) throw Napi::TypeError::New(call.Env(), "rope: theta must be a number");
  const float* freqs = call[8].IsNull() ? nullptr : span<float>(call, 8, arg(call, 9, op, "freqsOffset"), head_dim / 2, op, "freqs");
  if (!call[10].IsNumber() || !call[11].IsBoolean())
    throw Napi::TypeError::New(call.Env(), "rope: scale must be a number and halves a boolean");
  rope_rows(x, positions, n, heads, head_dim, call[7].As<Napi::Number>().FloatValue(), freqs, call[10].As<Napi::Number>().FloatValue(),
            call[11].As<Napi::Boolean>().Value());
  return call.Env().Undefined();
}

// An elementwise op of two inputs: (out, outOffset, a, aOffset, b, bOffset, n) -> kernel(out, a, b, n);
// out may be a or b (core checks overlap). `names` are a's and b's names in errors.
template <class Kernel>
Napi::Value elementwise2(Call call, const char* op, const char* a_name, const char* b_name, Kernel kernel) {
  const int64_t n = arg(call, 6, op, "n");
  float* out = span<float>(call, 0, arg(call, 1, op, "outOffset"), n, op, "out");
  const float* a = span<float>(call, 2, arg(call, 3, op, (std::string(a_name) + "Offset").c_str()), n, op, a_name);
  const float* b = span<float>(call, 4, arg(call, 5, op, (std::string(b_name) + "Offset").c_str()), n, op, b_name);
  kernel(out, a, b, static_cast<size_t>(n));
  return call.Env().Undefined();
}

// swiglu(out, outOffset, gate, gateOffset, up, upOffset, n)
Napi::Value swiglu_binding(Call call) { return elementwise2(call, "swiglu", "gate", "up", swiglu); }

// add(out, outOffset, a, aOffset, b, bOffset, n)
Napi::Value add_binding(Call call) { return elementwise2(call, "add", "a", "b", add); }

// firstAbove(x, xOffset, n, maxAbs) -> the index of the first element NaN, infinite or above maxAbs in magnitude, or -1.
Napi::Value first_above_binding(Call call) {
  const char* op = "firstAbove";
  const int64_t n = arg(call, 2, op, "n");
  const float* x = span<float>(call, 0, arg(call, 1, op, "xOffset"), n, op, "x");
  if (!call[3].IsNumber() || !(call[3].As<Napi::Number>().DoubleValue() >= 0))
    throw Napi::TypeError::New(call.Env(), "firstAbove: maxAbs must be a number >= 0");
  return Napi::Number::New(call.Env(),
                           static_cast<double>(first_above(x, static_cast<size_t>(n), call[3].As<Napi::Number>().DoubleValue())));
}

// softmax(x, xOffset, n, len)
Napi::Value softmax(Call call) {
  const char* op = "softmax";
  const int64_t n = arg(call, 2, op, "n"), len = arg(call, 3, op, "len");
  if (len < 1) range_error(call, op, "rows must have length >= 1");
  float* x = span<float>(call, 0, arg(call, 1, op, "xOffset"), product(call, op, n, len), op, "x");
  softmax_ref(x, n, len);
  return call.Env().Undefined();
}

// topk(out i32, outOffset, x f32, xOffset, n, len, k)
Napi::Value topk(Call call) {
  const char* op = "topk";
  const int64_t n = arg(call, 4, op, "n"), len = arg(call, 5, op, "len"), k = arg(call, 6, op, "k");
  if (k < 1 || k > len || len > INT32_MAX)
    range_error(call, op, "k " + std::to_string(k) + ", expected an integer in [1, " + std::to_string(len) + "]");
  int32_t* out = span<int32_t>(call, 0, arg(call, 1, op, "outOffset"), product(call, op, n, k), op, "out");
  const float* x = span<float>(call, 2, arg(call, 3, op, "xOffset"), product(call, op, n, len), op, "x");
  topk_ref(out, x, n, len, k);
  return call.Env().Undefined();
}

// amxEnabled() -> whether matmulInt4 'int8' runs on AMX tiles now (SPARQ_NATIVE_AMX=1 on an AMX CPU).
Napi::Value amx_enabled(Call call) { return Napi::Boolean::New(call.Env(), amx_int8_enabled()); }

// setAmx(true | false | null) -> amxEnabled() afterwards; null restores SPARQ_NATIVE_AMX's choice.
// Tests and benchmarks only. true where AMX is unavailable leaves it off (never SIGILL).
Napi::Value set_amx(Call call) {
  if (call[0].IsNull() || call[0].IsUndefined()) force_amx(-1);
  else if (call[0].IsBoolean()) force_amx(call[0].As<Napi::Boolean>().Value() ? 1 : 0);
  else throw Napi::TypeError::New(call.Env(), "setAmx: expected a boolean or null");
  return Napi::Boolean::New(call.Env(), amx_int8_enabled());
}

// q8GemmMinN(dtype code, packed?) -> the activation rows from which matmul's 'int8' product of that
// block type takes the blocked kernel on the current path, over weights repacked by q8Repack if
// packed (basic_dispatch.h).
Napi::Value q8_gemm_min_n_binding(Call call) {
  const WeightType t = weight_type(call, 0, "q8GemmMinN", true);
  return Napi::Number::New(call.Env(), static_cast<double>(q8_gemm_min_n(t, call[1].ToBoolean())));
}

// q8Routes() -> { rows, blocked, packed }: how many of matmul's 'int8' products of block weights ran
// the per-row kernel, the blocked one over the file's layout, the blocked one over repacked weights.
Napi::Value q8_routes_binding(Call call) {
  uint64_t counts[3];
  q8_routes(counts);
  Napi::Object out = Napi::Object::New(call.Env());
  out.Set("rows", static_cast<double>(counts[static_cast<int>(Q8Route::rows)]));
  out.Set("blocked", static_cast<double>(counts[static_cast<int>(Q8Route::blocked)]));
  out.Set("packed", static_cast<double>(counts[static_cast<int>(Q8Route::packed)]));
  return out;
}

// forceQ8GemmMinN(n | null): every block type takes the blocked kernel from n rows on; null restores
// the measured crossovers. Tests and benchmarks only.
Napi::Value force_q8_gemm_min_n_binding(Call call) {
  if (call[0].IsNull() || call[0].IsUndefined()) force_q8_gemm_min_n(0);
  else force_q8_gemm_min_n(std::max<int64_t>(1, arg(call, 0, "forceQ8GemmMinN", "n")));
  return call.Env().Undefined();
}

}  // namespace

void register_basic_ops(Napi::Env env, Napi::Object exports) {
  const std::pair<const char*, Napi::Value (*)(Call)> fns[] = {
      {"quantize", quantize},
      {"dequantize", dequantize},
      {"quantizeInt4", quantize_int4},
      {"dequantizeInt4", dequantize_int4},
      {"matmul", matmul_binding},
      {"matmulInt4", matmul_int4_binding},
      {"int4GroupSums", int4_group_sums_binding},
      {"q8BlockSums", q8_block_sums_binding},
      {"q8PackedBytes", q8_packed_bytes_binding},
      {"q8Repack", q8_repack_binding},
      {"q8GemmMinN", q8_gemm_min_n_binding},
      {"forceQ8GemmMinN", force_q8_gemm_min_n_binding},
      {"q8Routes", q8_routes_binding},
      {"amxEnabled", amx_enabled},
      {"setAmx", set_amx},
      {"rmsnorm", rmsnorm},
      {"rope", rope},
      {"softmax", softmax},
      {"swiglu", swiglu_binding},
      {"add", add_binding},
      {"firstAbove", first_above_binding},
      {"topk", topk},
  };
  for (const auto& [name, fn] : fns) exports.Set(name, Napi::Function::New(env, fn, name));
}

}  // namespace sparq
