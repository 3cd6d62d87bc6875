// One SparQ decode step of one layer at a real shape, whole and stage by stage
// (docs/sparq-step.md):
//   pnpm build:native && g++ -std=c++17 -O2 -pthread -Ipackages/native/src
//   bench/sparq-step.cc \
//     packages/native/build/obj/{ops/{attention_ops,topk_select,kv_append},kernels/ref/attention_ref,kernels/x86/{attention_avx2,attention_avx512},common/{cpu,threads}}.o
//     \ -o /tmp/sparq-step
//   /tmp/sparq-step [S = 16384] [g = 1] [rounds = 7]
// 32 query heads over 32 / g KV heads, d 128, f16 K and V rows, K transposed in
// 4-bit codes (a session's default with f16 KV), r 16, k S/8, l k/4 (sparq
// bench's SparQ row). Random values in
// [-1, 1]; one layer's cache is 288 MiB at S 16k, far past the L3, so every
// stage reads memory. Printed per kernel path: a decode step's kv_append of one
// token (1 thread, CPU time); the whole op (sparq_decode) on 1 thread (CPU
// time, robust to load) and on 2 (wall time); then each stage on 1 thread,
// called as sparq_decode calls it, summed over the KV heads: step 1 (qk_cols),
// the softmax sum (exp_sum), top-k (topk_select), alpha (the gather of the
// chosen logits and their exp_sum) and the exact attention over the chosen rows
// (qk over the gathered K rows, exp_sum, pv over the gathered V rows), with
// each stage's bytes and GB/s. Best of the rounds (the paths alternate within a
// round); a read probe (one thread's plain sum of 512 MiB, wall time) for
// scale.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "common/cpu.h"
#include "common/half.h"
#include "common/threads.h"
using namespace sparq;

static double wall() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
static double cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
  const int64_t S = argc > 1 ? atoll(argv[1]) : 16384,
                g = argc > 2 ? atoll(argv[2]) : 1;
  const int rounds = argc > 3 ? atoi(argv[3]) : 7;
  const int64_t H = 32, nkv = H / g, d = 128;
  const SparqArgs p{16, S / 8, S / 32, true};
  // One layer's cache as sparq bench's session makes it with f16 KV: f16 K and
  // V rows and the 'k-twice' layout's K transposed in 4-bit codes
  // (DEFAULT_SESSION_KT), filled by kv_append.
  const size_t kt_blocks = static_cast<size_t>((S + KT_BLOCK - 1) / KT_BLOCK);
  std::vector<uint16_t> k(nkv * S * d), v(nkv * S * d),
      kt_scale(nkv * d * kt_blocks);
  std::vector<uint8_t> kt(nkv * d * kt_blocks * KT_BLOCK / 2);
  std::vector<double> vsum(nkv * d, 0.0);
  int32_t npast = 0, npad = 0;
  CacheView c;
  c.ktype = c.vtype = KvType::f16;
  c.kt_dtype = KtType::i4;
  c.batch = 1, c.nkv = nkv, c.d = d, c.cap = S;
  c.k = k.data(), c.kT = kt.data(), c.kt_scale = kt_scale.data(),
  c.v = v.data(), c.vsum = vsum.data(), c.npast = &npast, c.npad = &npad;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  constexpr int64_t kChunk = 256;
  std::vector<float> kx(kChunk * nkv * d), vx(kChunk * nkv * d);
  for (int64_t pos = 0; pos < S - 1; pos += kChunk) {
    const int64_t m = std::min(kChunk, S - 1 - pos);
    for (int64_t i = 0; i < m * nkv * d; i++)
      kx[i] = u(rng), vx[i] = u(rng);
    kv_append(c, 0, kx.data(), vx.data(), m);
  }
  // The last position as a decode step appends it (timed below, then undone and
  // done again).
  for (int64_t i = 0; i < nkv * d; i++)
    kx[i] = u(rng), vx[i] = u(rng);
  const std::vector<double> vsum_before = vsum;
  auto append_one = [&] {
    npast = static_cast<int32_t>(S - 1);
    vsum = vsum_before;
    kv_append(c, 0, kx.data(), vx.data(), 1);
  };
  append_one();
  std::vector<float> q(H * d), out(H * d);
  for (auto &x : q)
    x = u(rng);

  const KernelPath paths[] = {KernelPath::avx2, KernelPath::avx512};
  const char *stage_names[] = {
      "step 1 (qk_cols)", "softmax sum",    "top-k",    "alpha",
      "exact: qk",        "exact: softmax", "exact: pv"};
  constexpr int kStages = 7;
  const size_t n = static_cast<size_t>(S), kk = static_cast<size_t>(p.k),
               local = static_cast<size_t>(p.l);
  const size_t r = static_cast<size_t>(p.r);
  // Bytes per KV head of the stages that read the cache (the rest work on the
  // logits, in L2).
  const double stage_bytes[kStages] = {
      (0.5 + 2.0 / KT_BLOCK) * r * n, 0, 0, 0, 2.0 * kk * d, 0, 2.0 * kk * d};
  // One thread's streaming read (a plain sum of 512 MiB), the bound of step 1's
  // column streams.
  std::vector<float> big(size_t{1} << 27);
  for (size_t i = 0; i < big.size(); i += 1024)
    big[i] = 1;
  double probe = 1e9;
  double whole1[2], whole2[2], append1[2] = {1e9, 1e9}, stage[2][kStages];
  std::fill(whole1, whole1 + 2, 1e9);
  std::fill(whole2, whole2 + 2, 1e9);
  std::fill(&stage[0][0], &stage[0][0] + 2 * kStages, 1e9);
  std::vector<float> logits(g * n), sel(kk), probs(g * kk);
  std::vector<int32_t> i1(r), i2(kk);
  std::vector<double> tau(g, 1.0);
  std::vector<float> qs(g * r), mx(g);
  for (int round = 0; round < rounds; round++)
    for (int pi = 0; pi < 2; pi++) {
      force_kernel_path(&paths[pi]);
      const AttnKernels &kt_ = attn_kernels();
      set_pool_threads(1);
      double t0 = wall();
      volatile double sink = kt_.sum(big.data(), big.size());
      (void)sink;
      probe = std::min(probe, wall() - t0);
      t0 = cpu();
      append_one();
      append1[pi] = std::min(append1[pi], cpu() - t0);
      t0 = cpu();
      sparq_decode(c, q.data(), out.data(), H, p, SparqTraceView{}, nullptr);
      whole1[pi] = std::min(whole1[pi], cpu() - t0);
      set_pool_threads(2);
      sparq_decode(c, q.data(), out.data(), H, p, SparqTraceView{},
                   nullptr); // wakes the worker
      t0 = wall();
      sparq_decode(c, q.data(), out.data(), H, p, SparqTraceView{}, nullptr);
      whole2[pi] = std::min(whole2[pi], wall() - t0);
      set_pool_threads(1);
      // Stage by stage, 1 thread, every KV head (i1 = the first r components of
      // head 0's q: the columns' positions in memory do not matter to the
      // time).
      double t[kStages] = {};
      for (int64_t h = 0; h < nkv; h++) {
        const float *qh = q.data() + h * g * d;
        for (size_t c_ = 0; c_ < r; c_++)
          i1[c_] = static_cast<int32_t>(c_ * (d / r));
        for (int64_t t_ = 0; t_ < g; t_++)
          for (size_t c_ = 0; c_ < r; c_++)
            qs[t_ * r + c_] = qh[t_ * d + i1[c_]];
        double a = cpu();
        kt_.qk_cols(logits.data(), n, c.kt_head(0, h), i1.data(), r, 0, n,
                    qs.data(), g, tau.data(), mx.data());
        double b = cpu();
        t[0] += b - a;
        float inv = 0;
        for (int64_t t_ = 0; t_ < g; t_++)
          inv = static_cast<float>(
              1.0 / kt_.exp_sum(logits.data() + t_ * n, n, mx[t_], g > 1));
        a = cpu();
        t[1] += a - b;
        topk_select(kt_, logits.data(), n - local, kk - local, 0, i2.data());
        for (size_t j = 0; j < local; j++)
          i2[kk - local + j] = static_cast<int32_t>(n - local + j);
        b = cpu();
        t[2] += b - a;
        for (size_t j = 0; j < kk; j++)
          sel[j] = logits[i2[j]];
        volatile double alpha = kt_.exp_sum(sel.data(), kk, mx[0], false) * inv;
        (void)alpha;
        a = cpu();
        t[3] += a - b;
        kt_.qk(probs.data(), kk, c.k_rows(0, h), c.ktype, d, i2.data(), 0,
               kk, qh, g, 0.088f);
        b = cpu();
        t[4] += b - a;
        for (int64_t t_ = 0; t_ < g; t_++)
          kt_.exp_sum(probs.data() + t_ * kk, kk,
                      kt_.max(probs.data() + t_ * kk, kk), true);
        a = cpu();
        t[5] += a - b;
        kt_.pv(out.data() + h * g * d, c.v_rows(0, h), c.vtype, d, i2.data(),
               0, kk, probs.data(), kk, g, false);
        b = cpu();
        t[6] += b - a;
      }
      for (int s = 0; s < kStages; s++)
        stage[pi][s] = std::min(stage[pi][s], t[s]);
    }
  std::printf(
      "# SparQ step, one layer: %lld query heads over %lld KV heads, d %lld, S "
      "%lld, r %lld, k %lld, l %lld, f16 rows + i4 kT; best of %d\n",
      (long long)H, (long long)nkv, (long long)d, (long long)S, (long long)p.r,
      (long long)p.k, (long long)p.l, rounds);
  std::printf("read probe, 1 thread: %.1f GB/s\n",
              4.0 * big.size() / probe / 1e9);
  for (int pi = 0; pi < 2; pi++) {
    std::printf("%s: kv_append of one token %.3f ms CPU; sparq_decode 1 thread "
                "%.3f ms CPU, 2 threads %.3f ms wall\n",
                path_name(paths[pi]), 1e3 * append1[pi], 1e3 * whole1[pi],
                1e3 * whole2[pi]);
    double total = 0;
    for (int s = 0; s < kStages; s++) {
      total += stage[pi][s];
      const double bytes = stage_bytes[s] * nkv;
      if (bytes > 0)
        std::printf("  %-18s %7.3f ms  %6.1f MB  %5.1f GB/s\n", stage_names[s],
                    1e3 * stage[pi][s], bytes / 1e6,
                    bytes / stage[pi][s] / 1e9);
      else
        std::printf("  %-18s %7.3f ms\n", stage_names[s], 1e3 * stage[pi][s]);
    }
    std::printf("  %-18s %7.3f ms (the op's other work: %.3f ms)\n", "stages",
                1e3 * total, 1e3 * (whole1[pi] - total));
  }
  force_kernel_path(nullptr);
}
