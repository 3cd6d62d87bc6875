/*
 * What one core reads per second as a stream and as SparQ step 3's gather: rows of 256 bytes
 * (d 128 in f16) or 512 bytes (f32) at random positions, one in 8 (k = S/8), visited in
 * increasing order, with and without software prefetches into L2 8 KB ahead (what the attention
 * kernels do: kGatherAhead in packages/native/src/kernels/attention_kernels.h). A plain C program, so
 * that no runtime sits between the loop and the memory:
 *
 *   cc -O2 -mavx2 -pthread bench/gather.c -o /tmp/gather && /tmp/gather
 *
 * Each figure is the best of 5 passes over a 1 GiB buffer (far larger than any L3), in GB/s of
 * the bytes the loop reads. Dense's bytes at the stream rate over SparQ's streamed bytes at that
 * rate plus its gathered bytes at the gather rate estimate SparQ's speed-up on one core.
 *
 * Then the memory traffic of one whole f16 decode step, without its arithmetic, on 1 and 2 threads
 * (heads split between them): dense streams every K and V row of 16 heads at S = 32k, d = 128;
 * SparQ (r = 16, k = S/8, l = k/4) streams r rows of K transposed per head, then gathers the K and
 * V rows of k positions: k - l random ones, ascending, and the last l. Their time ratio, as a
 * share of spec.md §3's data ratio (5.33x), is what an attention kernel would reach if its arithmetic
 * were free and it moved memory as these loops do; an estimate, not a bound (the attention
 * kernels gather f32 rows faster per byte than these loops, README `sparq bench`: full run).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
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

/* The bytes at p (a multiple of 32) summed as floats into acc. */
static __m256 sum_bytes(const char *p, size_t bytes, __m256 acc) {
  for (size_t b = 0; b < bytes; b += 32) acc = _mm256_add_ps(acc, _mm256_loadu_ps((const float *)(p + b)));
  return acc;
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
    acc = sum_bytes(buf + (size_t)rows[i] * row, row, acc);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  return lanes[0];
}

/* ---- one f16 decode step's memory traffic, dense and SparQ ---- */
#define HEADS 16
#define SEQ 32768
#define DIM 128
#define COMPONENTS 16            /* r = d / 8 */
#define SELECTED (SEQ / 8)       /* k */
#define LOCAL (SELECTED / 4)     /* l */
#define F16_ROW (DIM * 2)        /* bytes of one K or V row */

static const char *k_rows, *v_rows, *k_cols; /* (HEADS, SEQ, DIM), the same, (HEADS, DIM, SEQ), f16 */
static uint32_t selected[HEADS][SELECTED];   /* each head's k positions, ascending */
static int step_threads, step_sparq;
static volatile float step_sink[2]; /* each thread's sum, so that no read is optimised away */

/* SparQ's reads for one head: r rows of K transposed (every 8th component), then k K rows and k V rows. */
static __m256 sparq_head(int h, __m256 acc) {
  const char *cols = k_cols + (size_t)h * DIM * SEQ * 2;
  for (int c = 0; c < COMPONENTS; c++) acc = sum_bytes(cols + (size_t)c * 8 * SEQ * 2, SEQ * 2, acc);
  const float gathered = gather(k_rows + (size_t)h * SEQ * F16_ROW, selected[h], SELECTED, F16_ROW, 1) +
                         gather(v_rows + (size_t)h * SEQ * F16_ROW, selected[h], SELECTED, F16_ROW, 1);
  return _mm256_add_ps(acc, _mm256_set1_ps(gathered));
}

static void *step_worker(void *arg) {
  const int t = (int)(intptr_t)arg;
  __m256 acc = _mm256_setzero_ps();
  for (int h = t * HEADS / step_threads; h < (t + 1) * HEADS / step_threads; h++) {
    if (step_sparq) acc = sparq_head(h, acc);
    else acc = sum_bytes(v_rows + (size_t)h * SEQ * F16_ROW, SEQ * F16_ROW, sum_bytes(k_rows + (size_t)h * SEQ * F16_ROW, SEQ * F16_ROW, acc));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  step_sink[t] = lanes[0];
  return NULL;
}

static double step_seconds(int threads, int sparq) {
  pthread_t workers[2];
  step_threads = threads, step_sparq = sparq;
  const double t0 = now();
  for (int t = 1; t < threads; t++) pthread_create(&workers[t], NULL, step_worker, (void *)(intptr_t)t);
  step_worker(0);
  for (int t = 1; t < threads; t++) pthread_join(workers[t], NULL);
  return now() - t0;
}

static void step_model(char *buf, uint64_t *state) {
  /* K, V and K transposed: three 128 MB regions of the 1 GiB buffer. */
  const size_t region = (size_t)HEADS * SEQ * F16_ROW;
  k_rows = buf, v_rows = buf + region, k_cols = buf + 2 * region;
  const double ratio = 2.0 * SEQ * DIM / ((double)SEQ * COMPONENTS + 2.0 * SELECTED * DIM);
  for (int threads = 1; threads <= 2; threads++) {
    double dense = 1e9, sparq = 1e9;
    for (int pass = 0; pass < PASSES; pass++) {
      for (int h = 0; h < HEADS; h++) { /* k - l of the first SEQ - l positions (selection sampling), then the last l */
        size_t count = 0;
        for (size_t i = 0; count < SELECTED - LOCAL; i++) {
          *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
          if (*state % (SEQ - LOCAL - i) < SELECTED - LOCAL - count) selected[h][count++] = (uint32_t)i;
        }
        for (size_t j = 0; j < LOCAL; j++) selected[h][count++] = (uint32_t)(SEQ - LOCAL + j);
      }
      const double d = step_seconds(threads, 0), s = step_seconds(threads, 1);
      if (d < dense) dense = d;
      if (s < sparq) sparq = s;
    }
    printf("f16 step, %d thread%s: dense %.2f ms, SparQ %.2f ms: %.2fx, %.0f%% of the data ratio %.2fx\n", threads,
           threads > 1 ? "s" : "", dense * 1e3, sparq * 1e3, dense / sparq, 100 * dense / sparq / ratio, ratio);
  }
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
  step_model(buf, &state);
  return sink == 12345 ? 2 : 0;
}
