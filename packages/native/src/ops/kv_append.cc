// kvAppend (spec.md §4; the quantized layout: kv_blocks.h, docs/kv-cache.md): N tokens written in
// place at nPast of one sequence: key rows, value rows and SparQ's key columns ('k-twice' only).
// Rows are stored in their side's type (K rows in ktype, V rows in vtype): f16 rounded to nearest even (as core's f32ToF16), q8_0 /
// q4_0 by ggml's quantizers (quant.h, the `quantize` op's code, byte-exact with the reference).
// vSum is the f64 running sum of V as attention reads it back (the decoded rows), in token order,
// so it matches the reference bit for bit. Float columns copy the stored keys; integer columns
// are re-derived for every 64-position block the call touched from the stored K rows of that
// block so far, so they do not depend on how the appends were chunked.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/quant.h"
#include "common/threads.h"
#include "ops/attention.h"

namespace sparq {
namespace {

// Writes the d values x as one row of type t at dst; returns the values as attention reads them
// back (x itself for f32, else decoded into `stored`): f16 by the attention kernels' conversions, the
// block types by their weight type's quantizer (kv_weight_type).
const float* store_row(const AttnKernels& kt, KvType t, void* dst, const float* x, size_t d, float* stored) {
  const WeightType w = kv_weight_type(t);
  if (w == WeightType::f32) {
    std::memcpy(dst, x, d * 4);
    return x;
  }
  if (w == WeightType::f16) {
    kt.to_f16(static_cast<uint16_t*>(dst), x, d);
    kt.from_f16(stored, static_cast<const uint16_t*>(dst), d);
    return stored;
  }
  const int64_t blocks = static_cast<int64_t>(d) / block_traits(w).elements;
  quantize_blocks(w, x, static_cast<uint8_t*>(dst), blocks);
  dequantize_blocks(w, static_cast<const uint8_t*>(dst), stored, blocks);
  return stored;
}

// A stored row of type t decoded to d floats.
void load_row(const AttnKernels& kt, KvType t, const void* src, size_t d, float* out) {
  const WeightType w = kv_weight_type(t);
  if (w == WeightType::f32) return static_cast<void>(std::memcpy(out, src, d * 4));
  if (w == WeightType::f16) return kt.from_f16(out, static_cast<const uint16_t*>(src), d);
  dequantize_blocks(w, static_cast<const uint8_t*>(src), out, static_cast<int64_t>(d) / block_traits(w).elements);
}

// Writes `code` (in [-qmax, qmax]) at position p of a column of `bits`-bit codes (kv_blocks.h).
void put_code(uint8_t* col, int64_t p, int bits, int code) {
  if (bits == 8) {
    col[p] = static_cast<uint8_t>(static_cast<int8_t>(code));
    return;
  }
  const int per_byte = 8 / bits, shift = bits * static_cast<int>(p % per_byte), mask = (1 << bits) - 1;
  const int stored = code + (1 << (bits - 1)) - 1;
  uint8_t& b = col[p / per_byte];
  b = static_cast<uint8_t>((b & ~(mask << shift)) | (stored << shift));
}

// The code of x at scale `step` (an f16 scale as f32): round(x / step) half away from zero in f64,
// clamped to [-qmax, qmax]; 0 when step is 0. Core rejects non-finite keys (validateKvAppend);
// the finiteness test only keeps the cast to int defined.
int kt_code(float x, double step, int qmax) {
  const double code = step != 0 ? std::round(static_cast<double>(x) / step) : 0.0;
  return std::isfinite(code) ? static_cast<int>(std::clamp<double>(code, -qmax, qmax)) : 0;
}

// Block `blk` of the integer columns of (seq, h), from the stored K rows of positions
// [64 blk, min(64 blk + 64, npast)) (npast: the sequence's nPast after this append): per
// component, d = f16(amax / qmax) (the division in f64, rounded to f32 and then to f16, as core's
// f32ToF16 of a number), codes kt_code(x, d); all zero when d is 0. Every code of the block is
// written (0 past npast), so the stored bytes do not depend on how the appends were chunked.
// Positions below `fresh` were in the block before this append, and their codes were derived from
// the same rows: where a component's new d equals its stored one, those codes are already right
// and only positions from `fresh` are written. A decode step appends one position to a block of up
// to 63, so most components keep their scale (the new key is rarely the block's largest) and the
// step writes one code per component, not 64: 1.76 -> 0.27 ms per layer of 32 KV heads, d 128, at
// the end of a block, one thread (bench/sparq-step.cc, docs/sparq-step.md).
void requantize_kt_block(const AttnKernels& kt, const CacheView& c, int64_t seq, int64_t h, int64_t blk, int64_t fresh, int64_t npast,
                         std::vector<float>& rows, std::vector<float>& amax) {
  const size_t d = static_cast<size_t>(c.d);
  const int64_t p0 = blk * KT_BLOCK, p1 = std::min<int64_t>(p0 + KT_BLOCK, npast);
  const size_t m = static_cast<size_t>(p1 - p0), kept = static_cast<size_t>(std::clamp<int64_t>(fresh - p0, 0, p1 - p0));
  rows.resize(m * d);
  amax.assign(d, 0.f);
  const auto* k = static_cast<const uint8_t*>(c.k_rows(seq, h));
  // amax per component over the block's rows (a loop over components per row: vectorized).
  for (size_t u = 0; u < m; u++) {
    float* x = rows.data() + u * d;
    load_row(kt, c.ktype, k + static_cast<size_t>(p0 + static_cast<int64_t>(u)) * c.k_row_bytes(), d, x);
    for (size_t i = 0; i < d; i++) amax[i] = std::max(amax[i], std::fabs(x[i]));
  }
  const int bits = kt_bits(c.kt_dtype), qmax = (1 << (bits - 1)) - 1;
  const size_t head = static_cast<size_t>(seq * c.nkv + h) * d;
  for (size_t i = 0; i < d; i++) {
    uint8_t* col = static_cast<uint8_t*>(c.kT) + (head + i) * c.kt_col_bytes();
    uint16_t& stored = c.kt_scale[(head + i) * c.kt_scale_blocks() + static_cast<size_t>(blk)];
    const uint16_t scale = fp32_to_fp16_ref(static_cast<float>(static_cast<double>(amax[i]) / qmax));
    const size_t from = scale == stored ? kept : 0;
    stored = scale;
    const double step = fp16_to_fp32_ref(scale);
    for (size_t u = from; u < m; u++) put_code(col, p0 + static_cast<int64_t>(u), bits, kt_code(rows[u * d + i], step, qmax));
    // Zeros past npast: code by code to a byte boundary, then whole bytes (code 0 is stored as qmax
    // in the packed types, so the bytes are put_code's, not zero).
    size_t u = m;
    for (; u < static_cast<size_t>(KT_BLOCK) && (p0 + static_cast<int64_t>(u)) * bits % 8 != 0; u++)
      put_code(col, p0 + static_cast<int64_t>(u), bits, 0);
    if (u < static_cast<size_t>(KT_BLOCK)) {
      uint8_t zero = 0;
      for (int j = 0; j < 8 / bits; j++) put_code(&zero, j, bits, 0);
      std::memset(col + (p0 + static_cast<int64_t>(u)) * bits / 8, zero, (KT_BLOCK - u) * bits / 8);
    }
  }
}

}  // namespace

void kv_append(const CacheView& c, int64_t seq, const float* k, const float* v, int64_t n_tokens) {
  const AttnKernels& kt = attn_kernels();
  const size_t d = static_cast<size_t>(c.d);
  const bool float_cols = c.kT && !kt_is_integer(c.kt_dtype);
  const int64_t start = c.npast[seq];
  // One task per KV head: its rows, columns and V sum in token order (so the sums are the
  // reference's), then its integer kT blocks. A decode step's integer blocks are most of the work
  // (d codes and the block's rows per head); on the pool when there are at least 2^16 elements to
  // read, about the work of a thread hand-off (see attention_ops.cc's run_tasks).
  const int64_t blocks = c.kT && kt_is_integer(c.kt_dtype) ? (start + n_tokens - 1) / KT_BLOCK - start / KT_BLOCK + 1 : 0;
  auto head = [&](size_t task) {
    const int64_t h = static_cast<int64_t>(task);
    thread_local std::vector<float> stored_k, stored_v, rows, amax;
    stored_k.resize(d);
    stored_v.resize(d);
    for (int64_t t = 0; t < n_tokens; t++) {
      const int64_t pos = start + t;
      const size_t at = static_cast<size_t>((t * c.nkv + h) * c.d);
      const size_t row = c.head_rows(seq, h) + static_cast<size_t>(pos);
      void* krow = static_cast<uint8_t*>(c.k) + row * c.k_row_bytes();
      const float* kread = store_row(kt, c.ktype, krow, k + at, d, stored_k.data());
      if (float_cols) {
        // Column i of (seq, h) holds component i of every position: the stored key, in the column's type.
        const size_t col = static_cast<size_t>((seq * c.nkv + h) * c.d * c.cap + pos);  // + i * cap
        if (c.kt_dtype == KtType::f16) {
          for (size_t i = 0; i < d; i++) static_cast<uint16_t*>(c.kT)[col + i * c.cap] = fp32_to_fp16_ref(kread[i]);
        } else {
          for (size_t i = 0; i < d; i++) static_cast<float*>(c.kT)[col + i * c.cap] = kread[i];
        }
      }
      const float* vread = store_row(kt, c.vtype, static_cast<uint8_t*>(c.v) + row * c.v_row_bytes(), v + at, d, stored_v.data());
      // Padding is stored but masked, so it never enters the mean.
      if (pos >= c.npad[seq]) {
        double* sum = c.vsum + (seq * c.nkv + h) * c.d;
        for (size_t i = 0; i < d; i++) sum[i] += static_cast<double>(vread[i]);
      }
    }
    for (int64_t blk = start / KT_BLOCK; blk < start / KT_BLOCK + blocks; blk++)
      requantize_kt_block(kt, c, seq, h, blk, start, start + n_tokens, rows, amax);
  };
  const size_t heads = static_cast<size_t>(c.nkv);
  if (static_cast<double>(c.nkv) * static_cast<double>(d) * static_cast<double>(n_tokens + blocks * KT_BLOCK) < (1 << 16)) {
    for (size_t h = 0; h < heads; h++) head(h);
  } else {
    parallel_for(heads, head);
  }
  c.npast[seq] = static_cast<int32_t>(start + n_tokens);
}

}  // namespace sparq
