// The per-row 'int8' kernels of the K-quants, IQ4_XS and INT4 apart (matvec_q8_simd.h, int4_avx2.cc,
// int4_avx512.cc), one thread, AVX2 and AVX-512 in one process: CPU ns per weight row of a
// 4096-column matrix at 1, 2, 4 and 8 activation rows (the figures in docs/int8-products.md):
//   pnpm build:native && o=packages/native/build/obj
//   g++ -std=c++17 -O2 -Ipackages/native/src bench/q8-kernels.cc
//     $o/{matvec_q8_ref,int4_ref,matvec_q8_avx2,matvec_q8_avx512,int4_avx2,int4_avx512}.o -o /tmp/q8-kernels
//   [TYPES=q4_k,int4] [NROWS=148] /tmp/q8-kernels [cache | stream]
// cache: 64 weight rows (in L2), so the time is the kernels' instructions; stream: 4096 rows in
// copies filling 160 MB, so every call reads its weights from DRAM. Random block bytes with finite
// f16 scales; INT4 in groups of 32, symmetric. CPU time (CLOCK_THREAD_CPUTIME_ID), best of 5 trials:
// on a shared machine time spent descheduled is not in it. For main against a branch, build the
// binary from each tree's objects and alternate the two.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <ctime>
#include "matvec_q8.h"
#include "int4.h"
using namespace sparq;
static double now_cpu() { timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
// CPU seconds per call(i) over reps calls, best of 5 trials.
template <class Call>
static double best_cpu(int reps, Call call) {
  double best = 1e9;
  for (int trial = 0; trial < 5; ++trial) {
    const double t0 = now_cpu();
    for (int i = 0; i < reps; ++i) call(i);
    best = std::min(best, (now_cpu() - t0) / reps);
  }
  return best;
}
struct TypeInfo { const char* name; WeightType t; int bytes; std::vector<int> f16_at; };
int main(int argc, char** argv) {
  const int64_t cols = 4096;
  const bool stream = argc > 1 && std::string(argv[1]) == "stream";
  const int64_t rows = stream ? 4096 : 64;
  std::vector<TypeInfo> types = {{"q2_k", WeightType::q2_k, 84, {80, 82}}, {"q3_k", WeightType::q3_k, 110, {108}},
                                 {"q4_k", WeightType::q4_k, 144, {0, 2}},  {"q5_k", WeightType::q5_k, 176, {0, 2}},
                                 {"q6_k", WeightType::q6_k, 210, {208}},   {"iq4_xs", WeightType::iq4_xs, 136, {0}}};
  std::mt19937 rng(1);
  std::vector<float> x(8 * cols);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<float> out(8 * rows);
  const char* only = getenv("TYPES");
  const char* rowsenv = getenv("NROWS");
  std::vector<int> ns = {1, 2, 4, 8};
  if (rowsenv) { ns.clear(); for (const char* p = rowsenv; *p; ++p) if (*p >= '1' && *p <= '9') ns.push_back(*p - '0'); }
  for (auto& ti : types) {
    if (only && !strstr(only, ti.name)) continue;
    const int64_t blocks = cols / 256, row_bytes = blocks * ti.bytes;
    const int copies = stream ? 1 + int(160e6 / (rows * row_bytes)) : 1;
    std::vector<std::vector<uint8_t>> ws(copies, std::vector<uint8_t>(rows * row_bytes));
    for (auto& w : ws) {
      for (auto& b : w) b = rng();
      for (int64_t bl = 0; bl < rows * blocks; ++bl) for (int at : ti.f16_at) { w[bl * ti.bytes + at] = 0x00; w[bl * ti.bytes + at + 1] = 0x20 + (rng() & 0x7); }
    }
    for (int n : ns) {
      RowActs a;
      quantize_row_acts(ti.t, x.data(), n, cols, a);
      for (int isa = 0; isa < 2; ++isa) {
        auto fn = isa ? matmul_q8_avx512 : matmul_q8_avx2;
        const double best = best_cpu(stream ? 3 * copies : 2000, [&](int i) { fn(ti.t, ws[i % copies].data(), a, rows, out.data(), 0, rows); });
        const double bytes = rows * row_bytes;
        printf("%-7s %-6s n=%d  %8.2f ns/row  %6.1f GB/s(weights)  %5.2f ns/block/actrow\n", ti.name, isa ? "avx512" : "avx2", n,
               best / rows * 1e9, bytes / best / 1e9, best / rows / blocks / n * 1e9);
      }
    }
  }
  // INT4 group 32 symmetric.
  if (!only || strstr(only, "int4")) {
    const int64_t group = 32;
    const int copies = stream ? 1 + int(160e6 / (rows * cols / 2 * 1.3)) : 1;
    std::vector<std::vector<uint8_t>> packed(copies, std::vector<uint8_t>(rows * cols / 2));
    std::vector<float> scales(rows * cols / group, 0.01f);
    std::vector<int8_t> zeros(rows * cols / group, 0);
    for (auto& p : packed) for (auto& b : p) b = rng();
    for (int n : ns) {
      Int8Acts a;
      quantize_acts(x.data(), n, cols, group, a);
      for (int isa = 0; isa < 2; ++isa) {
        auto fn = isa ? matmul_int4_int8_vnni : matmul_int4_int8_avx2;
        const double best = best_cpu(stream ? 3 * copies : 2000, [&](int i) {
          fn(Int4View{packed[i % copies].data(), scales.data(), zeros.data(), rows, cols, group, true}, a, out.data(), 0, rows);
        });
        const double bytes = rows * (cols / 2 + cols / group * 5);
        printf("%-7s %-6s n=%d  %8.2f ns/row  %6.1f GB/s(weights)\n", "int4", isa ? "avx512" : "avx2", n, best / rows * 1e9, bytes / best / 1e9);
      }
    }
  }
}
