// The basic ops' dispatchers: each picks the kernel family of kernel_path()
// and falls back to the scalar _ref twin where a family has no kernel.
#include "basic_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "int4.h"
#include "matvec.h"
#include "quant.h"

namespace sparq {

bool basic_vnni_enabled() { return kernel_path() == KernelPath::avx512 && cpu_features().avx512vnni; }

namespace {

std::atomic<int> amx_forced{-1};  // -1: SPARQ_NATIVE_AMX decides; else 0 / 1

bool amx_opted_in() {
  static const bool env = [] {
    const char* v = std::getenv("SPARQ_NATIVE_AMX");
    return v && std::strcmp(v, "1") == 0;
  }();
  const int forced = amx_forced.load(std::memory_order_relaxed);
  return forced < 0 ? env : forced == 1;
}

// AMX covers whole 16 x 16 blocks of (activation rows, weight rows) only.
bool amx_runs(const Int4View& w, int64_t n) { return amx_int8_enabled() && n >= 16 && w.rows >= 16 && int4_amx_supports(w.group); }

// The 'int8' product of weight rows [row_begin, row_end) by the VNNI kernel if it can, else the scalar one.
void int8_rows(const Int4View& w, const Int8Acts& acts, float* out, int64_t row_begin, int64_t row_end) {
  if (basic_vnni_enabled() && int4_vnni_supports(w.group, w.cols)) matmul_int4_int8_vnni(w, acts, out, row_begin, row_end);
  else matmul_int4_int8_ref(w, acts, out, row_begin, row_end);
}

// Activation rows [t0, n) of acts.
Int8Acts acts_from(const Int8Acts& a, int64_t t0) {
  const int64_t groups = a.cols / a.group;
  Int8Acts tail;
  tail.n = a.n - t0, tail.cols = a.cols, tail.group = a.group;
  tail.q.assign(a.q.begin() + t0 * a.cols, a.q.end());
  tail.scale.assign(a.scale.begin() + t0 * groups, a.scale.end());
  tail.qsum.assign(a.qsum.begin() + t0 * groups, a.qsum.end());
  return tail;
}

}  // namespace

bool amx_int8_available() {
  const CpuFeatures& f = cpu_features();
  return f.amx_tile && f.amx_int8 && kernel_path() == KernelPath::avx512;
}

bool amx_int8_enabled() { return amx_int8_available() && amx_opted_in(); }

void force_amx(int on) { amx_forced.store(on < 0 ? -1 : on != 0); }

void quantize_blocks(WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  if (kernel_path() == KernelPath::avx512) quantize_blocks_avx512(t, x, y, nblocks);
  else quantize_blocks_ref(t, x, y, nblocks);
}

void dequantize_blocks(WeightType t, const uint8_t* x, float* y, int64_t nblocks) {
  if (kernel_path() == KernelPath::avx512) dequantize_blocks_avx512(t, x, y, nblocks);
  else dequantize_blocks_ref(t, x, y, nblocks);
}

void matmul(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out) {
  switch (kernel_path()) {
    case KernelPath::avx512: return matmul_avx512(t, w, x, n, rows, cols, out, 0, rows);
    case KernelPath::avx2: return matmul_avx2(t, w, x, n, rows, cols, out, 0, rows);
    case KernelPath::scalar: return matmul_ref(t, w, x, n, rows, cols, out, 0, rows);
  }
}

void matmul_int4(const Int4View& w, const float* x, int64_t n, float* out, bool int8) {
  if (int8) {
    Int8Acts acts;
    quantize_acts(x, n, w.cols, w.group, acts);
    if (!amx_runs(w, n)) return int8_rows(w, acts, out, 0, w.rows);
    // AMX does the whole 16 x 16 blocks; the weight rows past the last block go to
    // int8_rows for every activation row, the activation rows past it for the other weight rows.
    matmul_int4_int8_amx(w, acts, out);
    const int64_t n16 = n / 16 * 16, rows16 = w.rows / 16 * 16;
    if (rows16 < w.rows) int8_rows(w, acts, out, rows16, w.rows);
    if (n16 < n) int8_rows(w, acts_from(acts, n16), out + n16 * w.rows, 0, rows16);
    return;
  }
  switch (kernel_path()) {
    case KernelPath::avx512: return matmul_int4_dequant_avx512(w, x, n, out, 0, w.rows);
    case KernelPath::avx2: return matmul_int4_dequant_avx2(w, x, n, out, 0, w.rows);
    case KernelPath::scalar: return matmul_int4_dequant_ref(w, x, n, out, 0, w.rows);
  }
}

void int4_group_sums(const Int4View& w, const float* x, int64_t n, int32_t* sums) {
  Int8Acts acts;
  quantize_acts(x, n, w.cols, w.group, acts);
  if (basic_vnni_enabled() && int4_vnni_supports(w.group, w.cols)) int4_group_sums_vnni(w, acts, sums);
  else int4_group_sums_ref(w, acts, sums);
  // AMX rewrites the whole blocks' sums (so tests can compare them bit for bit).
  if (amx_runs(w, n)) int4_group_sums_amx(w, acts, sums);
}

}  // namespace sparq
