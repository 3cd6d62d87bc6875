// The attention op drivers: dense decode and prefill (spec.md §1), SparQ (spec.md §2) and
// the baselines (spec.md §3). Each call is split into (sequence, KV head) tasks run by
// the thread pool; a task reads its head's K / V rows once for the whole group of
// g query heads. Results follow packages/reference/src/attention/ (the oracle);
// AttentionStats counts are the same formulas the reference uses.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/cpu.h"
#include "common/threads.h"
#include "ops/attention.h"
#include "ops/kernel_table.h"
#include "ops/matvec_q8.h"

namespace sparq {
namespace {

// Per-thread buffers, grown on demand and kept (the pool's threads are persistent).
struct Scratch {
  std::vector<float> logits, probs, score, sel, qs;
  std::vector<float> block_q, block_out;  // dense_prefill's (rows, d) query and output rows
  std::vector<double> block_inv;          // dense_prefill's 1 / softmax sum per row
  std::vector<int32_t> idx, idx2;
  std::vector<double> dbl;
  std::vector<int8_t> qx;            // key_scores' query codes (g, d)
  std::vector<float> qdq, qxs;       // their steps on 8 lanes per block (g, d / 4); quantize_act_row's xs (g, d / 32)
  std::vector<int32_t> qbias, qsum;  // the bias lanes (g, d / 4); the blocks' code sums (g, d / 32)
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// One (sequence, KV head) group of a call: its g query rows and output rows.
struct Group {
  int64_t b, h;
  size_t g, d;
  const float* q;  // (g, d)
  float* out;      // (g, d)
};

// Runs body(group, counts) for every (row, KV head) task of a call and sums the counts.
template <class Body>
void for_each_group(const CacheView& c, int64_t rows, int64_t nheads, const float* q, float* out, Counts* counts, Body body,
                    int64_t seq_of_row = -1) {
  const size_t g = static_cast<size_t>(nheads / c.nkv), d = static_cast<size_t>(c.d);
  const size_t tasks = static_cast<size_t>(rows * c.nkv);
  std::vector<Counts> per(tasks);
  int64_t longest = 0;
  for (int64_t b = 0; b < c.batch; b++) longest = std::max(longest, c.nvalid(b));
  run_tasks(tasks, 2.0 * static_cast<double>(tasks) * static_cast<double>(longest) * static_cast<double>(d), [&](size_t task) {
    const int64_t row = static_cast<int64_t>(task) / c.nkv, h = static_cast<int64_t>(task) % c.nkv;
    const size_t at = static_cast<size_t>((row * nheads + h * static_cast<int64_t>(g))) * d;
    Group grp{seq_of_row < 0 ? row : seq_of_row, h, g, d, q + at, out + at};
    per[task].io += 2.0 * g * d;  // the group's q read and y written
    body(grp, row, per[task]);
  });
  if (counts)
    for (const Counts& p : per) counts->add(p);
}

// scores[t * ld + j] = scale * q_t · K[pos_j] for the g query rows q (g, d) over KV head rows k:
// f32 rows (f32, f16) by kt.qk; q8_0 / q4_0 rows in integers by kt.qk_q8, the rows q quantized
// into ggml's Q8_0 blocks by the 'int8' products' quantizer (the reference's int8-key-scores.ts).
void key_scores(const AttnKernels& kt, float* scores, size_t ld, const CacheView& c, const void* k, size_t d, const int32_t* pos,
                int64_t first, size_t n, const float* q, size_t g, float scale, Scratch& s) {
  if (c.ktype != KvType::q8_0 && c.ktype != KvType::q4_0) return kt.qk(scores, ld, k, c.ktype, d, pos, first, n, q, g, scale);
  const size_t blocks = d / QK, lanes = d / 4;
  const int32_t off = c.ktype == KvType::q8_0 ? 128 : 8;  // the keys as unsigned bytes: c + off (attention_int8_simd.h)
  s.qx.resize(g * d);
  s.qdq.assign(g * lanes, 0.f);
  s.qbias.assign(g * lanes, 0);
  s.qxs.resize(g * blocks);
  s.qsum.resize(g * blocks);
  std::vector<float> dq(blocks);
  for (size_t t = 0; t < g; t++) {
    quantize_act_row(WeightType::q8_0, q + t * d, static_cast<int64_t>(d), s.qx.data() + t * d, dq.data(), s.qxs.data() + t * blocks,
                     s.qsum.data() + t * blocks);
    // Block b's step on its 8 int32 lanes, its bias on the first.
    for (size_t b = 0; b < blocks; b++) {
      std::fill_n(s.qdq.data() + t * lanes + b * 8, 8, dq[b]);
      s.qbias[t * lanes + b * 8] = -off * s.qsum[t * blocks + b];
    }
  }
  kt.qk_q8(scores, ld, k, c.ktype, d, pos, first, n, QueryBlocks{s.qx.data(), s.qdq.data(), s.qbias.data()}, g, scale);
}

// Exact attention of a group over n positions (pos, or the range first..): scores,
// softmax, weighted V rows into grp.out. Leaves the unnormalised exp(score - max)
// in p (g, n) and 1 / sum per head in inv (for H2O's weights).
void attend(const AttnKernels& kt, const CacheView& c, const Group& grp, const int32_t* pos, int64_t first, size_t n, std::vector<float>& p,
            float* inv, Counts& cnt) {
  const size_t g = grp.g, d = grp.d;
  p.resize(g * n);
  key_scores(kt, p.data(), n, c, c.k_rows(grp.b, grp.h), d, pos, first, n, grp.q, g, 1.f / std::sqrt(static_cast<float>(d)), scratch());
  std::vector<float> sums(g);
  for (size_t t = 0; t < g; t++) {
    float* row = p.data() + t * n;
    sums[t] = static_cast<float>(1.0 / kt.exp_sum(row, n, kt.max(row, n), true));
  }
  // sum_j e_j v_j, then one division per output element instead of one per score.
  kt.pv(grp.out, c.v_rows(grp.b, grp.h), c.vtype, d, pos, first, n, p.data(), n, g, false);
  for (size_t t = 0; t < g; t++) {
    kt.scale(grp.out + t * d, grp.out + t * d, d, sums[t], false);
    if (inv) inv[t] = sums[t];
  }
  cnt.k += static_cast<double>(n) * d;
  cnt.v += static_cast<double>(n) * d;
}

// Softmax probabilities of the rows of x (rows, n) with the given max / 1-over-sum, summed over rows into score.
void sum_probs(const AttnKernels& kt, float* score, const float* e, size_t rows, size_t n, const float* inv) {
  for (size_t t = 0; t < rows; t++) kt.scale(score, e + t * n, n, inv[t], t > 0);
}

}  // namespace

const char* key_scores_rows(KvType type, const void* k, size_t d, size_t n, const float* q, size_t g, float* scores) {
  const AttnKernels& kt = attn_kernels();
  CacheView c;
  c.ktype = type;
  key_scores(kt, scores, n, c, k, d, nullptr, 0, n, q, g, 1.f, scratch());
  return kt.name;
}

const AttnKernels& attn_kernels() { return kernel_entry(kernel_table(), &KernelTable::attention)(); }

double read_sum(const float* x, size_t n) {
  const AttnKernels& kt = attn_kernels();
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks);
  parallel_for(chunks, [&](size_t i) { part[i] = kt.sum(x + i * kChunk, std::min(kChunk, n - i * kChunk)); });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

void swiglu(float* out, const float* gate, const float* up, size_t n) {
  const AttnKernels& kt = attn_kernels();
  constexpr size_t kChunk = size_t{1} << 16;  // whole vectors of every ISA
  run_tasks((n + kChunk - 1) / kChunk, static_cast<double>(n), [&](size_t i) {
    const size_t at = i * kChunk;
    kt.swiglu(out + at, gate + at, up + at, std::min(kChunk, n - at));
  });
}

void add(float* out, const float* a, const float* b, size_t n) {
  const AttnKernels& kt = attn_kernels();
  constexpr size_t kChunk = size_t{1} << 16;
  run_tasks((n + kChunk - 1) / kChunk, static_cast<double>(n), [&](size_t i) {
    const size_t at = i * kChunk;
    kt.add(out + at, a + at, b + at, std::min(kChunk, n - at));
  });
}

int64_t first_above(const float* x, size_t n, double max_abs) {
  // The largest float <= max_abs: for a float v, |v| <= max_abs exactly when |v| <= limit (and
  // Number.MAX_VALUE, past every float, gives FLT_MAX, so infinities are outside).
  float limit = static_cast<float>(max_abs);
  if (static_cast<double>(limit) > max_abs) limit = std::nextafter(limit, 0.f);
  const AttnKernels& kt = attn_kernels();
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  // Each chunk's first (n if none); the earliest chunk with one has the answer.
  std::vector<size_t> first(chunks, n);
  run_tasks(chunks, static_cast<double>(n), [&](size_t i) {
    const size_t at = i * kChunk, len = std::min(kChunk, n - at);
    const size_t j = kt.first_outside(x + at, len, limit);
    if (j < len) first[i] = at + j;
  });
  for (size_t i = 0; i < chunks; i++)
    if (first[i] != n) return static_cast<int64_t>(first[i]);
  return -1;
}

// ---- dense decode and prefill (spec.md §1) ----
void dense_decode(const CacheView& c, const float* q, float* out, int64_t nheads, Counts* counts) {
  const AttnKernels& kt = attn_kernels();
  for_each_group(c, c.batch, nheads, q, out, counts, [&](const Group& grp, int64_t, Counts& cnt) {
    attend(kt, c, grp, nullptr, c.npad[grp.b], static_cast<size_t>(c.nvalid(grp.b)), scratch().probs, nullptr, cnt);
  });
}

// A prefill task is a block of consecutive tokens of one KV head. Their query rows (g per
// token) read the head's K and V rows together: from memory once per block, then tile by tile
// from L1 for each block of heads (for_each_tile). One task per token read every row from
// memory once per token; at long contexts that loop was bound by the read bandwidth, this one
// by the arithmetic. kPrefillRows query rows per block: 16 rows' scores over 16k f32
// positions (1 MiB) stay in L2 between the softmax and the weighted sum of V.
constexpr size_t kPrefillRows = 16;

// The shape of a prefill call over sequence seq, shared by dense_prefill and h2o_seed.
struct PrefillBlocks {
  size_t g, d, tokens, valid, per_block;
  int64_t first;
  float scale;
  PrefillBlocks(const CacheView& c, int64_t seq, int64_t n_tokens, int64_t nheads)
      : g(static_cast<size_t>(nheads / c.nkv)),
        d(static_cast<size_t>(c.d)),
        tokens(static_cast<size_t>(n_tokens)),
        valid(static_cast<size_t>(c.nvalid(seq))),
        per_block(std::max<size_t>(1, kPrefillRows / g)),
        first(c.npad[seq]),
        scale(1.f / std::sqrt(static_cast<float>(d))) {}
  // Token i sees the valid positions up to itself: the causal mask drops the last N - 1 - i.
  size_t seen(size_t i) const { return valid - (tokens - 1 - i); }
  // The block of nt tokens from i0, KV head h: its query rows into s.block_q (m = nt * g rows,
  // token-major: row u * g + t is head h * g + t of token i0 + u) and their scores (m, hi) into
  // s.probs over the hi positions its last token sees; returns hi.
  size_t scores(const AttnKernels& kt, const CacheView& c, int64_t seq, int64_t h, const float* q, int64_t nheads, size_t i0, size_t nt,
                Scratch& s) const {
    const size_t m = nt * g, hi = seen(i0 + nt - 1);
    s.block_q.resize(m * d);
    for (size_t u = 0; u < nt; u++) std::copy_n(q + ((i0 + u) * nheads + h * g) * d, g * d, s.block_q.data() + u * g * d);
    s.probs.resize(m * hi);
    key_scores(kt, s.probs.data(), hi, c, c.k_rows(seq, h), d, nullptr, first, hi, s.block_q.data(), m, scale, s);
    return hi;
  }
};

// The softmax of a block's rows (m = nt * g, scores (m, hi) in s.probs): each row's weights
// exponentiated in place, 1 / their sum into s.block_inv (f64: h2o_seed's sums need it whole).
void block_softmax(const AttnKernels& kt, const PrefillBlocks& pb, size_t i0, size_t nt, size_t hi, Scratch& s) {
  const size_t m = nt * pb.g;
  s.block_inv.resize(m);
  for (size_t row = 0; row < m; row++) {
    float* x = s.probs.data() + row * hi;
    const size_t n = pb.seen(i0 + row / pb.g);
    s.block_inv[row] = 1.0 / kt.exp_sum(x, n, kt.max(x, n), true);
  }
}

// H2O's seed from a block after block_softmax: each row's weights, group-averaged, added in row
// order to a (the KV head's acc from its first valid position) at the positions the row sees. The
// group's sum goes head by head into a row of f64 (the order the sum over t takes anyway), so
// each loop runs over positions and vectorizes.
void seed_block(const PrefillBlocks& pb, size_t i0, size_t nt, size_t hi, Scratch& s, float* a) {
  const size_t g = pb.g;
  const double gd = static_cast<double>(g);
  for (size_t u = 0; u < nt; u++) {
    const size_t n = pb.seen(i0 + u);
    s.dbl.assign(n, 0.0);
    double* w = s.dbl.data();
    for (size_t t = 0; t < g; t++) {
      const float* p = s.probs.data() + (u * g + t) * hi;
      const double inv = s.block_inv[u * g + t];
      for (size_t j = 0; j < n; j++) w[j] += static_cast<float>(p[j] * inv);
    }
    for (size_t j = 0; j < n; j++) a[j] = static_cast<float>(a[j] + w[j] / gd);
  }
}

// The output rows of a block after block_softmax: the weighted sum of V, scaled by 1 / sum.
void attend_block(const AttnKernels& kt, const CacheView& c, const PrefillBlocks& pb, int64_t seq, int64_t h, float* out, int64_t nheads,
                  size_t i0, size_t nt, size_t hi, Scratch& s, Counts& cnt) {
  const size_t g = pb.g, d = pb.d, m = nt * g, lo = pb.seen(i0);
  const void* v = c.v_rows(seq, h);
  s.block_out.resize(m * d);
  // The positions every token of the block sees, all rows at once; then each token's own last
  // ones (never a zero weight on a position it does not see: an infinite V element would make NaN).
  kt.pv(s.block_out.data(), v, c.vtype, d, nullptr, pb.first, lo, s.probs.data(), hi, m, false);
  for (size_t u = 0; u < nt; u++) {
    const size_t n = pb.seen(i0 + u);
    if (n > lo)
      kt.pv(s.block_out.data() + u * g * d, v, c.vtype, d, nullptr, pb.first + static_cast<int64_t>(lo), n - lo,
            s.probs.data() + u * g * hi + lo, hi, g, true);
    for (size_t t = 0; t < g; t++)
      kt.scale(out + ((i0 + u) * nheads + h * g + t) * d, s.block_out.data() + (u * g + t) * d, d,
               static_cast<float>(s.block_inv[u * g + t]), false);
    cnt.k += static_cast<double>(n) * d;
    cnt.v += static_cast<double>(n) * d;
    cnt.io += 2.0 * g * d;
  }
}

// With acc (H2O's scores), the prefill also seeds them as h2o_seed does, from the same softmax:
// one pass over K for both. A KV head's rows then go in order in one task (no two tasks add to
// the same acc), which leaves cores idle when there are fewer KV heads than threads; then the
// two ops run apart. Either way out and acc are those of dense_prefill then h2o_seed, bit for bit.
void dense_prefill(const CacheView& c, int64_t seq, const float* q, float* out, int64_t n_tokens, int64_t nheads, Counts* counts,
                   float* acc) {
  const AttnKernels& kt = attn_kernels();
  const PrefillBlocks pb(c, seq, n_tokens, nheads);
  const size_t tokens = pb.tokens, per_block = pb.per_block;
  const double elements = 2.0 * static_cast<double>(tokens * c.nkv) * static_cast<double>(pb.valid * pb.d);
  const bool fused = acc != nullptr && c.nkv >= pool_threads();
  const size_t blocks = (tokens + per_block - 1) / per_block;
  const size_t tasks = fused ? static_cast<size_t>(c.nkv) : blocks * static_cast<size_t>(c.nkv);
  std::vector<Counts> per(tasks);
  run_tasks(tasks, elements, [&](size_t task) {
    Scratch& s = scratch();
    if (fused) {
      const int64_t h = static_cast<int64_t>(task);
      float* a = acc + (seq * c.nkv + h) * c.cap + pb.first;
      for (size_t i0 = 0; i0 < tokens; i0 += per_block) {
        const size_t nt = std::min(per_block, tokens - i0);
        const size_t hi = pb.scores(kt, c, seq, h, q, nheads, i0, nt, s);
        block_softmax(kt, pb, i0, nt, hi, s);
        seed_block(pb, i0, nt, hi, s, a);
        attend_block(kt, c, pb, seq, h, out, nheads, i0, nt, hi, s, per[task]);
      }
      return;
    }
    const int64_t h = static_cast<int64_t>(task) % c.nkv;
    const size_t i0 = task / static_cast<size_t>(c.nkv) * per_block, nt = std::min(per_block, tokens - i0);
    const size_t hi = pb.scores(kt, c, seq, h, q, nheads, i0, nt, s);
    block_softmax(kt, pb, i0, nt, hi, s);
    attend_block(kt, c, pb, seq, h, out, nheads, i0, nt, hi, s, per[task]);
  });
  if (counts)
    for (const Counts& p : per) counts->add(p);
  if (acc != nullptr && !fused) h2o_seed(c, seq, q, n_tokens, nheads, acc);
}

// ---- SparQ (spec.md §2) ----
void sparq_decode(const CacheView& c, const float* q, float* out, int64_t nheads, const SparqArgs& p, const SparqTraceView& trace,
                  Counts* counts) {
  const AttnKernels& kt = attn_kernels();
  for_each_group(c, c.batch, nheads, q, out, counts, [&](const Group& grp, int64_t, Counts& cnt) {
    Scratch& s = scratch();
    const size_t g = grp.g, d = grp.d, r = static_cast<size_t>(p.r);
    const size_t n = static_cast<size_t>(c.nvalid(grp.b));
    const int64_t first = c.npad[grp.b];

    // Step 1: i1 = top-r of sum_t |q_t| (f64, exactly the reference's sums), ascending.
    s.dbl.assign(d, 0.0);
    for (size_t t = 0; t < g; t++)
      for (size_t i = 0; i < d; i++) s.dbl[i] += std::fabs(static_cast<double>(grp.q[t * d + i]));
    s.idx.resize(d);
    for (size_t i = 0; i < d; i++) s.idx[i] = static_cast<int32_t>(i);
    std::partial_sort(s.idx.begin(), s.idx.begin() + r, s.idx.end(),
                      [&](int32_t a, int32_t b) { return s.dbl[a] > s.dbl[b] || (s.dbl[a] == s.dbl[b] && a < b); });
    std::vector<int32_t> i1(s.idx.begin(), s.idx.begin() + r);
    std::sort(i1.begin(), i1.end());
    // tau_t = sqrt(d * |q_t[i1]|_1 / |q_t|_1) (1 for an all-zero query). The logits are q_t[i1] · K[:, i1]
    // divided by tau_t afterwards, as spec.md writes it: scaling q first would round each component apart,
    // so two positions with equal dot products could get different logits and break the tie rule.
    std::vector<double> tau(g);
    s.qs.resize(g * r);
    for (size_t t = 0; t < g; t++) {
      double whole = 0, part = 0;
      for (size_t i = 0; i < d; i++) whole += std::fabs(static_cast<double>(grp.q[t * d + i]));
      for (int32_t i : i1) part += std::fabs(static_cast<double>(grp.q[t * d + i]));
      tau[t] = std::sqrt(static_cast<double>(d) * (whole > 0 ? part / whole : 1.0));
      for (size_t k = 0; k < r; k++) s.qs[t * r + k] = grp.q[t * d + i1[k]];
    }
    // Approximate logits (g, n) from r components: contiguous columns of K transposed, or gathered from rows;
    // divided by tau and each head's max taken on the way.
    s.logits.resize(g * n);
    std::vector<float> inv(g), mx(g);
    if (c.kT) kt.qk_cols(s.logits.data(), n, c.kt_head(grp.b, grp.h), i1.data(), r, first, n, s.qs.data(), g, tau.data(), mx.data());
    else
      kt.qk_gather(s.logits.data(), n, c.k_rows(grp.b, grp.h), c.ktype, d, i1.data(), r, first, n, s.qs.data(), g, tau.data(), mx.data());
    cnt.k += static_cast<double>(n) * r;
    // s_hat_t = softmax(logits_t). With g = 1 the ranking key is the logit itself (exp and the
    // division by the sum are monotone: only near ties can order differently, see topk_select.cc),
    // so exp is summed without storing and no score pass is needed. With g > 1 the key is
    // sum_t s_hat_t: exp(logit - max) is stored per head and the normalised rows are summed.
    for (size_t t = 0; t < g; t++) inv[t] = static_cast<float>(1.0 / kt.exp_sum(s.logits.data() + t * n, n, mx[t], g > 1));
    const float* key = s.logits.data();
    if (g > 1) {
      s.score.resize(n);
      sum_probs(kt, s.score.data(), s.logits.data(), g, n, inv.data());
      key = s.score.data();
    }

    // Step 2: i2 = the local window (last l positions) first, then the best scores.
    const size_t kk = std::min(static_cast<size_t>(p.k), n);
    const size_t local = std::min(static_cast<size_t>(p.l), n);
    s.idx2.resize(kk);
    if (kk <= local) {
      topk_select(kt, key + (n - local), local, kk, static_cast<int32_t>(first + (n - local)), s.idx2.data());
    } else {
      topk_select(kt, key, n - local, kk - local, static_cast<int32_t>(first), s.idx2.data());
      for (size_t j = 0; j < local; j++) s.idx2[kk - local + j] = static_cast<int32_t>(first + (n - local) + j);
    }
    // alpha_t = sum of s_hat_t over i2.
    // The selected entries are gathered first: with g = 1 they are logits, exp'd by the SIMD exp_sum.
    std::vector<double> alpha(g, 0.0);
    s.sel.resize(kk);
    for (size_t t = 0; t < g; t++) {
      for (size_t j = 0; j < kk; j++) s.sel[j] = s.logits[t * n + (s.idx2[j] - first)];
      double sum = 0;
      if (g > 1)
        for (size_t j = 0; j < kk; j++) sum += s.sel[j];
      else sum = kt.exp_sum(s.sel.data(), kk, mx[t], false);
      alpha[t] = sum * inv[t];
    }

    // Step 3: exact attention over i2, then interpolation with the running mean of V.
    attend(kt, c, grp, s.idx2.data(), 0, kk, s.probs, nullptr, cnt);
    if (p.reallocate) {
      const double* vsum = c.vsum + (grp.b * c.nkv + grp.h) * c.d;
      for (size_t i = 0; i < d; i++) {
        const float mean = static_cast<float>(n > 0 ? vsum[i] / static_cast<double>(n) : 0.0);
        for (size_t t = 0; t < g; t++) {
          float& y = grp.out[t * d + i];
          y = static_cast<float>(alpha[t] * y + (1 - alpha[t]) * mean);
        }
      }
      cnt.aux += 2.0 * d;
    }

    if (trace.i1) {
      const int64_t bh = grp.b * c.nkv + grp.h;
      std::copy(i1.begin(), i1.end(), trace.i1 + bh * p.r);
      std::fill(trace.i2 + bh * p.k, trace.i2 + (bh + 1) * p.k, 0);
      std::copy(s.idx2.begin(), s.idx2.end(), trace.i2 + bh * p.k);
      trace.i2count[bh] = static_cast<int32_t>(kk);
      const int64_t head = grp.b * nheads + grp.h * static_cast<int64_t>(g);
      for (size_t t = 0; t < g; t++) {
        trace.alpha[head + t] = static_cast<float>(alpha[t]);
        trace.tau[head + t] = static_cast<float>(tau[t]);
      }
    }
  });
}

// ---- oracle top-k / FlexGen (spec.md §3) ----
void topk_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, Counts* counts) {
  const AttnKernels& kt = attn_kernels();
  for_each_group(c, c.batch, nheads, q, out, counts, [&](const Group& grp, int64_t, Counts& cnt) {
    Scratch& s = scratch();
    const size_t g = grp.g, d = grp.d, n = static_cast<size_t>(c.nvalid(grp.b));
    const int64_t first = c.npad[grp.b];
    // Exact logits over every valid position: the full read of K.
    s.logits.resize(g * n);
    key_scores(kt, s.logits.data(), n, c, c.k_rows(grp.b, grp.h), d, nullptr, first, n, grp.q, g, 1.f / std::sqrt(static_cast<float>(d)),
               s);
    cnt.k += static_cast<double>(n) * d;
    // Rank by the group's summed probabilities.
    s.probs.assign(s.logits.begin(), s.logits.end());
    std::vector<float> inv(g);
    for (size_t t = 0; t < g; t++) {
      float* row = s.probs.data() + t * n;
      inv[t] = static_cast<float>(1.0 / kt.exp_sum(row, n, kt.max(row, n), true));
    }
    s.score.resize(n);
    sum_probs(kt, s.score.data(), s.probs.data(), g, n, inv.data());
    const size_t kk = std::min(static_cast<size_t>(k), n);
    s.idx2.resize(kk);
    topk_select(kt, s.score.data(), n, kk, static_cast<int32_t>(first), s.idx2.data());
    // Softmax over the selected logits only (no second read of K), then their values.
    s.sel.resize(g * kk);
    for (size_t t = 0; t < g; t++) {
      float* row = s.sel.data() + t * kk;
      for (size_t j = 0; j < kk; j++) row[j] = s.logits[t * n + (s.idx2[j] - first)];
      inv[t] = static_cast<float>(1.0 / kt.exp_sum(row, kk, kt.max(row, kk), true));
    }
    kt.pv(grp.out, c.v_rows(grp.b, grp.h), c.vtype, d, s.idx2.data(), 0, kk, s.sel.data(), kk, g, false);
    for (size_t t = 0; t < g; t++) kt.scale(grp.out + t * d, grp.out + t * d, d, inv[t], false);
    cnt.v += static_cast<double>(kk) * d;
  });
}

// ---- H2O (spec.md §3) ----
void h2o_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, float* acc, uint8_t* evicted, Counts* counts) {
  const AttnKernels& kt = attn_kernels();
  for_each_group(c, c.batch, nheads, q, out, counts, [&](const Group& grp, int64_t, Counts& cnt) {
    Scratch& s = scratch();
    const size_t g = grp.g;
    const int64_t base = (grp.b * c.nkv + grp.h) * c.cap;
    // C: surviving valid positions, ascending.
    s.idx.clear();
    for (int64_t j = c.npad[grp.b]; j < c.npast[grp.b]; j++)
      if (!evicted[base + j]) s.idx.push_back(static_cast<int32_t>(j));
    // Evict for good down to k before attending: the smallest acc outside the recent window of
    // w = max(1, floor(k/4)) positions (the current token always stays); ties: lowest index.
    const size_t keep = static_cast<size_t>(k);
    if (s.idx.size() > keep) {
      const int64_t window_start = c.npast[grp.b] - std::max<int64_t>(1, k / 4);
      s.idx2.clear();
      s.score.clear();
      for (size_t j = 0; j < s.idx.size() && s.idx[j] < window_start; j++) {
        s.idx2.push_back(s.idx[j]);
        s.score.push_back(-acc[base + s.idx[j]]);  // smallest acc = largest key
      }
      const size_t victims = s.idx.size() - keep;  // <= s.score.size(): the window holds at most k
      std::vector<int32_t> chosen(victims);
      topk_select(kt, s.score.data(), s.score.size(), victims, 0, chosen.data());
      for (size_t v = 0; v < victims; v++) evicted[base + s.idx2[chosen[v]]] = 1;
      size_t n = 0;
      for (size_t j = 0; j < s.idx.size(); j++)
        if (!evicted[base + s.idx[j]]) s.idx[n++] = s.idx[j];
      s.idx.resize(n);
    }
    const size_t n = s.idx.size();
    std::vector<float> inv(g);
    attend(kt, c, grp, s.idx.data(), 0, n, s.probs, inv.data(), cnt);
    // acc[j] += mean over the group of j's weight (f64 sum of f32 probabilities, as the reference).
    for (size_t j = 0; j < n; j++) {
      double w = 0;
      for (size_t t = 0; t < g; t++) w += static_cast<float>(s.probs[t * n + j] * inv[t]);
      float& a = acc[base + s.idx[j]];
      a = static_cast<float>(a + w / static_cast<double>(g));
    }
    cnt.aux += 2.0 * n;
  });
}

// H2O's scores from a prefill: per KV head (one task each, so no two tasks add to the same acc),
// blocks of rows as dense_prefill takes them; each row's causal softmax weights, group-averaged,
// added to acc of the positions it sees.
void h2o_seed(const CacheView& c, int64_t seq, const float* q, int64_t n_tokens, int64_t nheads, float* acc) {
  const AttnKernels& kt = attn_kernels();
  const PrefillBlocks pb(c, seq, n_tokens, nheads);
  run_tasks(static_cast<size_t>(c.nkv), static_cast<double>(pb.tokens * c.nkv) * static_cast<double>(pb.valid * pb.d), [&](size_t task) {
    Scratch& s = scratch();
    const int64_t h = static_cast<int64_t>(task);
    float* a = acc + (seq * c.nkv + h) * c.cap + pb.first;
    for (size_t i0 = 0; i0 < pb.tokens; i0 += pb.per_block) {
      const size_t nt = std::min(pb.per_block, pb.tokens - i0);
      const size_t hi = pb.scores(kt, c, seq, h, q, nheads, i0, nt, s);
      block_softmax(kt, pb, i0, nt, hi, s);
      seed_block(pb, i0, nt, hi, s, a);
    }
  });
}

// ---- LM-Infinite / StreamingLLM (spec.md §3) ----
void lminf_decode(const CacheView& c, const float* q, float* out, int64_t nheads, int64_t k, Counts* counts) {
  const AttnKernels& kt = attn_kernels();
  for_each_group(c, c.batch, nheads, q, out, counts, [&](const Group& grp, int64_t, Counts& cnt) {
    Scratch& s = scratch();
    const int64_t n = c.nvalid(grp.b), first = c.npad[grp.b];
    if (n <= k) {
      attend(kt, c, grp, nullptr, first, static_cast<size_t>(n), s.probs, nullptr, cnt);
      return;
    }
    // min(16, k - 1) sinks from the front, so the current token always stays in the recent part.
    const int64_t sinks = std::min(kLmInfiniteSinks, k - 1);
    s.idx.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < sinks; j++) s.idx[j] = static_cast<int32_t>(first + j);
    for (int64_t j = sinks; j < k; j++) s.idx[j] = static_cast<int32_t>(first + n - (k - j));
    attend(kt, c, grp, s.idx.data(), 0, static_cast<size_t>(k), s.probs, nullptr, cnt);
  });
}

}  // namespace sparq
