/*
 * What one core reads per second as a stream and as SparQ step 3's gather: rows of 256 bytes
 * (d 128 in f16) or 512 bytes (f32) at random positions, one in 8 (k = S/8), visited in
 * increasing order, with and without software prefetches into L2 8 KB ahead (what the attention
 * kernels do: kGatherAhead in packages/native/src/attention_kernels.h). A plain C program, so
 * that no runtime sits between the loop and the memory:
 *
 *   cc -O2 -mavx2 bench/gather.c -o /tmp/gather && /tmp/gather
 *
 * Each figure is the best of 5 passes over a 1 GiB buffer (far larger than any L3), in GB/s of
 * the bytes the loop reads. Dense's bytes at the stream rate over SparQ's streamed bytes at that
 * rate plus its gathered bytes at the gather rate estimate SparQ's speed-up on one core; an
 * estimate, not a bound: the attention kernels gather f32 rows faster than this loop (README,
 * `sparq bench`: full run).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BYTES ((size_t)1 << 30)
#define PASSES 5
#define AHEAD_BYTES 8192

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Sums `count` rows of `row` bytes at buf + rows[i] * row; prefetches the row AHEAD_BYTES ahead into L2 if asked. */
static float gather(const char *buf, const uint32_t *rows, size_t count, size_t row, int prefetch) {
  const size_t ahead_rows = AHEAD_BYTES / row;
  __m256 acc = _mm256_setzero_ps();
  for (size_t i = 0; i < count; i++) {
    if (prefetch && i + ahead_rows < count) {
      const char *ahead = buf + (size_t)rows[i + ahead_rows] * row;
      for (size_t b = 0; b < row; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T1);
    }
    const float *p = (const float *)(buf + (size_t)rows[i] * row);
    for (size_t j = 0; j < row / 4; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(p + j));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  return lanes[0];
}

int main(void) {
  char *buf = aligned_alloc((size_t)1 << 21, BYTES);
  if (!buf) return 1;
  madvise(buf, BYTES, MADV_HUGEPAGE); /* as the engine's buffers (packages/core/src/memory.ts) */
  memset(buf, 1, BYTES);
  uint32_t *rows = malloc(sizeof(uint32_t) * (BYTES / 256));
  uint64_t state = 88172645463325252ull; /* xorshift64: a fixed random subset each run */
  volatile float sink = 0;

  double best = 1e9;
  for (int pass = 0; pass < PASSES; pass++) {
    const double t0 = now();
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t j = 0; j < BYTES / 4; j += 32)
      for (int u = 0; u < 4; u++) acc[u] = _mm256_add_ps(acc[u], _mm256_loadu_ps((const float *)buf + j + 8 * u));
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    sink += lanes[0];
    const double t = now() - t0;
    if (t < best) best = t;
  }
  printf("stream:                    %5.1f GB/s\n", BYTES / best / 1e9);

  for (size_t row = 256; row <= 512; row *= 2) {
    size_t count = 0;
    for (size_t i = 0; i < BYTES / row; i++) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      if ((state & 7) == 0) rows[count++] = (uint32_t)i;
    }
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
      best = 1e9;
      for (int pass = 0; pass < PASSES; pass++) {
        const double t0 = now();
        sink += gather(buf, rows, count, row, prefetch);
        const double t = now() - t0;
        if (t < best) best = t;
      }
      printf("gather %3zu-byte rows, %s: %5.1f GB/s\n", row, prefetch ? "L2 prefetch" : "no prefetch", count * row / best / 1e9);
    }
  }
  return sink == 12345 ? 2 : 0;
}
