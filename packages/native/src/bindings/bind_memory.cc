// adviseHugePages(bytes: Uint8Array) -> the number of bytes advised: asks Linux to back the
// whole 2 MiB pages inside the array with transparent huge pages (madvise MADV_HUGEPAGE),
// which only pages not yet touched get at once. 0 where nothing was advised: a view
// shorter than one aligned huge page, another OS, or madvise refused. Never throws for that:
// huge pages are a speed-up, never a requirement (see packages/core/src/memory.ts).
#include <sys/mman.h>

#include <cstdint>

#include "bindings/bindings.h"
#include "bindings/common.h"

namespace sparq {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

Napi::Value advise_huge_pages(const Napi::CallbackInfo& call) {
  Napi::Env env = call.Env();
  size_t length = 0;
  if (call[0].IsTypedArray()) length = call[0].As<Napi::TypedArray>().ByteLength();
  uint8_t* data = typed_data<uint8_t>(call[0], length, "adviseHugePages", "bytes");
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + length) & ~(kHugePage - 1);
  double advised = 0;
#ifdef MADV_HUGEPAGE
  if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) advised = static_cast<double>(end - begin);
#endif
  return Napi::Number::New(env, advised);
}

// lineOffset(bytes: Uint8Array) -> how many bytes from the array's start its first 64-byte-aligned
// address is (0-63): core's allocAligned puts the KV cache's rows on cache lines with it.
Napi::Value line_offset(const Napi::CallbackInfo& call) {
  constexpr uintptr_t kLine = 64;
  uint8_t* data = typed_data<uint8_t>(call[0], 0, "lineOffset", "bytes");
  return Napi::Number::New(call.Env(), static_cast<double>((kLine - reinterpret_cast<uintptr_t>(data) % kLine) % kLine));
}

}  // namespace

void register_memory_ops(Napi::Env env, Napi::Object exports) {
  exports.Set("adviseHugePages", Napi::Function::New(env, advise_huge_pages));
  exports.Set("lineOffset", Napi::Function::New(env, line_offset));
}

}  // namespace sparq
