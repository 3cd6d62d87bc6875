// The kernel tables of kernel_table.h, one per ISA, filled here from the entry points each ISA's
// files define (portable code: only function addresses are taken, nothing runs until the table
// of a path the CPU supports is used).
#include "ops/kernel_table.h"

#include "common/cpu.h"
#include "ops/matvec.h"
#if SPARQ_ARM64
#include "kernels/arm64/kernels_arm64.h"
#endif

namespace sparq {
namespace {

// A per-type entry filled with one kernel that takes every type (all types, or the block types).
template <class Fn>
PerWeightType<Fn> every_type(Fn fn) {
  PerWeightType<Fn> entries{};
  for (Fn& e : entries) e = fn;
  return entries;
}
template <class Fn>
PerWeightType<Fn> every_block_type(Fn fn) {
  PerWeightType<Fn> entries{};
  for (int t = 0; t < WEIGHT_TYPE_COUNT; ++t) entries[t] = is_block_type(static_cast<WeightType>(t)) ? fn : nullptr;
  return entries;
}

// Every entry: the scalar kernels (kernels/ref).
KernelTable scalar_table() {
  KernelTable k{};
  k.name = "scalar";
  k.attention = attn_kernels_ref;
  k.matmul = every_type(matmul_ref);
  k.q8_name = "ref";
  k.q8_rows = every_block_type(matmul_q8_ref);
  k.q8_sums = every_block_type(q8_sums_ref);
  k.int4_rows = matmul_int4_dequant_ref;
  k.int4_int8_rows = matmul_int4_int8_ref;
  k.int4_group_sums = int4_group_sums_ref;
  k.quantize_blocks = quantize_blocks_ref;
  k.dequantize_blocks = dequantize_blocks_ref;
  return k;
}

#if SPARQ_X86
// AVX2 + FMA + F16C (kernels/x86/*_avx2.cc); no SIMD quantizers, INT4 group sums from the scalar table.
KernelTable avx2_table(const KernelTable* scalar) {
  KernelTable k{};
  k.name = "avx2";
  k.narrower = scalar;
  k.attention = attn_kernels_avx2;
  k.matmul = matmul_avx2;
  k.gemm = gemm_avx2;
  k.q8_name = "avx2";
  k.q8_rows = matmul_q8_avx2;
  k.q8_sums = q8_sums_avx2;
  k.gemm_q8_name = "avx2-gemm";
  k.gemm_q8_acts = quantize_q8_acts;
  k.gemm_q8 = gemm_q8_avx2;
  k.gemm_q8_sums = gemm_q8_avx2_sums;
  k.gemm_q8_packed = gemm_q8_avx2_packed;
  k.gemm_q8_repack = gemm_q8_repack;
  k.int4_rows = matmul_int4_dequant_avx2;
  k.int4_gemm = gemm_int4_avx2;
  k.int4_int8_rows = matmul_int4_int8_avx2;
  k.int4_int8_supports = int4_avx2_int8_supports;
  return k;
}

// AVX-512 F/BW/VL/DQ (kernels/x86/*_avx512.cc); with VNNI also the int8 products' VNNI kernels,
// without it the AVX2 ones (every AVX-512 CPU has AVX2).
KernelTable avx512_table(const KernelTable* avx2, bool vnni) {
  KernelTable k{};
  k.name = vnni ? "avx512-vnni" : "avx512";
  k.narrower = avx2;
  k.attention = attn_kernels_avx512;
  k.matmul = matmul_avx512;
  k.gemm = gemm_avx512;
  k.int4_rows = matmul_int4_dequant_avx512;
  k.int4_gemm = gemm_int4_avx512;
  k.quantize_blocks = quantize_blocks_avx512;
  k.dequantize_blocks = dequantize_blocks_avx512;
  if (vnni) {
    k.q8_name = "avx512";
    k.q8_rows = matmul_q8_avx512;
    k.q8_sums = q8_sums_avx512;
    k.gemm_q8_name = "vnni";
    k.gemm_q8_acts = quantize_q8_acts;
    k.gemm_q8 = gemm_q8_vnni;
    k.gemm_q8_sums = gemm_q8_vnni_sums;
    k.gemm_q8_packed = gemm_q8_vnni_packed;
    k.gemm_q8_repack = gemm_q8_repack;
    k.gemm_q8_vnni = true;
    k.int4_int8_rows = matmul_int4_int8_vnni;
    k.int4_group_sums = int4_group_sums_vnni;
    k.int4_int8_supports = int4_vnni_supports;
  } else {
    k.gemm_q8_name = avx2->gemm_q8_name;
    k.gemm_q8_acts = avx2->gemm_q8_acts;
    k.gemm_q8 = avx2->gemm_q8;
    k.gemm_q8_sums = avx2->gemm_q8_sums;
    k.gemm_q8_packed = avx2->gemm_q8_packed;
    k.gemm_q8_repack = avx2->gemm_q8_repack;
  }
  return k;
}
#endif

#if SPARQ_ARM64
// NEON (kernels/arm64/*_neon.cc); with the dot-product extension, the int8 products' SDOT kernels.
KernelTable neon_table(const KernelTable* scalar) {
  KernelTable k{};
  k.name = "neon";
  k.narrower = scalar;
  k.attention = attn_kernels_neon;
  k.matmul = matmul_neon;
  k.q8_name = "neon";
  k.q8_rows = every_block_type(matmul_q8_neon);
  k.q8_sums = every_block_type(q8_sums_neon);
  return k;
}

KernelTable dotprod_table(const KernelTable* neon) {
  KernelTable k{};
  k.name = "neon-dotprod";
  k.narrower = neon;
  k.q8_name = "neon-dotprod";
  k.q8_rows = every_block_type(matmul_q8_dotprod);
  k.q8_sums = every_block_type(q8_sums_dotprod);
  return k;
}
#endif

// The table of each KernelPath on this CPU, built once.
struct Tables {
  KernelTable scalar, avx2, avx512, neon, dotprod;
  const KernelTable* by_path[4];
  Tables() : scalar(scalar_table()) {
    for (const KernelTable*& t : by_path) t = &scalar;
#if SPARQ_X86
    avx2 = avx2_table(&scalar);
    avx512 = avx512_table(&avx2, cpu_features().avx512vnni);
    by_path[static_cast<int>(KernelPath::avx2)] = &avx2;
    by_path[static_cast<int>(KernelPath::avx512)] = &avx512;
#endif
#if SPARQ_ARM64
    neon = neon_table(&scalar);
    dotprod = dotprod_table(&neon);
    by_path[static_cast<int>(KernelPath::neon)] = cpu_features().dotprod ? &dotprod : &neon;
#endif
  }
};
static_assert(static_cast<int>(KernelPath::neon) == 3, "Tables::by_path has one entry per KernelPath");

const Tables& tables() {
  static const Tables built;
  return built;
}

}  // namespace

const KernelTable& kernel_table() { return *tables().by_path[static_cast<int>(kernel_path())]; }

const KernelTable& kernel_table_scalar() { return tables().scalar; }

}  // namespace sparq
