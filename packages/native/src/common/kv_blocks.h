// The quantized KV cache as the attention kernels read it (docs/kv-cache.md):
//   rows    q8_0 / q4_0: ggml's blocks along the head dimension (quant.h), headDim / 32 per row;
//   kT      SparQ's step-1 copy as integer codes of b = 8, 4 or 2 bits, contiguous over positions
//           per (sequence, KV head, component), with one f16 scale per block of KT_BLOCK positions:
//           value = f16 scale * code, code in [-qmax, qmax], qmax = 2^(b-1) - 1, stored as code + qmax
//           (i8 as the signed byte itself), position p in bits b (p mod 8 / b) of byte p * b / 8.
// The pointer and column types below decode W lanes at a time on any vector traits V
// (kernels/simd.h: from_i8, from_nibbles, from_packed, set1_half); scalar helpers are `static`,
// templates sit in an anonymous namespace, so each ISA's instantiation stays its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "common/half.h"
#include "common/quant.h"

namespace sparq {

// Element types of K and V rows and of SparQ's key columns; the numbers are the binding's codes.
enum class KvType : int { f32 = 0, f16 = 1, q8_0 = 2, q4_0 = 3 };
enum class KtType : int { f32 = 0, f16 = 1, i8 = 2, i4 = 3, i2 = 4 };

// Positions per kT scale.
constexpr int64_t KT_BLOCK = 64;

// The weight type of each KvType (indexed by it): its layout (block_traits.h) and, for the block
// types, the quantizer kvAppend stores rows with (quant.h). A new row type adds its entry here, its
// row pointer to KvRowTypes below, and an entry to KtType's table if it adds a column type.
static constexpr WeightType KV_WEIGHT_TYPE[] = {WeightType::f32, WeightType::f16, WeightType::q8_0, WeightType::q4_0};
constexpr WeightType kv_weight_type(KvType t) { return KV_WEIGHT_TYPE[static_cast<int>(t)]; }

// Bytes of one stored row of d elements (d a multiple of 32 for the block types).
static inline size_t kv_row_bytes(KvType t, size_t d) {
  const BlockTraits& b = block_traits(kv_weight_type(t));
  return d / static_cast<size_t>(b.elements) * static_cast<size_t>(b.bytes);
}

// Bits per kT element (32 and 16 for the float types), indexed by KtType.
static constexpr int KT_BITS[] = {32, 16, 8, 4, 2};
static inline int kt_bits(KtType t) { return KT_BITS[static_cast<int>(t)]; }
static inline bool kt_is_integer(KtType t) { return t == KtType::i8 || t == KtType::i4 || t == KtType::i2; }

// The code of position p in a column of `bits`-bit codes, as the signed integer it stands for.
static inline int kt_code_at(const uint8_t* col, int64_t p, int bits) {
  if (bits == 8) return static_cast<int8_t>(col[p]);
  const int per_byte = 8 / bits, qmax = (1 << (bits - 1)) - 1;
  return ((col[p / per_byte] >> (bits * (p % per_byte))) & ((1 << bits) - 1)) - qmax;
}

namespace {

// ---- K / V rows of ggml blocks ----
// q8_0: f16 d | 32 int8 q; x = d * q.
struct Q8_0Rows {
  static constexpr size_t kBytes = Q8_0_BYTES;
  // W codes as floats, unscaled (exact).
  template <class V>
  static typename V::F codes(const uint8_t* blk, size_t lane) {
    return V::from_i8(blk + 2 + lane);
  }
  template <class V>
  static typename V::F load(const uint8_t* blk, size_t lane) {
    return V::mul(codes<V>(blk, lane), V::set1_half(load_u16(blk)));
  }
  // Element `lane`'s signed code c (x = d * c) and value.
  static int code(const uint8_t* blk, size_t lane) { return static_cast<int8_t>(blk[2 + lane]); }
  static float at(const uint8_t* blk, size_t lane) { return static_cast<float>(code(blk, lane)) * fp16_to_fp32_ref(load_u16(blk)); }
};

// q4_0: f16 d | 16 bytes, element j < 16 the low nibble of byte j, j + 16 its high nibble; x = d * (q - 8)
// (q - 8 is exact in f32, so this is the reference's product). W <= 16 lanes never mix the halves.
struct Q4_0Rows {
  static constexpr size_t kBytes = Q4_0_BYTES;
  template <class V>
  static typename V::F codes(const uint8_t* blk, size_t lane) {
    const typename V::F q = lane < 16 ? V::from_nibbles(blk + 2 + lane, 0) : V::from_nibbles(blk + 2 + lane - 16, 4);
    return V::sub(q, V::set1(8.f));
  }
  template <class V>
  static typename V::F load(const uint8_t* blk, size_t lane) {
    return V::mul(codes<V>(blk, lane), V::set1_half(load_u16(blk)));
  }
  static int code(const uint8_t* blk, size_t lane) { return (lane < 16 ? blk[2 + lane] & 0x0f : blk[2 + lane - 16] >> 4) - 8; }
  static float at(const uint8_t* blk, size_t lane) { return static_cast<float>(code(blk, lane)) * fp16_to_fp32_ref(load_u16(blk)); }
};

// Element `lane` of block `blk` of rows of B: what `const float*` is to f32 rows. Adding n
// elements steps over whole blocks; row_at gives a row's start with lane 0 known to the
// compiler, so the constant offsets of an unrolled loop over a row fold into addresses.
template <class B>
struct BlockPtr {
  const uint8_t* blk;
  size_t lane;
  BlockPtr operator+(size_t n) const {
    const size_t t = lane + n;
    return BlockPtr{blk + t / QK * B::kBytes, t % QK};
  }
};

// Row `pos` of rows of d elements starting at base.
template <class T>
inline const T* row_at(const T* base, size_t pos, size_t d) {
  return base + pos * d;
}
template <class B>
inline BlockPtr<B> row_at(BlockPtr<B> base, size_t pos, size_t d) {
  return BlockPtr<B>{base.blk + pos * (d / QK) * B::kBytes, 0};
}

template <class T>
inline const void* row_address(const T* p) {
  return p;
}
template <class B>
inline const void* row_address(BlockPtr<B> p) {
  return p.blk;
}

// Stored bytes per row of d elements, and whether rows are converted on load (f16, blocks).
template <class P>
struct RowTraits;
template <>
struct RowTraits<const float*> {
  static constexpr bool kConverted = false;
  static constexpr size_t bytes(size_t d) { return d * 4; }
};
template <>
struct RowTraits<const uint16_t*> {
  static constexpr bool kConverted = true;
  static constexpr size_t bytes(size_t d) { return d * 2; }
};
// Whether P is a BlockPtr (rows of ggml blocks).
template <class P>
constexpr bool kBlockRows = false;
template <class B>
constexpr bool kBlockRows<BlockPtr<B>> = true;

template <class B>
struct RowTraits<BlockPtr<B>> {
  static constexpr bool kConverted = true;
  static constexpr size_t bytes(size_t d) { return d / QK * B::kBytes; }
};

// W lanes from p: whole (row_load), the first `avail` with zeros after (row_load_part), or
// every stride-th element (row_gather). Plain element types go to V's own loads.
template <class V, class T>
inline typename V::F row_load(const T* p) {
  return V::load(p);
}
template <class V, class B>
inline typename V::F row_load(BlockPtr<B> p) {
  return B::template load<V>(p.blk, p.lane);
}
template <class V, class T>
inline typename V::F row_load_part(const T* p, size_t avail) {
  return V::load_part(p, avail);
}
// Block rows only: W lanes' codes (unscaled) and their block's scale on every lane; row_load = their product.
template <class V, class B>
inline typename V::F row_codes(BlockPtr<B> p) {
  return B::template codes<V>(p.blk, p.lane);
}
template <class V, class B>
inline typename V::F row_scale(BlockPtr<B> p) {
  return V::set1_half(load_u16(p.blk));
}
template <class V, class B>
inline typename V::F row_gather_blocks(BlockPtr<B> p, size_t stride, size_t avail) {
  float x[V::W] = {};
  for (size_t l = 0; l < avail && l < static_cast<size_t>(V::W); l++) {
    const BlockPtr<B> e = p + l * stride;
    x[l] = B::at(e.blk, e.lane);
  }
  return V::load(x);
}
template <class V, class B>
inline typename V::F row_load_part(BlockPtr<B> p, size_t avail) {
  return row_gather_blocks<V>(p, 1, avail);
}
template <class V, class T>
inline typename V::F row_gather(const T* p, size_t stride, size_t avail) {
  return V::gather(p, stride, avail);
}
template <class V, class B>
inline typename V::F row_gather(BlockPtr<B> p, size_t stride, size_t avail) {
  return row_gather_blocks<V>(p, stride, avail);
}

// The row pointer of each KvType (indexed by it): const float*, const uint16_t* (f16 bits) or a BlockPtr.
using KvRowTypes = std::tuple<const float*, const uint16_t*, BlockPtr<Q8_0Rows>, BlockPtr<Q4_0Rows>>;
static_assert(std::tuple_size<KvRowTypes>::value == sizeof(KV_WEIGHT_TYPE) / sizeof(KV_WEIGHT_TYPE[0]), "one row pointer per KvType");

template <class P>
inline P rows_from(const void* base) {
  return static_cast<P>(base);
}
template <>
inline BlockPtr<Q8_0Rows> rows_from(const void* base) {
  return BlockPtr<Q8_0Rows>{static_cast<const uint8_t*>(base), 0};
}
template <>
inline BlockPtr<Q4_0Rows> rows_from(const void* base) {
  return BlockPtr<Q4_0Rows>{static_cast<const uint8_t*>(base), 0};
}

template <class Body, size_t... I>
inline void with_rows(KvType t, const void* base, Body& body, std::index_sequence<I...>) {
  // An equality chain on t, as block_traits.h's with_weight_type.
  static_cast<void>(((t == static_cast<KvType>(I) ? (body(rows_from<std::tuple_element_t<I, KvRowTypes>>(base)), true) : false) || ...));
}
// Calls body(rows) with rows of type t typed by KvRowTypes.
template <class Body>
inline void with_rows(KvType t, const void* base, Body body) {
  with_rows(t, base, body, std::make_index_sequence<std::tuple_size<KvRowTypes>::value>());
}

}  // namespace
}  // namespace sparq
