// Bindings of the attention ops: unpack the KVCache object and typed arrays
// (zero-copy), re-check every length and every cache counter the kernels index
// with, then call the drivers of attention_ops.cc. Bad input throws a JS error.
//
//   attnKvAppend(cache, seq, k, v, nTokens)
//   attnDecode(cache, q, out, nHeads, stats?)
//   attnPrefill(cache, seq, q, out, nTokens, nHeads, stats?, acc?)   acc: H2O's scores, seeded too
//   attnSparq(cache, q, out, nHeads, r, k, l, reallocate, stats?, trace?)
//   attnTopk / attnLmInfinite(cache, q, out, nHeads, k, stats?)
//   attnH2O(cache, q, out, nHeads, k, acc, evicted, stats?)
//   attnThreads(), attnSetThreads(n), attnKernel(), attnReadSum(x), attnKeyScores(...) (tests)
// stats: Float64Array(4) <- elements read (k, v, aux, io); trace: SparqTrace.
#include <initializer_list>
#include <string>

#include "ops/attention.h"
#include "bindings/bindings.h"
#include "bindings/common.h"
#include "common/quant.h"
#include "common/threads.h"

namespace sparq {
namespace {

[[noreturn]] void range_error(Napi::Env env, const std::string& message) { throw Napi::RangeError::New(env, message); }

// The index of `name` in `names`, or -1.
int name_index(const std::string& name, std::initializer_list<const char*> names) {
  int i = 0;
  for (const char* n : names) {
    if (name == n) return i;
    i++;
  }
  return -1;
}

// The cache object's buffers, each checked against the sizes its dims imply.
CacheView cache_arg(const Napi::Value& value, const char* op) {
  Napi::Env env = value.Env();
  if (!value.IsObject()) throw Napi::TypeError::New(env, std::string(op) + ": cache must be a KVCache");
  Napi::Object o = value.As<Napi::Object>();
  CacheView c;
  c.batch = int_arg(o.Get("batch"), op, "cache.batch");
  c.nkv = int_arg(o.Get("nKvHeads"), op, "cache.nKvHeads");
  c.d = int_arg(o.Get("headDim"), op, "cache.headDim");
  c.cap = int_arg(o.Get("capacity"), op, "cache.capacity");
  if (c.batch < 1 || c.nkv < 1 || c.d < 1 || c.cap < 1) range_error(env, std::string(op) + ": cache dims must be >= 1");
  // The K rows' type and the V rows' type (core's kDType / vDType).
  auto row_type = [&](const char* field) {
    const std::string name = o.Get(field).ToString().Utf8Value();
    const int kv = name_index(name, {"f32", "f16", "q8_0", "q4_0"});
    if (kv < 0) range_error(env, std::string(op) + ": cache." + field + " " + name + ", expected f32 | f16 | q8_0 | q4_0");
    const KvType type = static_cast<KvType>(kv);
    if ((type == KvType::q8_0 || type == KvType::q4_0) && c.d % QK != 0)
      range_error(env, std::string(op) + ": cache.headDim " + std::to_string(c.d) + " must be a multiple of 32 with " + field + " " + name);
    return type;
  };
  c.ktype = row_type("kDType");
  c.vtype = row_type("vDType");
  // Gathers index a head's rows with 32-bit offsets.
  if (c.cap * c.d >= (int64_t{1} << 31)) range_error(env, std::string(op) + ": capacity * headDim must be < 2^31");
  const size_t heads = static_cast<size_t>(c.batch * c.nkv), cap = static_cast<size_t>(c.cap);
  // A buffer of `bytes` bytes, as the typed array its element type implies (bytes for the block and integer types).
  auto buffer = [&](Napi::Value a, size_t bytes, int bits, const char* name) -> void* {
    const std::string what = std::string("cache.") + name;
    if (bits == 32) return typed_data<float>(a, bytes / 4, op, what.c_str());
    if (bits == 16) return typed_data<uint16_t>(a, bytes / 2, op, what.c_str());
    if (a.IsTypedArray() && a.As<Napi::TypedArray>().TypedArrayType() == napi_int8_array)
      return typed_data<int8_t>(a, bytes, op, what.c_str());
    return typed_data<uint8_t>(a, bytes, op, what.c_str());
  };
  auto row_bits = [](KvType t) { return t == KvType::f32 ? 32 : t == KvType::f16 ? 16 : 8; };
  c.k = buffer(o.Get("k"), heads * cap * c.k_row_bytes(), row_bits(c.ktype), "k");
  c.v = buffer(o.Get("v"), heads * cap * c.v_row_bytes(), row_bits(c.vtype), "v");
  Napi::Value kT = o.Get("kT");
  if (!kT.IsNull() && !kT.IsUndefined()) {
    const std::string kt_name = o.Get("kTDType").ToString().Utf8Value();
    const int kt = name_index(kt_name, {"f32", "f16", "i8", "i4", "i2"});
    if (kt < 0) range_error(env, std::string(op) + ": cache.kTDType " + kt_name + ", expected f32 | f16 | i8 | i4 | i2");
    c.kt_dtype = static_cast<KtType>(kt);
    const size_t columns = heads * static_cast<size_t>(c.d);
    c.kT = buffer(kT, columns * c.kt_col_bytes(), kt_is_integer(c.kt_dtype) ? 8 : kt_bits(c.kt_dtype), "kT");
    if (kt_is_integer(c.kt_dtype)) c.kt_scale = typed_data<uint16_t>(o.Get("kTScale"), columns * c.kt_scale_blocks(), op, "cache.kTScale");
  }
  c.vsum = typed_data<double>(o.Get("vSum"), static_cast<size_t>(c.batch * c.nkv * c.d), op, "cache.vSum");
  c.npast = typed_data<int32_t>(o.Get("nPast"), static_cast<size_t>(c.batch), op, "cache.nPast");
  c.npad = typed_data<int32_t>(o.Get("nPad"), static_cast<size_t>(c.batch), op, "cache.nPad");
  for (int64_t b = 0; b < c.batch; b++) {
    if (c.npast[b] < 0 || c.npast[b] > c.cap || c.npad[b] < 0 || c.npad[b] > c.cap) {
      range_error(env, std::string(op) + ": sequence " + std::to_string(b) + " has nPast " + std::to_string(c.npast[b]) + ", nPad " +
                           std::to_string(c.npad[b]) + ", expected both in [0, " + std::to_string(c.cap) + "]");
    }
  }
  return c;
}

// q and out (rows, nHeads, d); nHeads a positive multiple of nKv.
void rows_args(const Napi::CallbackInfo& call, size_t at, const CacheView& c, int64_t rows, int64_t nheads, const char* op, const float** q,
               float** out) {
  if (nheads < 1 || nheads % c.nkv != 0) range_error(call.Env(), std::string(op) + ": nHeads must be a positive multiple of nKvHeads");
  const size_t need = static_cast<size_t>(rows * nheads * c.d);
  *q = typed_data<float>(call[at], need, op, "q");
  *out = typed_data<float>(call[at + 1], need, op, "out");
}

void check_decodable(Napi::Env env, const CacheView& c, const char* op) {
  for (int64_t b = 0; b < c.batch; b++)
    if (c.nvalid(b) < 1) range_error(env, std::string(op) + ": sequence " + std::to_string(b) + " has no valid positions");
}

// Optional Float64Array(4) for the counts; written after the kernels ran.
double* stats_arg(const Napi::Value& value, const char* op) {
  if (value.IsNull() || value.IsUndefined()) return nullptr;
  return typed_data<double>(value, 4, op, "stats");
}

void write_stats(double* stats, const Counts& c) {
  if (!stats) return;
  stats[0] = c.k;
  stats[1] = c.v;
  stats[2] = c.aux;
  stats[3] = c.io;
}

// The common head of the decode calls (cache, q, out, nHeads, ...): checked and unpacked.
struct DecodeCall {
  CacheView c;
  const float* q;
  float* out;
  int64_t nheads;
  DecodeCall(const Napi::CallbackInfo& call, const char* op) {
    c = cache_arg(call[0], op);
    check_decodable(call.Env(), c, op);
    nheads = int_arg(call[3], op, "nHeads");
    rows_args(call, 1, c, c.batch, nheads, op, &q, &out);
  }
};

// (cache, seq, q, out, nTokens, nHeads, ...): the N newest positions of one sequence.
struct PrefillCall {
  CacheView c;
  const float* q;
  float* out;
  int64_t seq, n, nheads;
  PrefillCall(const Napi::CallbackInfo& call, const char* op) {
    c = cache_arg(call[0], op);
    seq = int_arg(call[1], op, "seq");
    n = int_arg(call[4], op, "nTokens");
    nheads = int_arg(call[5], op, "nHeads");
    if (seq >= c.batch) range_error(call.Env(), std::string(op) + ": sequence out of range");
    if (n < 1 || n > c.nvalid(seq)) range_error(call.Env(), std::string(op) + ": nTokens must be in [1, nValid]");
    rows_args(call, 2, c, n, nheads, op, &q, &out);
  }
};

int64_t budget_arg(const Napi::CallbackInfo& call, size_t at, const char* op) {
  const int64_t k = int_arg(call[at], op, "k");
  if (k < 1) range_error(call.Env(), std::string(op) + ": k must be >= 1");
  return k;
}

Napi::Value kv_append_js(const Napi::CallbackInfo& call) {
  const char* op = "kvAppend";
  CacheView c = cache_arg(call[0], op);
  const int64_t seq = int_arg(call[1], op, "seq"), n = int_arg(call[4], op, "nTokens");
  if (seq >= c.batch) range_error(call.Env(), std::string(op) + ": sequence out of range");
  if (n < 1 || c.npast[seq] + n > c.cap) range_error(call.Env(), std::string(op) + ": " + std::to_string(n) + " tokens do not fit");
  const size_t need = static_cast<size_t>(n * c.nkv * c.d);
  const float* k = typed_data<float>(call[2], need, op, "k");
  const float* v = typed_data<float>(call[3], need, op, "v");
  kv_append(c, seq, k, v, n);
  return call.Env().Undefined();
}

Napi::Value decode_js(const Napi::CallbackInfo& call) {
  const char* op = "attentionDecode";
  DecodeCall d(call, op);
  double* stats = stats_arg(call[4], op);
  Counts counts;
  dense_decode(d.c, d.q, d.out, d.nheads, &counts);
  write_stats(stats, counts);
  return call.Env().Undefined();
}

Napi::Value prefill_js(const Napi::CallbackInfo& call) {
  const char* op = "attentionPrefill";
  PrefillCall p(call, op);
  double* stats = stats_arg(call[6], op);
  float* acc = call[7].IsUndefined()
                   ? nullptr
                   : typed_data<float>(call[7], static_cast<size_t>(p.c.batch * p.c.nkv * p.c.cap), op, "options.h2o.acc");
  Counts counts;
  dense_prefill(p.c, p.seq, p.q, p.out, p.n, p.nheads, &counts, acc);
  write_stats(stats, counts);
  return call.Env().Undefined();
}

Napi::Value sparq_js(const Napi::CallbackInfo& call) {
  const char* op = "sparqDecode";
  DecodeCall d(call, op);
  const CacheView& c = d.c;
  SparqArgs p;
  p.r = int_arg(call[4], op, "r");
  p.k = int_arg(call[5], op, "k");
  p.l = int_arg(call[6], op, "l");
  p.reallocate = call[7].ToBoolean().Value();
  if (p.r < 1 || p.r > c.d || p.k < 1) range_error(call.Env(), std::string(op) + ": r must be in [1, headDim] and k >= 1");
  double* stats = stats_arg(call[8], op);
  SparqTraceView trace;
  if (call[9].IsObject()) {
    Napi::Object t = call[9].As<Napi::Object>();
    const size_t groups = static_cast<size_t>(c.batch * c.nkv), heads = static_cast<size_t>(c.batch * d.nheads);
    trace.i1 = typed_data<int32_t>(t.Get("i1"), groups * p.r, op, "trace.i1");
    trace.i2 = typed_data<int32_t>(t.Get("i2"), groups * p.k, op, "trace.i2");
    trace.i2count = typed_data<int32_t>(t.Get("i2Count"), groups, op, "trace.i2Count");
    trace.alpha = typed_data<float>(t.Get("alpha"), heads, op, "trace.alpha");
    trace.tau = typed_data<float>(t.Get("tau"), heads, op, "trace.tau");
  }
  Counts counts;
  sparq_decode(c, d.q, d.out, d.nheads, p, trace, &counts);
  write_stats(stats, counts);
  return call.Env().Undefined();
}

// topk and LM-Infinite share a signature: (cache, q, out, nHeads, k, stats?).
template <void (*Op)(const CacheView&, const float*, float*, int64_t, int64_t, Counts*)>
Napi::Value budget_js(const Napi::CallbackInfo& call) {
  const char* op = Op == topk_decode ? "topkDecode" : "lmInfiniteDecode";
  DecodeCall d(call, op);
  const int64_t k = budget_arg(call, 4, op);
  double* stats = stats_arg(call[5], op);
  Counts counts;
  Op(d.c, d.q, d.out, d.nheads, k, &counts);
  write_stats(stats, counts);
  return call.Env().Undefined();
}

Napi::Value h2o_js(const Napi::CallbackInfo& call) {
  const char* op = "h2oDecode";
  DecodeCall d(call, op);
  const CacheView& c = d.c;
  const int64_t k = budget_arg(call, 4, op);
  const size_t cells = static_cast<size_t>(c.batch * c.nkv * c.cap);
  float* acc = typed_data<float>(call[5], cells, op, "state.acc");
  uint8_t* evicted = typed_data<uint8_t>(call[6], cells, op, "state.evicted");
  double* stats = stats_arg(call[7], op);
  Counts counts;
  h2o_decode(c, d.q, d.out, d.nheads, k, acc, evicted, &counts);
  write_stats(stats, counts);
  return call.Env().Undefined();
}

// h2oSeed(cache, seq, q, q, nTokens, nHeads, acc): q goes twice, as the out rows it does not have.
Napi::Value h2o_seed_js(const Napi::CallbackInfo& call) {
  const char* op = "h2oSeed";
  PrefillCall p(call, op);
  float* acc = typed_data<float>(call[6], static_cast<size_t>(p.c.batch * p.c.nkv * p.c.cap), op, "state.acc");
  h2o_seed(p.c, p.seq, p.q, p.n, p.nheads, acc);
  return call.Env().Undefined();
}

Napi::Value threads_js(const Napi::CallbackInfo& call) { return Napi::Number::New(call.Env(), pool_threads()); }

Napi::Value set_threads_js(const Napi::CallbackInfo& call) {
  const int64_t n = int_arg(call[0], "attnSetThreads", "threads");
  if (n < 1 || n > 256) range_error(call.Env(), "attnSetThreads: threads must be in [1, 256]");
  set_pool_threads(static_cast<int>(n));
  return Napi::Number::New(call.Env(), pool_threads());
}

// Benchmark probe: sums a Float32Array with every pool thread (a plain streaming read).
Napi::Value read_sum_js(const Napi::CallbackInfo& call) {
  if (!call[0].IsTypedArray()) throw Napi::TypeError::New(call.Env(), "attnReadSum: x must be a Float32Array");
  const size_t n = call[0].As<Napi::TypedArray>().ElementLength();
  const float* x = typed_data<float>(call[0], n, "attnReadSum", "x");
  return Napi::Number::New(call.Env(), read_sum(x, n));
}

Napi::Value kernel_js(const Napi::CallbackInfo& call) { return Napi::String::New(call.Env(), attn_kernels().name); }

// Tests: attnKeyScores(dtype 'q8_0' | 'q4_0', k Uint8Array (n rows), d, n, q Float32Array (g, d), g, scores Float32Array (g, n))
// -> the kernel path's name; scores = q · K^T unscaled, in integers as the attention ops compute them.
Napi::Value key_scores_js(const Napi::CallbackInfo& call) {
  const char* op = "attnKeyScores";
  const std::string dtype = call[0].ToString().Utf8Value();
  const int kv = name_index(dtype, {"q8_0", "q4_0"});
  if (kv < 0) range_error(call.Env(), std::string(op) + ": dtype " + dtype + ", expected q8_0 | q4_0");
  const KvType type = kv == 0 ? KvType::q8_0 : KvType::q4_0;
  const int64_t d = int_arg(call[2], op, "d"), n = int_arg(call[3], op, "n"), g = int_arg(call[5], op, "g");
  if (d < QK || d % QK != 0 || n < 0 || g < 1 || n * d >= (int64_t{1} << 31) || g * d >= (int64_t{1} << 31))
    range_error(call.Env(), std::string(op) + ": d must be a positive multiple of 32, n >= 0, g >= 1");
  const auto* k = typed_data<uint8_t>(call[1], static_cast<size_t>(n) * kv_row_bytes(type, static_cast<size_t>(d)), op, "k");
  const float* q = typed_data<float>(call[4], static_cast<size_t>(g * d), op, "q");
  float* scores = typed_data<float>(call[6], static_cast<size_t>(g * n), op, "scores");
  return Napi::String::New(call.Env(),
                           key_scores_rows(type, k, static_cast<size_t>(d), static_cast<size_t>(n), q, static_cast<size_t>(g), scores));
}

}  // namespace

void register_attention_ops(Napi::Env env, Napi::Object exports) {
  exports.Set("attnKvAppend", Napi::Function::New(env, kv_append_js));
  exports.Set("attnDecode", Napi::Function::New(env, decode_js));
  exports.Set("attnPrefill", Napi::Function::New(env, prefill_js));
  exports.Set("attnSparq", Napi::Function::New(env, sparq_js));
  exports.Set("attnTopk", Napi::Function::New(env, budget_js<topk_decode>));
  exports.Set("attnLmInfinite", Napi::Function::New(env, budget_js<lminf_decode>));
  exports.Set("attnH2O", Napi::Function::New(env, h2o_js));
  exports.Set("attnH2OSeed", Napi::Function::New(env, h2o_seed_js));
  exports.Set("attnThreads", Napi::Function::New(env, threads_js));
  exports.Set("attnSetThreads", Napi::Function::New(env, set_threads_js));
  exports.Set("attnReadSum", Napi::Function::New(env, read_sum_js));
  exports.Set("attnKernel", Napi::Function::New(env, kernel_js));
  exports.Set("attnKeyScores", Napi::Function::New(env, key_scores_js));
}

}  // namespace sparq
