// One activation row (decode) against a weight matrix: this engine's per-row 'int8' kernels
// (matvec_q8.h: matmul_q8_avx2, matmul_q8_avx512) beside llama.cpp's own kernels from the CPU
// backends node-llama-cpp ships prebuilt (libggml-cpu-haswell.so: AVX2 + FMA + F16C;
// libggml-cpu-zen4.so: AVX-512 with VNNI), loaded with dlopen. One thread; the calls alternate
// round by round, so a shared machine slows all alike.
// - "ggml <cpu>": ggml_vec_dot_<type>_q8_<0|1|K>, called once per weight row, as llama.cpp does
//   for a weight kept in the file's layout. Each side quantizes the activation row its own way
//   (ggml's quantize_row_q8_*); the results are compared (they differ by the activation rounding
//   and the f32 summation order).
// - "ggml <cpu> x8": the gemv over a copy with 8 rows interleaved that llama.cpp makes at load for
//   some types (its CPU_REPACK buffers: Q4_0 and Q4_K on AVX2 CPUs, others in newer versions).
//   Timing only: the weights are random bytes in that copy's size, with the leading 8 (16) f16
//   scales (and minimums) of each interleaved block made finite; no result is checked.
//   pnpm build:native && o=packages/native/build/obj
//   g++ -std=c++17 -O2 -mf16c -mavx2 -Ipackages/native/src bench/ggml-rows.cc
//     $o/kernels/x86/{matvec_q8_avx2,matvec_q8_avx512}.o $o/kernels/ref/matvec_q8_ref.o $o/common/cpu.o
//     -ldl -lpthread -o /tmp/ggml-rows
//   /tmp/ggml-rows [--lib <node-llama-cpp's bins/linux-x64>] [--hot] [--threads 1] [--rounds 15]
//     [--types q4_k,q6_k]
// Cold (default): the weights (4096 x 4096) rotate through 160 MB of copies, so every call reads
// them from DRAM; --hot: 256 weight rows, one copy (inside the 1 MB L2): the instructions' cost.
// --threads T: the weight rows split in T equal ranges (multiples of 8), one per thread (the caller
// and T - 1 spinning workers), as llama.cpp splits a matvec.
// Figures: the median per 4096 x 4096 weights of thread CPU time (one thread) or wall time (more),
// in ms and per 4096-weight row (ns); cold, the weight bytes read per second and their share of the
// read bandwidth that T threads reach on a plain summing loop, probed before each type (the
// "read GB/s" of bench/matvec.ts).
#include <dlfcn.h>
#include <time.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu.h"
#include "common/half.h"
#include "common/quant.h"
#include "ops/matvec_q8.h"
using namespace sparq;

static double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// The caller and T - 1 workers spinning on a call counter: run(job) calls job(t) on thread t and
// returns when all are done.
class Team {
 public:
  explicit Team(int threads) : threads_(threads) {
    for (int t = 1; t < threads; ++t)
      workers_.emplace_back([this, t] {
        for (uint64_t seen = 0;;) {
          uint64_t g;
          while ((g = generation_.load(std::memory_order_acquire)) == seen) _mm_pause();
          if (quit_.load()) return;
          seen = g;
          (*job_)(t);
          done_.fetch_add(1, std::memory_order_release);
        }
      });
  }
  ~Team() {
    quit_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    for (auto& w : workers_) w.join();
  }
  int size() const { return threads_; }
  void run(const std::function<void(int)>& job) {
    job_ = &job;
    done_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
    job(0);
    while (done_.load(std::memory_order_acquire) != threads_ - 1) _mm_pause();
  }

 private:
  int threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> quit_{false};
};
// GB/s of `team` summing 256 MB (each thread its share), best of 5.
static double read_bandwidth(Team& team) {
  static std::vector<int64_t> buffer((256u << 20) / 8, 1);
  const size_t per = buffer.size() / 4 / team.size();  // 32-byte vectors per thread
  std::vector<long long> sink(team.size() * 8);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = wall_ms();
    team.run([&](int t) {
      __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
      const __m256i* p = reinterpret_cast<const __m256i*>(buffer.data()) + t * per;
      for (size_t i = 0; i < per; i += 4) {
        a = _mm256_add_epi32(a, _mm256_loadu_si256(p + i));
        b = _mm256_add_epi32(b, _mm256_loadu_si256(p + i + 1));
        c = _mm256_add_epi32(c, _mm256_loadu_si256(p + i + 2));
        d = _mm256_add_epi32(d, _mm256_loadu_si256(p + i + 3));
      }
      sink[t * 8] = _mm256_extract_epi64(_mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d)), 0);
    });
    best = std::max(best, static_cast<double>(per * team.size() * 32) / ((wall_ms() - t0) * 1e6));
  }
  return best;
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ggml's signatures (ggml-cpu/quants.h): vec_dot(n, out, bs, x, bx, y, by, nrc) with nrc = 1 for one
// product; quantize_row(x, y, k).
using VecDot = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
using QuantizeRow = void (*)(const float*, void*, int64_t);

struct BlockType {
  const char *name, *ggml;  // ggml: the vec_dot's name part (q4_K_q8_K)
  WeightType t;
  char act;        // the activation block: '0' (Q8_0, 34 bytes), '1' (Q8_1, 36), 'K' (Q8_K, 292)
  int f16_at[2];   // the block's f16 scales (-1: none)
  const char* x8;  // ggml's 8-row interleaved block (block_<x8>x8), or null
};
static const BlockType TYPES[] = {
    {"q4_0", "q4_0_q8_0", WeightType::q4_0, '0', {0, -1}, "q4_0"},   {"q4_1", "q4_1_q8_1", WeightType::q4_1, '1', {0, 2}, nullptr},
    {"q5_0", "q5_0_q8_0", WeightType::q5_0, '0', {0, -1}, nullptr},   {"q5_1", "q5_1_q8_1", WeightType::q5_1, '1', {0, 2}, nullptr},
    {"q8_0", "q8_0_q8_0", WeightType::q8_0, '0', {0, -1}, nullptr},   {"iq4_nl", "iq4_nl_q8_0", WeightType::iq4_nl, '0', {0, -1}, "iq4_nl"},
    {"q2_k", "q2_K_q8_K", WeightType::q2_k, 'K', {80, 82}, "q2_K"}, {"q3_k", "q3_K_q8_K", WeightType::q3_k, 'K', {108, -1}, nullptr},
    {"q4_k", "q4_K_q8_K", WeightType::q4_k, 'K', {0, 2}, "q4_K"},  {"q5_k", "q5_K_q8_K", WeightType::q5_k, 'K', {0, 2}, nullptr},
    {"q6_k", "q6_K_q8_K", WeightType::q6_k, 'K', {208, -1}, nullptr}, {"iq4_xs", "iq4_xs_q8_K", WeightType::iq4_xs, 'K', {0, -1}, nullptr}};

// ggml::cpu::repack::gemv<block, 8, 8, activation type>(n, out, bs, x, y, nr, nc), by mangled name.
using Gemv = void (*)(int, float*, size_t, const void*, const void*, int, int);
static std::string gemv_symbol(const char* block, int act_type) {
  const std::string b = std::string("block_") + block;
  return "_ZN4ggml3cpu6repack4gemvI" + std::to_string(b.size()) + b + "Ll8ELl8EL9ggml_type" + std::to_string(act_type) + "EEEviPfmPKvS7_ii";
}

struct Ggml {
  const char* name;
  void* lib;
};

int main(int argc, char** argv) {
  std::string dir = "node_modules/.pnpm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64", types = "q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_xs";
  bool hot = false;
  int rounds = 15, threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hot") hot = true;
    else if (a == "--rounds" && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (a == "--types" && i + 1 < argc) types = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::max(1, atoi(argv[++i]));
    else if (a == "--lib" && i + 1 < argc) dir = argv[++i];
    else {
      fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const int64_t N = 4096, R = hot ? 256 : N, C = N;
  // libggml-base.so first (the CPU backends link it by name), then each CPU backend the CPU runs.
  if (!dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  std::vector<Ggml> ggml;
  for (const char* v : {"haswell", "zen4"}) {
    if (std::string(v) == "zen4" && !cpu_features().avx512vnni) continue;
    void* lib = dlopen((dir + "/libggml-cpu-" + v + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    if (auto init = reinterpret_cast<void (*)()>(dlsym(lib, "ggml_cpu_init"))) init();
    ggml.push_back({v, lib});
  }
  Team team(threads);
  // Weight rows [begin, end) of the matrix at m against one activation row.
  struct Path {
    std::string name;
    std::function<void(const uint8_t*, float*, int64_t, int64_t)> rows;
  };
  // The whole product, split over the team.
  auto run = [&](const Path& path, const uint8_t* m, float* out) {
    if (threads == 1) return path.rows(m, out, 0, R);
    team.run([&](int t) { path.rows(m, out, R / 8 * t / threads * 8, t + 1 == threads ? R : R / 8 * (t + 1) / threads * 8); });
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(C);
  for (auto& v : x) v = u(rng);
  printf("%d thread(s), weights %s\n", threads, hot ? "in L2 (--hot)" : "from DRAM");
  printf("%-7s %-15s %10s %9s %9s %8s %8s\n", "type", "kernel", threads == 1 ? "cpu ms" : "wall ms", "ns/row", "vs avx2", "GB/s", "of read");
  for (const BlockType& ty : TYPES) {
    if (("," + types + ",").find("," + std::string(ty.name) + ",") == std::string::npos) continue;
    const BlockShape shape = block_shape(ty.t);
    const size_t row_bytes = static_cast<size_t>(C) / shape.elements * shape.bytes, bytes = row_bytes * R;
    const size_t copies = hot ? 1 : std::max<size_t>(2, (160u << 20) / bytes + 1);
    std::vector<uint8_t> w(bytes * copies);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    for (size_t b = 0; b < w.size(); b += shape.bytes)
      for (int at : ty.f16_at)
        if (at >= 0) {
          const uint16_t h = fp32_to_fp16_ref(0.01f * (1 + u(rng)));
          memcpy(&w[b + at], &h, 2);
        }
    RowActs acts;
    quantize_row_acts(ty.t, x.data(), 1, C, acts);
    std::vector<Path> paths = {{"sparq avx2", [&](const uint8_t* m, float* out, int64_t b, int64_t e) {
                                  matmul_q8_avx2[static_cast<int>(ty.t)](ty.t, m, acts, R, out, b, e);
                                }}};
    if (cpu_features().avx512vnni)
      paths.push_back({"sparq avx512", [&](const uint8_t* m, float* out, int64_t b, int64_t e) {
                         matmul_q8_avx512[static_cast<int>(ty.t)](ty.t, m, acts, R, out, b, e);
                       }});
    const int act_bytes = ty.act == 'K' ? 292 : ty.act == '1' ? 36 : 34, act_elements = ty.act == 'K' ? 256 : 32;
    std::vector<std::vector<uint8_t>> ys;
    for (const Ggml& g : ggml) {
      const std::string q = std::string("quantize_row_q8_") + ty.act, dot = std::string("ggml_vec_dot_") + ty.ggml;
      auto quantize = reinterpret_cast<QuantizeRow>(dlsym(g.lib, q.c_str()));
      auto vec_dot = reinterpret_cast<VecDot>(dlsym(g.lib, dot.c_str()));
      if (!quantize || !vec_dot) {
        fprintf(stderr, "%s: %s or %s missing\n", g.name, q.c_str(), dot.c_str());
        return 1;
      }
      ys.emplace_back(static_cast<size_t>(C / act_elements * act_bytes));
      quantize(x.data(), ys.back().data(), C);
      const uint8_t* y = ys.back().data();
      paths.push_back({std::string("ggml ") + g.name, [=](const uint8_t* m, float* out, int64_t b, int64_t e) {
                         for (int64_t r = b; r < e; ++r) vec_dot(static_cast<int>(C), out + r, 0, m + r * row_bytes, 0, y, 0, 1);
                       }});
    }
    const size_t checked = paths.size();
    // The interleaved copies: the same bytes per weight; each 8-row block's first 16 (K-quants with
    // minimums: 32) bytes are its rows' f16 scales (and minimums).
    std::vector<uint8_t> w8;
    if (ty.x8) {
      w8 = w;
      const int x8_bytes = 8 * shape.bytes, scale_bytes = ty.f16_at[1] >= 0 && shape.elements == 256 ? 32 : 16;
      for (size_t b = 0; b + x8_bytes <= w8.size(); b += x8_bytes)
        for (int at = 0; at < scale_bytes; at += 2) {
          const uint16_t h = fp32_to_fp16_ref(0.01f * (1 + u(rng)));
          memcpy(&w8[b + at], &h, 2);
        }
      for (size_t i = 0; i < ggml.size(); ++i) {
        const std::string symbol = gemv_symbol(ty.x8, ty.act == 'K' ? 15 : 8);
        auto gemv = reinterpret_cast<Gemv>(dlsym(ggml[i].lib, symbol.c_str()));
        if (!gemv) continue;  // not in this build
        const uint8_t* y = ys[i].data();
        const ptrdiff_t shift = w8.data() - w.data();
        paths.push_back({std::string("ggml ") + ggml[i].name + " x8", [=](const uint8_t* m, float* out, int64_t b, int64_t e) {
                           gemv(static_cast<int>(C), out + b, static_cast<size_t>(R), m + shift + b * row_bytes, y, 1, static_cast<int>(e - b));
                         }});
      }
    }
    // The results against the first path's (each side's own activation rounding: close, not equal).
    std::vector<std::vector<float>> outs(paths.size(), std::vector<float>(R));
    for (size_t p = 0; p < paths.size(); ++p) run(paths[p], w.data(), outs[p].data());
    double scale = 0;
    for (float v : outs[0]) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (size_t p = 1; p < checked; ++p) {
      double worst = 0;
      for (int64_t r = 0; r < R; ++r) worst = std::max(worst, static_cast<double>(std::fabs(outs[p][r] - outs[0][r])));
      if (worst > 2e-2 * scale) printf("MISMATCH %s %s: %g of %g\n", ty.name, paths[p].name.c_str(), worst, scale);
    }
    std::vector<std::vector<double>> times(paths.size());
    const double per = static_cast<double>(N) * N / (R * C);
    const int count = std::max(1, static_cast<int>(4 * per));
    size_t copy = 0;
    const double probe = hot ? 0 : read_bandwidth(team);
    auto now = [&] { return threads == 1 ? cpu_ms() : wall_ms(); };
    for (int round = 0; round < rounds; ++round)
      for (size_t p = 0; p < paths.size(); ++p) {
        const double t0 = now();
        for (int c = 0; c < count; ++c, copy = (copy + 1) % copies) run(paths[p], w.data() + copy * bytes, outs[p].data());
        times[p].push_back((now() - t0) / count * per);
      }
    const double base = median(times[0]);
    for (size_t p = 0; p < paths.size(); ++p) {
      const double ms = median(times[p]), gbs = static_cast<double>(row_bytes) * N / (ms * 1e6);
      printf("%-7s %-15s %10.3f %9.1f %8.2fx %8.1f", ty.name, paths[p].name.c_str(), ms, ms * 1e6 / N, base / ms, gbs);
      if (probe > 0) printf(" %7.0f%%", 100 * gbs / probe);
      printf("\n");
    }
    if (probe > 0) printf("%-7s read bandwidth probe, %d thread(s): %.1f GB/s\n", ty.name, threads, probe);
  }
}
