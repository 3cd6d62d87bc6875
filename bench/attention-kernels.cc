// q·K and p·V of one KV head apart, one thread, the AVX2 and AVX-512 kernels alternating in one
// process (the per-kernel figures in attention_kernels.h's comments and docs/kv-cache.md):
//   pnpm build:native && g++ -std=c++17 -O2 -Ipackages/native/src bench/attention-kernels.cc \
//     packages/native/build/obj/{kernels/x86/attention_avx2,kernels/x86/attention_avx512,common/cpu,kernels/ref/matvec_q8_ref,kernels/ref/quant_ref}.o -o /tmp/attention-kernels
//   /tmp/attention-kernels [S = 32768] [rounds = 25]
// d 128, GQA groups of 1, 4 and 8, f16, q8_0 and q4_0 rows of random bytes (finite values, block
// scale 0.01). Block rows time q·K twice: `qk` in f32 (the rows decoded, the path before the integer
// product) and `int` (qk_q8, the query in Q8_0 blocks, quantized once outside the timing; the ops
// quantize it per call, g * d values). Eight heads' rows rotate (K of head h, V of head h + 4) so
// each read comes from memory, not the 32 MiB L3. Best of the rounds per kernel; the probe (a
// plain sum of 512 MiB, first two rounds) is one thread's read bandwidth, for scale only.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
#include "common/half.h"
#include "common/quant.h"
#include "ops/attention.h"
#include "ops/matvec_q8.h"
using namespace sparq;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const size_t S = argc > 1 ? atoi(argv[1]) : 32768, d = 128;
  const int reps = argc > 2 ? atoi(argv[2]) : 25;
  const int heads = 8;  // copies of the head so the rows are not in cache (8 * S rows)
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> q(8 * d), out(8 * d), sc(8 * S);
  for (auto& x : q) x = u(rng);
  for (auto& x : sc) x = u(rng) * 0.5f + 0.5f;
  struct T { KvType t; const char* name; size_t bytes; };
  T types[] = {{KvType::f16, "f16", d * 2}, {KvType::q8_0, "q8_0", d / 32 * 34}, {KvType::q4_0, "q4_0", d / 32 * 18}};
  // The 8 query rows as Q8_0 blocks (QueryBlocks, attention.h): codes, steps and bias lanes.
  std::vector<int8_t> qx(8 * d);
  std::vector<float> qdq(8 * d / 4), dq(d / 32), xs(d / 32);
  std::vector<int32_t> qbias[2] = {std::vector<int32_t>(8 * d / 4), std::vector<int32_t>(8 * d / 4)}, sum(d / 32);
  for (size_t t = 0; t < 8; t++) {
    quantize_act_row(WeightType::q8_0, q.data() + t * d, d, qx.data() + t * d, dq.data(), xs.data(), sum.data());
    for (size_t b = 0; b < d / 32; b++) {
      std::fill_n(qdq.data() + t * d / 4 + b * 8, 8, dq[b]);
      qbias[0][t * d / 4 + b * 8] = -128 * sum[b];
      qbias[1][t * d / 4 + b * 8] = -8 * sum[b];
    }
  }
  std::vector<float> big(1 << 27);  // 512 MB probe
  for (size_t i = 0; i < big.size(); i += 1024) big[i] = 1;
  const AttnKernels* ks[2] = {&attn_kernels_avx2(), &attn_kernels_avx512()};
  for (auto& ty : types) {
    std::vector<uint8_t> buf(heads * S * ty.bytes);
    for (auto& b : buf) b = rng() & 0xff;
    // Finite values: f16 rows hold values in [-1, 1], q8_0 blocks the scale 0.01 over random codes.
    if (ty.t == KvType::f16) { auto* h = reinterpret_cast<uint16_t*>(buf.data()); for (size_t i = 0; i < buf.size() / 2; i++) h[i] = fp32_to_fp16_ref(u(rng)); }
    else for (size_t b = 0; b < buf.size(); b += ty.bytes / (d / 32)) { uint16_t h = fp32_to_fp16_ref(0.01f); memcpy(&buf[b], &h, 2); }
    const bool blocks = ty.t != KvType::f16;
    const QueryBlocks qb{qx.data(), qdq.data(), qbias[ty.t == KvType::q4_0].data()};
    for (size_t g : {1, 4, 8}) {
      double best[2][4] = {{1e9, 1e9, 1e9, 1e9}, {1e9, 1e9, 1e9, 1e9}};
      for (int r = 0; r < reps; r++)
        for (int p = 0; p < 2; p++) {
          const AttnKernels& k = *ks[p];
          double t0 = now(); if (r < 2) { volatile double s = k.sum(big.data(), big.size()); (void)s; }
          if (r < 2) best[p][2] = std::min(best[p][2], now() - t0);
          double tq = 0, tv = 0, ti = 0;
          for (int h = 0; h < heads; h++) {
            const uint8_t* base = buf.data() + h * S * ty.bytes;
            double a = now();
            k.qk(sc.data(), S, base, ty.t, d, nullptr, 0, S, q.data(), g, 0.088f);
            double b = now();
            k.pv(out.data(), buf.data() + ((h + 4) % heads) * S * ty.bytes, ty.t, d, nullptr, 0, S, sc.data(), S, g, false);
            double c = now();
            if (blocks) k.qk_q8(sc.data(), S, buf.data() + ((h + 2) % heads) * S * ty.bytes, ty.t, d, nullptr, 0, S, qb, g, 0.088f);
            double e = now();
            tq += b - a; tv += c - b; ti += e - c;
          }
          best[p][0] = std::min(best[p][0], tq / heads);
          best[p][1] = std::min(best[p][1], tv / heads);
          best[p][3] = std::min(best[p][3], ti / heads);
        }
      for (int p = 0; p < 2; p++) {
        const double gb = S * ty.bytes / 1e9, probe = big.size() * 4 / 1e9 / best[p][2];
        printf("%-5s g %zu S %zu %-7s qk %6.2f ms %5.1f GB/s (%3.0f%%)  pv %6.2f ms %5.1f GB/s (%3.0f%%)", ty.name, g, S, ks[p]->name,
               best[p][0] * 1e3, gb / best[p][0], 100 * gb / best[p][0] / probe, best[p][1] * 1e3, gb / best[p][1], 100 * gb / best[p][1] / probe);
        if (blocks) printf("  int %6.2f ms %5.1f GB/s (%3.0f%%, %4.2fx qk)", best[p][3] * 1e3, gb / best[p][3], 100 * gb / best[p][3] / probe, best[p][0] / best[p][3]);
        printf("  probe %5.1f GB/s\n", probe);
      }
    }
  }
}
