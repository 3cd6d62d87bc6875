// The basic ops' dispatchers: each takes its kernel from kernel_table() (kernel_table.h: the
// table of kernel_path(), whose missing entries come from the narrower tables), splits the
// weight rows across the native threads, and quantizes the activations the int8 products take.
#include "ops/basic_dispatch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/gemm_q8.h"
#include "common/half.h"
#include "ops/int4.h"
#include "ops/matvec.h"
#include "ops/matvec_q8.h"
#include "common/quant.h"
#include "common/threads.h"
#include "ops/kernel_table.h"

namespace sparq {

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
bool amx_runs(const Int4View& w, int64_t n) {
#if SPARQ_X86
  return amx_int8_enabled() && n >= 16 && w.rows >= 16 && int4_amx_supports(w.group);
#else
  return false;
#endif
}

// Products smaller than this (weight bytes times activation rows) run on the calling thread:
// handing work to the pool costs some microseconds, about what a 512 KB read takes.
constexpr int64_t SERIAL_BYTES = 512 * 1024;
// Row ranges start at multiples of this, so every task but the last covers whole SIMD row tiles.
constexpr int64_t ROW_ALIGN = 32;

// Calls rows(row_begin, row_end) over a split of [0, rows) on the native pool: a few
// ranges per thread, taken dynamically, so a thread slowed by another process on a
// shared machine takes fewer. `work` is the bytes the whole product reads.
template <class Rows>
void split_rows(int64_t rows, int64_t work, Rows fn) {
  const int64_t threads = pool_threads();
  const int64_t tiles = (rows + ROW_ALIGN - 1) / ROW_ALIGN;
  const int64_t tasks = threads <= 1 || work < SERIAL_BYTES ? 1 : std::min<int64_t>(tiles, 4 * threads);
  if (tasks <= 1) return fn(0, rows);
  parallel_for(static_cast<size_t>(tasks), [&](size_t i) {
    const int64_t begin = tiles * static_cast<int64_t>(i) / tasks * ROW_ALIGN;
    const int64_t end = std::min(rows, tiles * static_cast<int64_t>(i + 1) / tasks * ROW_ALIGN);
    if (begin < end) fn(begin, end);
  });
}

// An INT4 'int8' entry of the first table from kernel_table() down that has it for w's group size
// and width (the VNNI kernel, else the AVX2 one, also on AVX-512 CPUs without VNNI, else the scalar one).
template <class Fn>
Fn int4_int8_entry(const Int4View& w, Fn KernelTable::*field) {
  const KernelTable* k = &kernel_table();
  while (!(k->*field) || (k->int4_int8_supports && !k->int4_int8_supports(w.group, w.cols))) k = k->narrower;
  return k->*field;
}

// The 'int8' product of weight rows [row_begin, row_end).
void int8_rows(const Int4View& w, const Int8Acts& acts, float* out, int64_t row_begin, int64_t row_end) {
  int4_int8_entry(w, &KernelTable::int4_int8_rows)(w, acts, out, row_begin, row_end);
}

#if SPARQ_X86
// Activation rows [t0, n) of acts (the AMX product's tail rows).
Int8Acts acts_from(const Int8Acts& a, int64_t t0) {
  Int8Acts tail;
  tail.n = a.n - t0, tail.cols = a.cols, tail.group = a.group;
  // Every per-row array drops its first t0 rows.
  auto rows_from = [&](const auto& v, auto& dst) { dst.assign(v.begin() + static_cast<int64_t>(v.size()) / a.n * t0, v.end()); };
  rows_from(a.q, tail.q);
  rows_from(a.scale, tail.scale);
  rows_from(a.qsum, tail.qsum);
  rows_from(a.even, tail.even);
  rows_from(a.odd, tail.odd);
  rows_from(a.lane_sum, tail.lane_sum);
  rows_from(a.lane_bias, tail.lane_bias);
  rows_from(a.lane_scale, tail.lane_scale);
  return tail;
}
#endif

}  // namespace

bool amx_int8_available() {
  const CpuFeatures& f = cpu_features();
  return f.amx_tile && f.amx_int8 && kernel_path() == KernelPath::avx512;
}

bool amx_int8_enabled() { return amx_int8_available() && amx_opted_in(); }

void force_amx(int on) { amx_forced.store(on < 0 ? -1 : on != 0); }

void quantize_blocks(WeightType t, const float* x, uint8_t* y, int64_t nblocks) {
  kernel_entry(kernel_table(), &KernelTable::quantize_blocks)(t, x, y, nblocks);
}

void dequantize_blocks(WeightType t, const uint8_t* x, float* y, int64_t nblocks) {
  // The SIMD dequantizers cover the quantizable types; the read-only ones take the scalar table's.
  const KernelTable& k = kernel_table();
  kernel_entry(is_quantizable(t) ? k : kernel_table_scalar(), &KernelTable::dequantize_blocks)(t, x, y, nblocks);
}

namespace {

std::atomic<int64_t> forced_q8_gemm_min_n{0};
// matmul's 'int8' products of block weights so far, per Q8Route (q8_routes).
std::atomic<uint64_t> q8_route_counts[3];

// Whether the table has the blocked product over repacked weights for t.
bool q8_packs(const KernelTable& k, WeightType t) { return k.gemm_q8_packed && gemm_q8_packs(t); }

// The kernel the 'int8' product of block weights (matvec_q8.h) runs for n activation rows: the
// table's blocked kernel over the repacked weights when it has one for t, `packed` is given and n
// reaches the repacked layout's crossover; else its blocked kernel over the file's layout when it
// has one for t and n reaches that layout's crossover; else the per-row kernel.
Q8Route q8_route(const KernelTable& k, WeightType t, int64_t n, bool packed) {
  const bool repacked = packed && q8_packs(k, t);
  if (!k.gemm_q8 || !gemm_q8_supports(t) || n < q8_gemm_min_n(t, repacked)) return Q8Route::rows;
  return repacked ? Q8Route::packed : Q8Route::blocked;
}

// Activation rows quantized for the blocked products, the rows split across the pool: on the calling
// thread alone they would take a noticeable share of the call (Amdahl) once the product is split.
void quantize_for_gemm(WeightType t, const float* x, int64_t n, int64_t cols, Q8Acts& acts) {
  size_q8_acts(t, n, cols, acts);
  const int64_t parts = std::min<int64_t>(n, pool_threads());
  parallel_for(static_cast<size_t>(parts), [&](size_t i) {
    kernel_table().gemm_q8_acts(t, x, n * static_cast<int64_t>(i) / parts, n * static_cast<int64_t>(i + 1) / parts, acts);
  });
}

}  // namespace

int64_t q8_gemm_min_n(WeightType t, bool packed) {
  const int64_t forced = forced_q8_gemm_min_n.load();
  const KernelTable& k = kernel_table();
  return forced > 0 ? forced : gemm_q8_min_n(t, k.gemm_q8_vnni, packed && q8_packs(k, t));
}

void force_q8_gemm_min_n(int64_t n) { forced_q8_gemm_min_n.store(n > 0 ? n : 0); }

void q8_routes(uint64_t counts[3]) {
  for (int i = 0; i < 3; ++i) counts[i] = q8_route_counts[i].load(std::memory_order_relaxed);
}

namespace {

// The 'int8' product of block weights.
void matmul_q8(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, const uint8_t* packed) {
  const int64_t work = weight_bytes(t, cols) * rows * n;
  const KernelTable& k = kernel_table();
  const Q8Route route = q8_route(k, t, n, packed != nullptr);
  q8_route_counts[static_cast<int>(route)].fetch_add(1, std::memory_order_relaxed);
  if (route == Q8Route::packed) {
    // The weights repacked at load: no panels to decode (split_rows' ranges start on panels).
    thread_local Q8Acts kept;
    Q8Acts& acts = kept;
    quantize_for_gemm(t, x, n, cols, acts);
    return split_rows(rows, work, [&](int64_t begin, int64_t end) {
      thread_local std::vector<uint8_t> scratch;  // AVX2 q6_k's unpacked panels (VNNI reads the planes in place)
      const size_t bytes = k.gemm_q8_vnni ? 0 : static_cast<size_t>(gemm_q8_scratch_bytes(t, end - begin, cols));
      if (scratch.size() < bytes) scratch.resize(bytes);
      k.gemm_q8_packed(t, packed, acts, rows, out, begin, end, scratch.data(), nullptr);
    });
  }
  if (route == Q8Route::blocked) {
    // The activations and each thread's panels in buffers kept from call to call (no page faults
    // per call): acts n x cols bytes and a few per 32 columns, the panels one chunk (about 2 MB).
    // (A lambda names a thread_local as the running thread's own, so the pool's tasks get a reference.)
    thread_local Q8Acts kept;
    Q8Acts& acts = kept;
    quantize_for_gemm(t, x, n, cols, acts);
    return split_rows(rows, work, [&](int64_t begin, int64_t end) {
      thread_local std::vector<uint8_t> scratch;
      const size_t bytes = static_cast<size_t>(gemm_q8_scratch_bytes(t, end - begin, cols));
      if (scratch.size() < bytes) scratch.resize(bytes);
      k.gemm_q8(t, w, acts, rows, out, begin, end, scratch.data());
    });
  }
  const auto rows_fn = kernel_entry(k, &KernelTable::q8_rows, t);
  RowActs acts;
  quantize_row_acts(t, x, n, cols, acts);
  split_rows(rows, work, [&](int64_t begin, int64_t end) { rows_fn(t, w, acts, rows, out, begin, end); });
}

}  // namespace

void matmul(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* out, bool int8,
            const uint8_t* packed) {
  if (int8 && is_block_type(t)) return matmul_q8(t, w, x, n, rows, cols, out, packed);
  if (int8 && (t == WeightType::f16 || t == WeightType::bf16)) {
    // ggml's f16 and bf16 products take the activations rounded to the weights' type (nearest even).
    thread_local std::vector<float> rounded;
    rounded.resize(static_cast<size_t>(n * cols));
    for (int64_t i = 0; i < n * cols; ++i)
      rounded[i] = t == WeightType::f16 ? fp16_to_fp32_ref(fp32_to_fp16_ref(x[i])) : bf16_to_fp32(fp32_to_bf16_ref(x[i]));
    x = rounded.data();
  }
  const KernelTable& k = kernel_table();
  const auto kernel = k.gemm && n >= GEMM_MIN_N ? k.gemm : kernel_entry(k, &KernelTable::matmul, t);
  split_rows(rows, weight_bytes(t, cols) * rows * n, [&](int64_t begin, int64_t end) { kernel(t, w, x, n, rows, cols, out, begin, end); });
}

int64_t q8_packed_bytes(WeightType t, int64_t rows, int64_t cols) {
  return kernel_table().gemm_q8_repack ? gemm_q8_packed_bytes(t, rows, cols) : 0;
}

void q8_repack(WeightType t, const uint8_t* w, int64_t rows, int64_t cols, uint8_t* packed) {
  const auto repack = kernel_table().gemm_q8_repack;
  split_rows(rows, weight_bytes(t, cols) * rows, [&](int64_t begin, int64_t end) { repack(t, w, rows, cols, packed, begin, end); });
}

const char* q8_block_sums(WeightType t, const uint8_t* w, const float* x, int64_t n, int64_t rows, int64_t cols, int32_t* sums,
                          bool packed) {
  const KernelTable& k = kernel_table();
  const Q8Route route = q8_route(k, t, n, packed);
  if (route == Q8Route::packed) {
    std::vector<uint8_t> repacked(static_cast<size_t>(gemm_q8_packed_bytes(t, rows, cols)));
    q8_repack(t, w, rows, cols, repacked.data());
    Q8Acts acts;
    quantize_for_gemm(t, x, n, cols, acts);
    std::vector<uint8_t> scratch(static_cast<size_t>(gemm_q8_scratch_bytes(t, rows, cols)));
    k.gemm_q8_packed(t, repacked.data(), acts, rows, nullptr, 0, rows, scratch.data(), sums);
    return k.gemm_q8_vnni ? "vnni-packed" : "avx2-packed";
  }
  if (route == Q8Route::blocked) {
    Q8Acts acts;
    quantize_for_gemm(t, x, n, cols, acts);
    k.gemm_q8_sums(t, w, acts, rows, sums);
    return k.gemm_q8_name;
  }
  RowActs acts;
  quantize_row_acts(t, x, n, cols, acts);
  kernel_entry(k, &KernelTable::q8_sums, t)(t, w, acts, rows, sums);
  return kernel_entry(k, &KernelTable::q8_name);
}

void matmul_int4(const Int4View& w, const float* x, int64_t n, float* out, bool int8) {
  const int64_t work = (w.cols / 2 + w.groups() * 5) * w.rows * n;  // nibbles, f32 scales, int8 zeros
  if (int8) {
    Int8Acts acts;
    quantize_acts(x, n, w.cols, w.group, acts);
    if (!amx_runs(w, n)) return split_rows(w.rows, work, [&](int64_t begin, int64_t end) { int8_rows(w, acts, out, begin, end); });
#if SPARQ_X86  // (amx_runs is false elsewhere)
    // AMX does the whole 16 x 16 blocks; the weight rows past the last block go to
    // int8_rows for every activation row, the activation rows past it for the other weight rows.
    matmul_int4_int8_amx(w, acts, out);
    const int64_t n16 = n / 16 * 16, rows16 = w.rows / 16 * 16;
    if (rows16 < w.rows) int8_rows(w, acts, out, rows16, w.rows);
    if (n16 < n) int8_rows(w, acts_from(acts, n16), out + n16 * w.rows, 0, rows16);
#endif
    return;
  }
  const KernelTable& k = kernel_table();
  const auto kernel = k.int4_gemm && n >= GEMM_MIN_N ? k.int4_gemm : kernel_entry(k, &KernelTable::int4_rows);
  split_rows(w.rows, work, [&](int64_t begin, int64_t end) { kernel(w, x, n, out, begin, end); });
}

void int4_group_sums(const Int4View& w, const float* x, int64_t n, int32_t* sums) {
  Int8Acts acts;
  quantize_acts(x, n, w.cols, w.group, acts);
  int4_int8_entry(w, &KernelTable::int4_group_sums)(w, acts, sums);
#if SPARQ_X86  // (amx_runs is false elsewhere)
  // AMX rewrites the whole blocks' sums (so tests can compare them bit for bit).
  if (amx_runs(w, n)) int4_group_sums_amx(w, acts, sums);
#endif
}

}  // namespace sparq
