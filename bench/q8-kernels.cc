// The per-row 'int8' kernels of matvec_q8.h (matmul_q8_avx2, matmul_q8_avx512) timed apart from
// the addon, one thread, 4096 x 4096, for the 32-element block types, 1 to 8 activation rows.
// Another build's kernels (e.g. main's) can be linked beside them, their symbols renamed with a
// base_ prefix, and the two alternate call by call, so that a shared machine loads both alike:
//   pnpm build:native
//   g++ -std=c++17 -O2 -mf16c -Ipackages/native/src bench/q8-kernels.cc \
//     packages/native/build/obj/{matvec_q8_avx2,matvec_q8_avx512,matvec_q8_ref,cpu}.o -o /tmp/q8-kernels
//   /tmp/q8-kernels [--hot] [--weight-rows 4096] [--rounds 15] [--types q4_0,q8_0] [--rows 1,2,4,8]
// With a baseline (main at f49c48f, whose RowActs still held bias lanes: OldRowActs below): copy its
// matvec_q8_avx2.o, matvec_q8_avx512.o and matvec_q8_ref.o, rename their entry points with objcopy
// --redefine-sym to base_matmul_q8_avx2 / base_matmul_q8_avx512 / base_quantize_row_acts taking an
// OldRowActs (the mangled names: nm on this file's object), localize the rest of their global
// symbols (--localize-symbol), link them too and compile with -DQ8_BASELINE.
// Cold (default): the weights rotate through 160 MB of copies, so every call reads them from DRAM;
// --hot: one copy (9-18 MB, inside the 32 MB L3; with --weight-rows 256 inside the 1 MB L2, which shows
// the instruction cost alone: the L3 is shared with the other core). Figures, per 4096 x 4096 weights:
// the median over rounds of thread CPU ms per call (descheduled time left out), and weights per ns.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu.h"
#include "half.h"
#include "matvec_q8.h"
#include "quant.h"
using namespace sparq;

#ifdef Q8_BASELINE
namespace sparq {
// The baseline's RowActs (main at f49c48f, which kept per-call bias lanes) and its quantizer.
struct OldRowActs {
  int64_t n = 0, cols = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> bias;
  std::vector<float> sum16, sum32;
  std::vector<int16_t> isum16;
};
void base_quantize_row_acts(WeightType t, const float* x, int64_t n, int64_t cols, OldRowActs& a);
void base_matmul_q8_avx2(WeightType t, const uint8_t* w, const OldRowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
void base_matmul_q8_avx512(WeightType t, const uint8_t* w, const OldRowActs& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end);
}  // namespace sparq
#endif

static double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct Type32 {
  const char* name;
  WeightType t;
  int bytes;
  bool min;  // an f16 minimum at byte 2
};
static const Type32 TYPES[] = {{"q4_0", WeightType::q4_0, 18, false}, {"q4_1", WeightType::q4_1, 20, true},
                               {"q5_0", WeightType::q5_0, 22, false}, {"q5_1", WeightType::q5_1, 24, true},
                               {"q8_0", WeightType::q8_0, 34, false}, {"iq4_nl", WeightType::iq4_nl, 18, false}};

// A kernel with its activations quantized by the build it belongs to.
using Kernel = void (*)(WeightType, const uint8_t*, const void*, int64_t, float*, int64_t, int64_t);
template <void (*K)(WeightType, const uint8_t*, const RowActs&, int64_t, float*, int64_t, int64_t)>
void ours(WeightType t, const uint8_t* w, const void* a, int64_t rows, float* out, int64_t b, int64_t e) {
  K(t, w, *static_cast<const RowActs*>(a), rows, out, b, e);
}
#ifdef Q8_BASELINE
template <void (*K)(WeightType, const uint8_t*, const OldRowActs&, int64_t, float*, int64_t, int64_t)>
void theirs(WeightType t, const uint8_t* w, const void* a, int64_t rows, float* out, int64_t b, int64_t e) {
  K(t, w, *static_cast<const OldRowActs*>(a), rows, out, b, e);
}
#endif

int main(int argc, char** argv) {
  const int64_t N = 4096;
  int64_t R = N;  // weight rows (--weight-rows: 256 keeps one q8_0 matrix within the 1 MB L2)
  bool hot = false;
  int rounds = 15;
  std::string type_list = "q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl", row_list = "1,2,4,8";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hot") hot = true;
    else if (a == "--rounds") rounds = atoi(argv[++i]);
    else if (a == "--types") type_list = argv[++i];
    else if (a == "--rows") row_list = argv[++i];
    else if (a == "--weight-rows") R = atoi(argv[++i]);
  }
  std::vector<int> row_counts;
  for (size_t p = 0; p < row_list.size();) {
    row_counts.push_back(atoi(row_list.c_str() + p));
    p = row_list.find(',', p);
    p = p == std::string::npos ? row_list.size() : p + 1;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(8 * N), out(8 * N), expect(8 * N);
  for (auto& v : x) v = u(rng);
  struct Named {
    const char* name;
    Kernel k;
  };
  std::vector<Named> kernels = {{"avx2", ours<matmul_q8_avx2>}};
  if (cpu_features().avx512vnni) kernels.push_back({"avx512", ours<matmul_q8_avx512>});
  const size_t own = kernels.size();
#ifdef Q8_BASELINE
  kernels.push_back({"avx2", theirs<base_matmul_q8_avx2>});
  if (cpu_features().avx512vnni) kernels.push_back({"avx512", theirs<base_matmul_q8_avx512>});
#endif
  printf("%-7s %-7s %4s  %10s %8s", "type", "path", "rows", "cpu ms", "w/ns");
#ifdef Q8_BASELINE
  printf("  %10s %8s %10s", "base ms", "w/ns", "base/this");
#endif
  printf("\n");
  for (const Type32& ty : TYPES) {
    if (("," + type_list + ",").find("," + std::string(ty.name) + ",") == std::string::npos) continue;
    const size_t bytes = static_cast<size_t>(R) * N / 32 * ty.bytes;
    const size_t copies = hot ? 1 : std::max<size_t>(2, (160u << 20) / bytes + 1);
    std::vector<uint8_t> w(bytes * copies);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    // Finite f16 scales (and minimums) in every block.
    for (size_t b = 0; b < w.size(); b += ty.bytes) {
      const uint16_t d = fp32_to_fp16_ref(0.01f * (1 + u(rng))), m = fp32_to_fp16_ref(-0.05f * (1 + u(rng)));
      memcpy(&w[b], &d, 2);
      if (ty.min) memcpy(&w[b + 2], &m, 2);
    }
    for (int n : row_counts) {
      RowActs acts;
      quantize_row_acts(ty.t, x.data(), n, N, acts);
#ifdef Q8_BASELINE
      OldRowActs old;
      base_quantize_row_acts(ty.t, x.data(), n, N, old);
#else
      const RowActs& old = acts;
#endif
      auto acts_of = [&](size_t k) -> const void* { return k < own ? static_cast<const void*>(&acts) : static_cast<const void*>(&old); };
      matmul_q8_ref(ty.t, w.data(), acts, R, expect.data(), 0, R);
      for (size_t path = 0; path < own; ++path) {
        // The kernels against the scalar twin (f32 rounding apart), then timed, alternating with the baseline.
        std::vector<size_t> run = {path};
        if (path + own < kernels.size()) run.push_back(path + own);
        for (size_t k : run) {
          kernels[k].k(ty.t, w.data(), acts_of(k), R, out.data(), 0, R);
          double worst = 0, scale = 0;
          for (int64_t i = 0; i < n * R; ++i) {
            worst = std::max(worst, static_cast<double>(std::fabs(out[i] - expect[i])));
            scale = std::max(scale, static_cast<double>(std::fabs(expect[i])));
          }
          if (worst > 1e-4 * scale) printf("MISMATCH %s %s rows %d: %g of %g\n", ty.name, kernels[k].name, n, worst, scale);
        }
        std::vector<std::vector<double>> times(run.size());
        size_t copy = 0;
        for (int r = 0; r < rounds; ++r) {
          for (size_t i = 0; i < run.size(); ++i) {
            const double t0 = cpu_ms();
            const int calls = static_cast<int>(4 * N / R);
            for (int c = 0; c < calls; ++c, copy = (copy + 1) % copies)
              kernels[run[i]].k(ty.t, w.data() + copy * bytes, acts_of(run[i]), R, out.data(), 0, R);
            times[i].push_back((cpu_ms() - t0) / calls * N / R);
          }
        }
        auto median = [](std::vector<double> v) {
          std::sort(v.begin(), v.end());
          return v[v.size() / 2];
        };
        const double ms = median(times[0]);
        printf("%-7s %-7s %4d  %10.3f %8.1f", ty.name, kernels[path].name, n, ms, N * N / (ms * 1e6));
        if (run.size() == 2) {
          const double base = median(times[1]);
          std::vector<double> ratio(times[0].size());
          for (size_t r = 0; r < ratio.size(); ++r) ratio[r] = times[1][r] / times[0][r];
          printf("  %10.3f %8.1f %10.2f", base, N * N / (base * 1e6), median(ratio));
        }
        printf("\n");
      }
    }
  }
}
