// The native attention ops (spec.md §1-4): shared types, the per-ISA kernel table,
// and the op drivers called by bind_attention.cc after it has re-checked every
// buffer length. Core has validated shapes, ranges and capacity before that.
//
// Cache layout (packages/core/src/kv-cache.ts; kv_blocks.h for the quantized types):
//   k, v (batch, nKv, capacity, row)  a row: d floats, d f16, or d / 32 q8_0 / q4_0 blocks;
//                                     K's rows in ktype, V's in vtype (llama.cpp's -ctk / -ctv)
//   kT (batch, nKv, d, column) or null ('single-k')  a column: capacity f32 / f16 / integer codes
//   kTScale (batch, nKv, d, ceil(capacity / 64)) f16, integer kT only
//   vSum (batch, nKv, d) f64         nPast, nPad (batch) i32
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/kv_blocks.h"

namespace sparq {

// One (sequence, KV head)'s columns of K transposed: column i at codes + i * col_bytes, its
// scales (integer types) at scales + i * scale_blocks.
struct KtHead {
  const void* codes;
  const uint16_t* scales;
  KtType type;
  size_t col_bytes, scale_blocks;
};

// One layer's KV cache as raw pointers (zero-copy views of the JS typed arrays).
struct CacheView {
  KvType ktype = KvType::f32;  // K rows
  KvType vtype = KvType::f32;  // V rows
  KtType kt_dtype = KtType::f32;
  int64_t batch = 0, nkv = 0, d = 0, cap = 0;
  void* k = nullptr;
  void* kT = nullptr;            // null for the 'single-k' layout
  uint16_t* kt_scale = nullptr;  // integer kT only
  void* v = nullptr;
  double* vsum = nullptr;
  int32_t* npast = nullptr;
  int32_t* npad = nullptr;

  size_t k_row_bytes() const { return kv_row_bytes(ktype, static_cast<size_t>(d)); }
  size_t v_row_bytes() const { return kv_row_bytes(vtype, static_cast<size_t>(d)); }
  // Bytes of one kT column (core's columnStride: capacity positions, integer codes in whole
  // 64-position blocks) and scales per column.
  size_t kt_col_bytes() const {
    return kt_is_integer(kt_dtype) ? kt_scale_blocks() * KT_BLOCK * kt_bits(kt_dtype) / 8
                                   : static_cast<size_t>(cap) * kt_bits(kt_dtype) / 8;
  }
  size_t kt_scale_blocks() const { return static_cast<size_t>((cap + KT_BLOCK - 1) / KT_BLOCK); }
  // The index of row 0 of head h of sequence b among all rows, and that row in k / v.
  size_t head_rows(int64_t b, int64_t h) const { return static_cast<size_t>((b * nkv + h) * cap); }
  const void* k_rows(int64_t b, int64_t h) const { return static_cast<const char*>(k) + head_rows(b, h) * k_row_bytes(); }
  const void* v_rows(int64_t b, int64_t h) const { return static_cast<const char*>(v) + head_rows(b, h) * v_row_bytes(); }
  KtHead kt_head(int64_t b, int64_t h) const {
    const size_t head = static_cast<size_t>(b * nkv + h) * static_cast<size_t>(d);
    return KtHead{static_cast<const char*>(kT) + head * kt_col_bytes(), kt_scale ? kt_scale + head * kt_scale_blocks() : nullptr, kt_dtype,
                  kt_col_bytes(), kt_scale_blocks()};
  }
  int64_t nvalid(int64_t b) const { return npast[b] > npad[b] ? npast[b] - npad[b] : 0; }
};

// Elements the kernels read, as in AttentionStats (spec.md §3's cost model).
struct Counts {
  double k = 0, v = 0, aux = 0, io = 0;
  void add(const Counts& o) {
    k += o.k;
    v += o.v;
    aux += o.aux;
    io += o.io;
  }
};

// Where SparqTrace's arrays live (all null when no trace was passed).
struct SparqTraceView {
  int32_t* i1 = nullptr;       // (batch, nKv, r)
  int32_t* i2 = nullptr;       // (batch, nKv, k)
  int32_t* i2count = nullptr;  // (batch, nKv)
  float* alpha = nullptr;      // (batch, nHeads)
  float* tau = nullptr;        // (batch, nHeads)
};

// The g query rows of an integer q · K over block rows (the reference's int8-key-scores.ts),
// quantized by quantize_act_row into ggml's Q8_0 blocks of 32 components. Per block, its step and
// bias are laid out on the block's 8 int32 lanes (d / 4 per row), as the kernels load them
// (attention_int8_simd.h).
struct QueryBlocks {
  const int8_t* x;      // (g, d) codes
  const float* dq;      // (g, d / 4) the block's step f16(amax / 127), on each of its 8 lanes
  const int32_t* bias;  // (g, d / 4) -off * (the block's code sum) on its first lane, 0 on the others:
                        // off = 128 over q8_0 rows, 8 over q4_0 (the keys as unsigned bytes, c + off)
};

// ---- kernel table: one per ISA (attention_ref.cc, attention_avx2.cc, attention_avx512.cc, attention_neon.cc) ----
// `pos` null means the contiguous positions first .. first + n - 1, else pos[0..n).
// K / V pointers are a head's row 0 (element type by `type`).
// Entries past filter_ge's cap that its vector stores may write (one AVX-512 vector of int32).
constexpr size_t kFilterSlack = 16;

struct AttnKernels {
  const char* name;
  // scores[t * ld + j] = scale * q_t · K[pos_j] for heads t < g; q (g, d).
  void (*qk)(float* scores, size_t ld, const void* k, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n, const float* q,
             size_t g, float scale);
  // The same over q8_0 / q4_0 rows in integers: scores[t * ld + j] = scale * sum_b dk_b dq_b (sum_i c_i x_i)
  // over the blocks b of row pos_j, the sums exact in int32 (the reference's), the rest in f32.
  void (*qk_q8)(float* scores, size_t ld, const void* k, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n,
                const QueryBlocks& q, size_t g, float scale);
  // out[t * d + i] = sum_j p[t * ldp + j] * V[pos_j][i]  (overwrites out (g, d); with `add`, out's
  // values are the sums of earlier rows and these rows' terms continue them).
  void (*pv)(float* out, const void* v, KvType type, size_t d, const int32_t* pos, int64_t first, size_t n, const float* p, size_t ldp,
             size_t g, bool add);
  // SparQ step 1 from K transposed: logits[t * ld + j] = f32((sum_c qs[t * r + c] * kT[i1[c]][first + j]) / tau[t]),
  // the sum in f32, the division in f64; mx[t] = the max of head t's logits (NaN skipped; -inf if none).
  void (*qk_cols)(float* logits, size_t ld, const KtHead& kT, const int32_t* i1, size_t r, int64_t first, size_t n, const float* qs,
                  size_t g, const double* tau, float* mx);
  // The same from K rows (single-k layout): a strided gather of the i1 components of each row.
  void (*qk_gather)(float* logits, size_t ld, const void* k, KvType type, size_t d, const int32_t* i1, size_t r, int64_t first, size_t n,
                    const float* qs, size_t g, const double* tau, float* mx);
  float (*max)(const float* x, size_t n);
  // sum of exp(x - m) (accumulated in f64); x <- exp(x - m) in place when `store`.
  double (*exp_sum)(float* x, size_t n, float m, bool store);
  // y <- y * s (y += x * s when accumulate).
  void (*scale)(float* y, const float* x, size_t n, float s, bool accumulate);
  // Indices j (plus base) with x[j] >= t, ascending, into out; returns the count, or cap + 1 once it exceeds cap.
  // out has room for cap + kFilterSlack entries: SIMD kernels store whole vectors past the count.
  size_t (*filter_ge)(const float* x, size_t n, float t, int32_t* out, size_t cap, int32_t base);
  // sum of x (benchmarks: the plain streaming read the bandwidth figures are measured with).
  double (*sum)(const float* x, size_t n);
  void (*to_f16)(uint16_t* out, const float* x, size_t n);
  void (*from_f16)(float* out, const uint16_t* x, size_t n);
  // out = silu(gate) * up elementwise (SwiGLU's product; not attention, but the same vector traits).
  void (*swiglu)(float* out, const float* gate, const float* up, size_t n);
  // out = a + b elementwise in f32 (the residual connection); out may be a or b.
  void (*add)(float* out, const float* a, const float* b, size_t n);
  // The index of the first x[j] outside [-limit, limit] or NaN, or n (validation's finite check).
  size_t (*first_outside)(const float* x, size_t n, float limit);
};

const AttnKernels& attn_kernels_ref();
const AttnKernels& attn_kernels_avx2();
const AttnKernels& attn_kernels_avx512();
const AttnKernels& attn_kernels_neon();  // arm64 builds only (attention_neon.cc)
// The table of cpu.h's kernel_path().
const AttnKernels& attn_kernels();

// Tests: scores (g, n) = q (g, d) · K^T over n consecutive rows k of type `type`, unscaled, as the
// attention ops score them on the current kernel path (q8_0 / q4_0 in integers); returns the path's name.
const char* key_scores_rows(KvType type, const void* k, size_t d, size_t n, const float* q, size_t g, float* scores);

// ---- exact top-k selection (topk_select.cc) ----
// The m best of x[0..n) by (x descending, index ascending), written to out in
// ascending index order (plus base). NaN ranks below every number. m <= n.
// `scratch` callers pass per-thread buffers; kernels from `kt`.
void topk_select(const AttnKernels& kt, const float* x, size_t n, size_t m, int32_t base, int32_t* out);

// ---- op drivers (attention_ops.cc, kv_append.cc); q, out (rows, nHeads, d) f32 ----
void kv_append(const CacheView& c, int64_t seq, const float* k, const float* v, int64_t n_tokens);
void dense_decode(const CacheView& c, const float* q, float* out, int64_t nheads, Counts* counts);
// With acc (H2O's scores, (batch, nkv, cap)), also h2o_seed's sums from the same softmax.
void dense_prefill(const CacheView& c, int64_t seq, const float* q, float* out, int64_t n_tokens, int64_t nheads, Counts* counts,
                   float* acc = nullptr);
struct SparqArgs {
  int64_t r = 1, k = 1, l = 0;
  bool reallocate = true;
};
void sparq_decode(const CacheView& c, const float* q, float* out, int64_t nheads, const SparqArgs& p, const SparqTraceView& trace,
                  Counts* counts);
void topk_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, Counts* counts);
void h2o_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, float* acc, uint8_t* evicted, Counts* counts);
void h2o_seed(const CacheView& c, int64_t seq, const float* q, int64_t n_tokens, int64_t nheads, float* acc);
void lminf_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, Counts* counts);

// Sum of x[0..n) read by every pool thread in chunks: a memory-read bandwidth probe for the benchmark.
double read_sum(const float* x, size_t n);
// out = silu(gate) * up over n elements, in chunks over the pool's threads.
void swiglu(float* out, const float* gate, const float* up, size_t n);
void add(float* out, const float* a, const float* b, size_t n);
// The index of the first of x[0..n) that is NaN, infinite or above max_abs in magnitude, or -1
// (core's firstAbove; max_abs >= 0, a double as JavaScript passes it).
int64_t first_above(const float* x, size_t n, double max_abs);

// Positions LM-Infinite keeps: the first min(16, k - 1) sinks plus the most recent rest.
constexpr int64_t kLmInfiniteSinks = 16;

}  // namespace sparq
