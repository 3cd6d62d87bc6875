// The per-row 'int8' kernels timed apart from the addon, one thread, 4096
// columns, 1 to 8 activation rows: matvec_q8.h's (matmul_q8_avx2,
// matmul_q8_avx512) for the 32-element block types, the K-quants and IQ4_XS,
// and int4.h's (matmul_int4_int8_avx2, matmul_int4_int8_vnni) for INT4 in
// symmetric groups of 32. Another build's q8 kernels (e.g. main's) can be
// linked beside them, their symbols renamed with a base_ prefix, and the two
// alternate call by call, so that a shared machine loads both alike:
//   pnpm build:native && o=packages/native/build/obj
//   g++ -std=c++17 -O2 -mf16c -Ipackages/native/src bench/q8-kernels.cc
//     $o/kernels/x86/{matvec_q8_avx2,matvec_q8_avx512,int4_avx2,int4_avx512}.o $o/kernels/ref/{matvec_q8_ref,int4_ref}.o $o/common/cpu.o
//     -o /tmp/q8-kernels
//   /tmp/q8-kernels [--hot] [--weight-rows 4096] [--cols 4096] [--rounds 15]
//   [--types q4_0,q4_k,int4] [--rows 1,2,4,8]
// With a baseline (main at f49c48f, whose RowActs still held bias lanes:
// OldRowActs below): copy its matvec_q8_avx2.o, matvec_q8_avx512.o and
// matvec_q8_ref.o, rename their entry points with objcopy
// --redefine-sym to base_matmul_q8_avx2 / base_matmul_q8_avx512 /
// base_quantize_row_acts taking an OldRowActs (the mangled names: nm on this
// file's object), localize the rest of their global symbols
// (--localize-symbol), link them too and compile with -DQ8_BASELINE. (INT4 has
// no baseline here: time it from each tree's build in turn.) Cold (default):
// the weights rotate through 160 MB of copies, so every call reads them from
// DRAM;
// --hot: one copy (9-18 MB, inside the 32 MB L3; with --weight-rows 256, or 64
// for the larger super-block types, inside the 1 MB L2, which shows the
// instruction cost alone: the L3 is shared with the other core). --cols: the
// weights' columns (14336: a Llama 3 8B ffn_down, whose 8 rows of activation
// codes pass the L1 cache). Figures: the
// median over rounds of thread CPU time (descheduled time left out) as ms per
// 4096 x 4096 weights, weights per ns, and ns per weight row. Random block
// bytes with finite f16 scales.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/cpu.h"
#include "common/half.h"
#include "ops/int4.h"
#include "ops/matvec_q8.h"
#include "common/quant.h"
using namespace sparq;

#ifdef Q8_BASELINE
namespace sparq {
// The baseline's RowActs (main at f49c48f, which kept per-call bias lanes) and
// its quantizer.
struct OldRowActs {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> bias;
  std::vector<float> sum16, sum32;
  std::vector<int16_t> isum16;
};
void base_quantize_row_acts(WeightType t, const float *x, int64_t n,
                            int64_t cols, OldRowActs &a);
void base_matmul_q8_avx2(WeightType t, const uint8_t *w, const OldRowActs &a,
                         int64_t rows, float *out, int64_t row_begin,
                         int64_t row_end);
void base_matmul_q8_avx512(WeightType t, const uint8_t *w, const OldRowActs &a,
                           int64_t rows, float *out, int64_t row_begin,
                           int64_t row_end);
} // namespace sparq
#endif

static double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct BlockType {
  const char *name;
  WeightType t;
  int elements, bytes;
  std::vector<int> f16_at; // the block's f16 scales (and minimums)
};
static const BlockType TYPES[] = {
    {"q4_0", WeightType::q4_0, 32, 18, {0}},
    {"q4_1", WeightType::q4_1, 32, 20, {0, 2}},
    {"q5_0", WeightType::q5_0, 32, 22, {0}},
    {"q5_1", WeightType::q5_1, 32, 24, {0, 2}},
    {"q8_0", WeightType::q8_0, 32, 34, {0}},
    {"iq4_nl", WeightType::iq4_nl, 32, 18, {0}},
    {"q2_k", WeightType::q2_k, 256, 84, {80, 82}},
    {"q3_k", WeightType::q3_k, 256, 110, {108}},
    {"q4_k", WeightType::q4_k, 256, 144, {0, 2}},
    {"q5_k", WeightType::q5_k, 256, 176, {0, 2}},
    {"q6_k", WeightType::q6_k, 256, 210, {208}},
    {"iq4_xs", WeightType::iq4_xs, 256, 136, {0}}};

// A kernel with its activations quantized by the build it belongs to.
using Kernel = void (*)(WeightType, const uint8_t *, const void *, int64_t,
                        float *, int64_t, int64_t);
template <const PerWeightType<Q8RowsFn> *K>
void ours(WeightType t, const uint8_t *w, const void *a, int64_t rows,
          float *out, int64_t b, int64_t e) {
  (*K)[static_cast<int>(t)](t, w, *static_cast<const RowActs *>(a), rows, out,
                            b, e);
}
#ifdef Q8_BASELINE
template <void (*K)(WeightType, const uint8_t *, const OldRowActs &, int64_t,
                    float *, int64_t, int64_t)>
void theirs(WeightType t, const uint8_t *w, const void *a, int64_t rows,
            float *out, int64_t b, int64_t e) {
  K(t, w, *static_cast<const OldRowActs *>(a), rows, out, b, e);
}
#endif

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// calls[i](copy) over rounds, alternating: per call, thread CPU ms scaled to
// 4096 x 4096 weights (R weight rows of C columns), the copy of the weights
// rotating through `copies`; one line of figures for calls[0], and with a
// second call its figures and the median ratio of the two.
template <class Call>
static void time_and_print(const char *name, const char *path, int n, int64_t N,
                           int64_t R, int64_t C, size_t copies, int rounds,
                           const std::vector<Call> &calls) {
  std::vector<std::vector<double>> times(calls.size());
  size_t copy = 0;
  const double per = static_cast<double>(N) * N / (R * C); // calls per N x N
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const double t0 = cpu_ms();
      const int count = std::max(1, static_cast<int>(4 * per));
      for (int c = 0; c < count; ++c, copy = (copy + 1) % copies)
        calls[i](copy);
      times[i].push_back((cpu_ms() - t0) / count * per);
    }
  }
  const double ms = median(times[0]);
  printf("%-7s %-7s %4d  %10.3f %8.1f %9.1f", name, path, n, ms,
         N * N / (ms * 1e6), ms * 1e6 / N); // ns per 4096 weights of a row
  if (calls.size() == 2) {
    const double base = median(times[1]);
    std::vector<double> ratio(times[0].size());
    for (size_t r = 0; r < ratio.size(); ++r)
      ratio[r] = times[1][r] / times[0][r];
    printf("  %10.3f %8.1f %10.2f", base, N * N / (base * 1e6), median(ratio));
  }
  printf("\n");
}

int main(int argc, char **argv) {
  const int64_t N = 4096;
  int64_t R = N; // weight rows (--weight-rows: 256 keeps one q8_0 matrix within
                 // the 1 MB L2)
  int64_t C = N; // columns (--cols)
  bool hot = false;
  int rounds = 15;
  std::string type_list = "q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl,q2_k,q3_k,q4_k,q5_k,"
                          "q6_k,iq4_xs,int4",
              row_list = "1,2,4,8";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hot")
      hot = true;
    else if (a == "--rounds")
      rounds = atoi(argv[++i]);
    else if (a == "--types")
      type_list = argv[++i];
    else if (a == "--rows")
      row_list = argv[++i];
    else if (a == "--weight-rows")
      R = atoi(argv[++i]);
    else if (a == "--cols")
      C = atoi(argv[++i]);
  }
  auto wanted = [&](const char *name) {
    return ("," + type_list + ",").find("," + std::string(name) + ",") !=
           std::string::npos;
  };
  std::vector<int> row_counts;
  for (size_t p = 0; p < row_list.size();) {
    row_counts.push_back(atoi(row_list.c_str() + p));
    p = row_list.find(',', p);
    p = p == std::string::npos ? row_list.size() : p + 1;
  }
  auto copies_of = [&](size_t bytes) {
    return hot ? size_t{1} : std::max<size_t>(2, (160u << 20) / bytes + 1);
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(8 * C), out(8 * R), expect(8 * R);
  for (auto &v : x)
    v = u(rng);
  const bool vnni = cpu_features().avx512vnni;
  struct Named {
    const char *name;
    Kernel k;
  };
  std::vector<Named> kernels = {{"avx2", ours<&matmul_q8_avx2>}};
  if (vnni)
    kernels.push_back({"avx512", ours<&matmul_q8_avx512>});
  const size_t own = kernels.size();
#ifdef Q8_BASELINE
  kernels.push_back({"avx2", theirs<base_matmul_q8_avx2>});
  if (vnni)
    kernels.push_back({"avx512", theirs<base_matmul_q8_avx512>});
#endif
  printf("%-7s %-7s %4s  %10s %8s %9s", "type", "path", "rows", "cpu ms",
         "w/ns", "ns/row");
#ifdef Q8_BASELINE
  printf("  %10s %8s %10s", "base ms", "w/ns", "base/this");
#endif
  printf("\n");
  // A result against the scalar twin's (f32 rounding apart).
  auto check = [&](const char *name, const char *path, int n) {
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < n * R; ++i) {
      worst =
          std::max(worst, static_cast<double>(std::fabs(out[i] - expect[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(expect[i])));
    }
    if (worst > 1e-4 * scale)
      printf("MISMATCH %s %s rows %d: %g of %g\n", name, path, n, worst, scale);
  };
  for (const BlockType &ty : TYPES) {
    if (!wanted(ty.name))
      continue;
    const size_t bytes = static_cast<size_t>(R) * C / ty.elements * ty.bytes,
                 copies = copies_of(bytes);
    std::vector<uint8_t> w(bytes * copies);
    for (auto &b : w)
      b = static_cast<uint8_t>(rng());
    for (size_t b = 0; b < w.size(); b += ty.bytes) {
      for (int at : ty.f16_at) {
        const uint16_t h = fp32_to_fp16_ref(0.01f * (1 + u(rng)));
        memcpy(&w[b + at], &h, 2);
      }
    }
    for (int n : row_counts) {
      RowActs acts;
      quantize_row_acts(ty.t, x.data(), n, C, acts);
#ifdef Q8_BASELINE
      OldRowActs old;
      base_quantize_row_acts(ty.t, x.data(), n, C, old);
#else
      const RowActs &old = acts;
#endif
      auto acts_of = [&](size_t k) -> const void * {
        return k < own ? static_cast<const void *>(&acts)
                       : static_cast<const void *>(&old);
      };
      matmul_q8_ref(ty.t, w.data(), acts, R, expect.data(), 0, R);
      for (size_t path = 0; path < own; ++path) {
        std::vector<size_t> run = {path}; // then the baseline's, alternating
        if (path + own < kernels.size())
          run.push_back(path + own);
        std::vector<std::function<void(size_t)>> calls;
        for (size_t k : run) {
          kernels[k].k(ty.t, w.data(), acts_of(k), R, out.data(), 0, R);
          check(ty.name, kernels[k].name, n);
          calls.push_back([&, k](size_t copy) {
            kernels[k].k(ty.t, w.data() + copy * bytes, acts_of(k), R,
                         out.data(), 0, R);
          });
        }
        time_and_print(ty.name, kernels[path].name, n, N, R, C, copies, rounds,
                       calls);
      }
    }
  }
  if (wanted("int4")) { // symmetric groups of 32
    const int64_t group = 32;
    const size_t bytes = static_cast<size_t>(R) * C / 2,
                 copies = copies_of(bytes + R * C / group * 5);
    std::vector<uint8_t> packed(bytes * copies);
    for (auto &b : packed)
      b = static_cast<uint8_t>(rng());
    std::vector<float> scales(copies * R * C / group);
    for (auto &s : scales)
      s = 0.01f * (1 + u(rng));
    const std::vector<int8_t> zeros(copies * R * C / group, 0);
    auto view = [&](size_t copy) {
      return Int4View{packed.data() + copy * bytes,
                      scales.data() + copy * R * C / group,
                      zeros.data() + copy * R * C / group,
                      R,
                      C,
                      group,
                      true};
    };
    using Int4Kernel =
        void (*)(const Int4View &, const Int8Acts &, float *, int64_t, int64_t);
    std::vector<std::pair<const char *, Int4Kernel>> paths = {
        {"avx2", matmul_int4_int8_avx2}};
    if (vnni)
      paths.push_back({"avx512", matmul_int4_int8_vnni});
    for (int n : row_counts) {
      Int8Acts acts;
      quantize_acts(x.data(), n, C, group, acts);
      matmul_int4_int8_ref(view(0), acts, expect.data(), 0, R);
      for (const auto &[name, k] : paths) {
        k(view(0), acts, out.data(), 0, R);
        check("int4", name, n);
        const std::vector<std::function<void(size_t)>> calls = {
            [&, k = k](size_t copy) { k(view(copy), acts, out.data(), 0, R); }};
        time_and_print("int4", name, n, N, R, C, copies, rounds, calls);
      }
    }
  }
}
