// One kernel table per ISA: every op family's kernels as function pointers, so an op's dispatch is a
// table lookup (docs/native.md). kernel_table() is the table of cpu.h's kernel_path() and the CPU's
// extensions (AVX-512 VNNI, arm64's dot product), built once; tests that force a narrower path get
// that path's table. An entry a table leaves null, or whose shape check refuses a call, is taken
// from the next narrower table (avx512-vnni -> avx2 -> scalar, neon-dotprod -> neon -> scalar);
// the scalar table has every entry.
#pragma once
#include <cstdint>

#include "common/quant.h"
#include "ops/attention.h"
#include "ops/gemm_q8.h"
#include "ops/int4.h"
#include "ops/matvec.h"
#include "ops/matvec_q8.h"

namespace sparq {

struct KernelTable {
  // kernel_path_name()'s: "avx512-vnni", "avx512", "avx2", "neon-dotprod", "neon" or "scalar".
  const char* name;
  // Where a null entry, or one whose shape check refuses a call, is taken from (null on the scalar table).
  const KernelTable* narrower;

  // Attention and the element-wise vector kernels it shares its SIMD traits with (max, exp-sum,
  // scale, f16 conversion, SwiGLU): attention.h's table, built by the ISA's attention file.
  const AttnKernels& (*attention)();

  // Dense products with f32 activations (matvec.h): weight rows [row_begin, row_end) of
  // x (n, cols) @ w^T. `matmul[t]` is the per-row kernel of weight type t (kernel_entry(k,
  // &KernelTable::matmul, t)); `gemm` the cache-blocked one for n >= GEMM_MIN_N activation rows, every type.
  using Matmul = MatmulFn;
  PerWeightType<Matmul> matmul;
  Matmul gemm;

  // The 'int8' product of block weights (matvec_q8.h): per row, and the test hook giving its int32
  // sub-block sums, one entry per block type (null for f32, f16, bf16, which never take it);
  // `q8_name` is what q8_block_sums reports.
  using Q8Rows = Q8RowsFn;
  using Q8Sums = Q8SumsFn;
  const char* q8_name;
  PerWeightType<Q8Rows> q8_rows;
  PerWeightType<Q8Sums> q8_sums;
  // The blocked 'int8' product (gemm_q8.h) and its sums, for gemm_q8_supports(t) types from
  // q8_gemm_min_n(t) activation rows; null: this table has none (no narrower table is asked:
  // the per-row kernel above runs).
  using GemmQ8 = void (*)(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin, int64_t row_end,
                          uint8_t* scratch);
  using GemmQ8Sums = void (*)(WeightType t, const uint8_t* w, const Q8Acts& a, int64_t rows, int32_t* sums);
  const char* gemm_q8_name;
  // Fills activation rows [t_begin, t_end) of acts (sized by size_q8_acts) for the blocked product.
  void (*gemm_q8_acts)(WeightType t, const float* x, int64_t t_begin, int64_t t_end, Q8Acts& acts);
  GemmQ8 gemm_q8;
  GemmQ8Sums gemm_q8_sums;
  // The same product over weights repacked once (gemm_q8.h, gemm_q8_packs types), its sums with `sums`,
  // and the repack; null: weights are not repacked on this path.
  using GemmQ8Packed = void (*)(WeightType t, const uint8_t* packed, const Q8Acts& a, int64_t rows, float* out, int64_t row_begin,
                                int64_t row_end, uint8_t* scratch, int32_t* sums);
  GemmQ8Packed gemm_q8_packed;
  void (*gemm_q8_repack)(WeightType t, const uint8_t* w, int64_t rows, int64_t cols, uint8_t* packed, int64_t row_begin, int64_t row_end);
  // The crossovers of BLOCK_TRAITS this table's blocked product was measured with (VNNI's or AVX2's).
  bool gemm_q8_vnni;

  // The engine's group-wise INT4 (int4.h): f32 activations per row and blocked; int8 activations per
  // row and the test hook's group sums, for the group sizes and widths `int4_int8_supports` accepts.
  using Int4Rows = void (*)(const Int4View& w, const float* x, int64_t n, float* out, int64_t row_begin, int64_t row_end);
  using Int4Int8Rows = void (*)(const Int4View& w, const Int8Acts& a, float* out, int64_t row_begin, int64_t row_end);
  using Int4Sums = void (*)(const Int4View& w, const Int8Acts& a, int32_t* sums);
  using Int4Shapes = bool (*)(int64_t group, int64_t cols);
  Int4Rows int4_rows, int4_gemm;
  Int4Int8Rows int4_int8_rows;
  Int4Sums int4_group_sums;
  Int4Shapes int4_int8_supports;  // null: every shape

  // Quantizers (quant.h): 32 f32 -> one block of a quantizable type; blocks -> f32 (the SIMD tables'
  // dequantizers cover the quantizable types, the scalar one every block type).
  void (*quantize_blocks)(WeightType t, const float* x, uint8_t* y, int64_t nblocks);
  void (*dequantize_blocks)(WeightType t, const uint8_t* x, float* y, int64_t nblocks);
};

// The table every op dispatches on.
const KernelTable& kernel_table();
// The scalar table (every entry).
const KernelTable& kernel_table_scalar();

// The first table from `k` down whose entry `field` is set (the scalar table's always is).
template <class Fn>
Fn kernel_entry(const KernelTable& k, Fn KernelTable::*field) {
  const KernelTable* t = &k;
  while (!(t->*field)) t = t->narrower;
  return t->*field;
}
// The same for a per-type entry: the first table from `k` down with a kernel for type `type`.
template <class Fn>
Fn kernel_entry(const KernelTable& k, PerWeightType<Fn> KernelTable::*field, WeightType type) {
  const KernelTable* t = &k;
  while (!(t->*field)[static_cast<int>(type)]) t = t->narrower;
  return (t->*field)[static_cast<int>(type)];
}

}  // namespace sparq
