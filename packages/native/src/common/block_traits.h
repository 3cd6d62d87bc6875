// One row of traits per weight type: what every op and kernel asks of a block format, in one
// table instead of a switch in each file (docs/native.md, "Adding a block type").
//   layout     elements and bytes per block (ggml's block_* structs; core/dtype.ts BLOCK_LAYOUT,
//              checked against this at load through blockLayouts());
//   decoding   how block_codes.h reads a block as int8 codes c_j with a scale dl and a minimum m
//              per sub-block, w_j = dl c_j + m: the sub-block's elements, whether there is a
//              minimum, whether the codes are stored signed, and the constant offsets the SIMD
//              kernels subtract in their integer sums instead;
//   int8 sums  the activation blocks ggml pairs with the type (matvec_q8.h) and where the blocked
//              'int8' product (gemm_q8.h) takes over from the per-row one.
//   dispatch   per_weight_type builds a table with one kernel per type and with_weight_type calls a
//              template with the type as a constant: the only places the list of types is expanded.
// constexpr data and templates only (no function is shared with the ISA files), so every file may include it.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace sparq {

// Weight element types of matvec/matmul; the numbers are the binding's dtype codes.
enum class WeightType : int {
  f32 = 0,
  f16 = 1,
  bf16 = 2,
  q4_0 = 3,
  q4_1 = 4,
  q8_0 = 5,
  q5_0 = 6,
  q5_1 = 7,
  q2_k = 8,
  q3_k = 9,
  q4_k = 10,
  q5_k = 11,
  q6_k = 12,
  iq4_nl = 13,
  iq4_xs = 14,
};
constexpr int WEIGHT_TYPE_COUNT = 15;

constexpr int64_t QK = 32;     // elements per block of q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl
constexpr int64_t QK_K = 256;  // elements per super-block of the K-quants and iq4_xs
constexpr int64_t Q4_0_BYTES = 2 + QK / 2;
constexpr int64_t Q4_1_BYTES = 4 + QK / 2;
constexpr int64_t Q8_0_BYTES = 2 + QK;
static_assert(Q4_0_BYTES == 18 && Q4_1_BYTES == 20 && Q8_0_BYTES == 34, "ggml block sizes");

// ggml's activation blocks (its vec_dot_type) per weight type:
// - q8_0 (q4_0, q5_0, q8_0, iq4_nl): 32 elements, d = amax / 127, codes nearest(x * (127 / amax)),
//   halves to even; the products use the step f16(d).
// - q8_1 (q4_1, q5_1): q8_0 plus the block's f16(d * sum q), which the weights' minimum multiplies.
// - q8_k (the K-quants, iq4_xs): 256 elements, scale = -127 / max (max the signed value of largest
//   magnitude), codes min(127, nearest(scale * x)), step 1 / scale in f32.
enum class ActBlocks { q8_0, q8_1, q8_k };

struct BlockTraits {
  WeightType type;
  // Layout: elements and bytes of one block (one element for the plain types).
  int64_t elements, bytes;
  // This backend also quantizes the type (q4_0, q4_1, q8_0); the others it only reads.
  bool quantizable;
  // Decoding: elements per sub-block (16 for q2_k, q3_k, q6_k, else 32; the plain types, which have
  // none, say 32 so that no size divided by it is 0).
  int sub_block;
  // Sub-blocks carry a minimum m (q4_1, q5_1 and the K-quants; q3_k's and q6_k's is their code offset).
  bool has_min;
  // Codes stored signed (q8_0, iq4_*).
  bool signed_codes;
  // Bits of the codes the integer sums multiply: 2 to 6 for unsigned codes, 8 for signed ones (0: plain types).
  int code_bits;
  // The code offset off of u - off that the x86 per-row kernels subtract in their integer sums (q4_0 8, q5_0 16).
  int bias;
  // The constant code offset of q3_k (4) and q6_k (32), subtracted once per super-block by the SIMD
  // kernels and folded into the blocked product's integer sums (gemm_q8_fold_offset).
  int offset8;
  // Integer sums: the activation blocks the type's products quantize x into.
  ActBlocks act;
  // The blocked 'int8' product (gemm_q8.h): handles the type; the first activation-row count where it
  // beats the per-row kernel with VNNI and with AVX2 over the file's layout (the panels decoded per
  // call), then over the weights repacked at load (gemm_q8_packs types; NEVER for the others).
  // gemm_q8.cc gives the measurements.
  bool gemm_q8;
  int64_t gemm_min_n_vnni, gemm_min_n_avx2;
  int64_t packed_min_n_vnni, packed_min_n_avx2;
};

// A crossover no product reaches: the type never takes that blocked product.
constexpr int64_t NEVER = std::numeric_limits<int64_t>::max();

namespace block_traits_detail {
constexpr BlockTraits plain(WeightType t, int64_t bytes) {
  return {t, 1, bytes, false, 32, false, false, 0, 0, 0, ActBlocks::q8_0, false, NEVER, NEVER, NEVER, NEVER};
}
}  // namespace block_traits_detail

// Indexed by WeightType (the binding's dtype codes); static_assert below keeps the order.
static constexpr BlockTraits BLOCK_TRAITS[WEIGHT_TYPE_COUNT] = {
    block_traits_detail::plain(WeightType::f32, 4),
    block_traits_detail::plain(WeightType::f16, 2),
    block_traits_detail::plain(WeightType::bf16, 2),
    // {type, elements, bytes, quantizable, sub_block, has_min, signed_codes, code_bits, bias, offset8, act, gemm_q8, gemm_min_n_vnni,
    //  gemm_min_n_avx2, packed_min_n_vnni, packed_min_n_avx2}
    {WeightType::q4_0, QK, Q4_0_BYTES, true, 32, false, false, 4, 8, 0, ActBlocks::q8_0, true, 8, 8, NEVER, NEVER},
    {WeightType::q4_1, QK, Q4_1_BYTES, true, 32, true, false, 4, 0, 0, ActBlocks::q8_1, true, 8, 8, NEVER, NEVER},
    {WeightType::q8_0, QK, Q8_0_BYTES, true, 32, false, true, 8, 0, 0, ActBlocks::q8_0, true, 8, 16, NEVER, NEVER},
    {WeightType::q5_0, QK, 22, false, 32, false, false, 5, 16, 0, ActBlocks::q8_0, true, 8, 8, NEVER, NEVER},
    {WeightType::q5_1, QK, 24, false, 32, true, false, 5, 0, 0, ActBlocks::q8_1, true, 16, 8, NEVER, NEVER},
    {WeightType::q2_k, QK_K, 84, false, 16, true, false, 2, 0, 0, ActBlocks::q8_k, true, 32, 32, NEVER, NEVER},
    {WeightType::q3_k, QK_K, 110, false, 16, true, false, 3, 0, 4, ActBlocks::q8_k, true, 24, 16, NEVER, NEVER},
    {WeightType::q4_k, QK_K, 144, false, 32, true, false, 4, 0, 0, ActBlocks::q8_k, true, 24, 24, 2, 2},
    {WeightType::q5_k, QK_K, 176, false, 32, true, false, 5, 0, 0, ActBlocks::q8_k, true, 16, 16, NEVER, NEVER},
    {WeightType::q6_k, QK_K, 210, false, 16, true, false, 6, 0, 32, ActBlocks::q8_k, true, 48, 40, 2, 12},
    {WeightType::iq4_nl, QK, 18, false, 32, false, true, 8, 0, 0, ActBlocks::q8_0, true, 8, 16, NEVER, NEVER},
    {WeightType::iq4_xs, QK_K, 136, false, 32, false, true, 8, 0, 0, ActBlocks::q8_k, true, 8, 16, NEVER, NEVER},
};

constexpr bool block_traits_in_order() {
  for (int i = 0; i < WEIGHT_TYPE_COUNT; ++i)
    if (static_cast<int>(BLOCK_TRAITS[i].type) != i) return false;
  return true;
}
static_assert(block_traits_in_order(), "BLOCK_TRAITS is indexed by WeightType");

constexpr const BlockTraits& block_traits(WeightType t) { return BLOCK_TRAITS[static_cast<int>(t)]; }

// The block types this backend only reads (decodes, never quantizes): q5_*, the K-quants, iq4_*.
constexpr bool is_read_only_block(WeightType t) { return block_traits(t).elements > 1 && !block_traits(t).quantizable; }

// ---- Dispatch over the types: the list above expanded once, here ----
// A weight type as a compile-time constant: T::value, and block_traits(T::value) in constant expressions.
template <WeightType T>
using WeightTypeTag = std::integral_constant<WeightType, T>;

// A table of one Fn per weight type: entry t is make(WeightTypeTag<t>()), the family's kernel for t or
// null where it has none (make decides with `if constexpr` on the traits). Used in constexpr
// initializers, so an ISA file's table holds only addresses and no code of it runs to fill one.
template <class Fn>
using PerWeightType = std::array<Fn, WEIGHT_TYPE_COUNT>;
namespace block_traits_detail {
template <class Fn, class Make, int... I>
constexpr PerWeightType<Fn> per_weight_type(Make make, std::integer_sequence<int, I...>) {
  return {{make(WeightTypeTag<static_cast<WeightType>(I)>())...}};
}
template <class F, int... I>
inline void with_weight_type(WeightType t, F& f, std::integer_sequence<int, I...>) {
  // An equality chain on t, which GCC compiles to the jump table a switch would be (-O2 and up).
  static_cast<void>(((t == static_cast<WeightType>(I) ? (f(WeightTypeTag<static_cast<WeightType>(I)>()), true) : false) || ...));
}
}  // namespace block_traits_detail
template <class Fn, class Make>
constexpr PerWeightType<Fn> per_weight_type(Make make) {
  return block_traits_detail::per_weight_type<Fn>(make, std::make_integer_sequence<int, WEIGHT_TYPE_COUNT>());
}

// Calls f(WeightTypeTag<t>()) for the run-time t, inside a template whose other parameters are fixed
// (f is instantiated for every type: it skips the ones it has no code for with `if constexpr`). f is a
// lambda of the calling file's anonymous namespace, so each ISA file's instantiation stays its own.
template <class F>
inline void with_weight_type(WeightType t, F&& f) {
  block_traits_detail::with_weight_type(t, f, std::make_integer_sequence<int, WEIGHT_TYPE_COUNT>());
}

}  // namespace sparq
