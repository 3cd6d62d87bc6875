// Module entry: the info() function, then every op group's bindings.
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>

#include "bindings/bindings.h"
#include "common/cpu.h"
#include "common/quant.h"

namespace sparq {
namespace {

Napi::Value info(const Napi::CallbackInfo& call) {
  Napi::Env env = call.Env();
  const CpuFeatures& f = cpu_features();
  Napi::Object out = Napi::Object::New(env);
  out.Set("kernel", kernel_path_name());
  out.Set("hardwareThreads", static_cast<double>(std::thread::hardware_concurrency()));
  Napi::Object features = Napi::Object::New(env);
  const std::pair<const char*, bool> flags[] = {
      {"avx2", f.avx2},
      {"fma", f.fma},
      {"f16c", f.f16c},
      {"avx512f", f.avx512f},
      {"avx512bw", f.avx512bw},
      {"avx512vl", f.avx512vl},
      {"avx512dq", f.avx512dq},
      {"avx512vnni", f.avx512vnni},
      {"avx512bf16", f.avx512bf16},
      {"amx_tile", f.amx_tile},
      {"amx_int8", f.amx_int8},
      {"amx_bf16", f.amx_bf16},
      {"dotprod", f.dotprod},
  };
  for (const auto& [name, on] : flags) features.Set(name, on);
  out.Set("features", features);
  return out;
}

// forceKernelPath(name | null) -> the path every op now uses; null restores the
// default. Tests and benchmarks only: it compares the paths on one machine.
Napi::Value force_kernel_path_js(const Napi::CallbackInfo& call) {
  Napi::Env env = call.Env();
  if (call[0].IsNull() || call[0].IsUndefined()) {
    force_kernel_path(nullptr);
  } else {
    if (!call[0].IsString()) throw Napi::TypeError::New(env, "forceKernelPath: name must be a string or null");
    const std::string name = call[0].As<Napi::String>().Utf8Value();
    bool known = false;
    for (KernelPath p : kAllKernelPaths) {
      if (name != path_name(p)) continue;
      known = true;
      if (!path_supported(p)) throw Napi::RangeError::New(env, "forceKernelPath: path '" + name + "' is not supported by this CPU");
      force_kernel_path(&p);
    }
    if (!known) throw Napi::RangeError::New(env, "forceKernelPath: path '" + name + "', expected 'scalar' | 'avx2' | 'avx512' | 'neon'");
  }
  return Napi::String::New(env, path_name(kernel_path()));
}

// kernelPaths() -> { supported: the paths this CPU runs, narrowest first; current }.
Napi::Value kernel_paths_js(const Napi::CallbackInfo& call) {
  Napi::Env env = call.Env();
  Napi::Array supported = Napi::Array::New(env);
  uint32_t i = 0;
  for (KernelPath p : kAllKernelPaths)
    if (path_supported(p)) supported.Set(i++, path_name(p));
  Napi::Object out = Napi::Object::New(env);
  out.Set("supported", supported);
  out.Set("current", path_name(kernel_path()));
  return out;
}

// The element types by the names core gives them (core/dtype.ts), each with its binding code.
constexpr std::pair<const char*, WeightType> kWeightTypeNames[] = {
    {"f32", WeightType::f32},   {"f16", WeightType::f16},       {"bf16", WeightType::bf16},     {"q4_0", WeightType::q4_0},
    {"q4_1", WeightType::q4_1}, {"q8_0", WeightType::q8_0},     {"q5_0", WeightType::q5_0},     {"q5_1", WeightType::q5_1},
    {"q2_k", WeightType::q2_k}, {"q3_k", WeightType::q3_k},     {"q4_k", WeightType::q4_k},     {"q5_k", WeightType::q5_k},
    {"q6_k", WeightType::q6_k}, {"iq4_nl", WeightType::iq4_nl}, {"iq4_xs", WeightType::iq4_xs},
};
static_assert(sizeof(kWeightTypeNames) / sizeof(kWeightTypeNames[0]) == WEIGHT_TYPE_COUNT, "a name for every weight type");

// blockLayouts() -> { name: { code, elements, bytes } }: the block shape every kernel assumes, per
// element type. The loader compares it with core's BLOCK_LAYOUT and refuses an addon that disagrees.
Napi::Value block_layouts_js(const Napi::CallbackInfo& call) {
  Napi::Env env = call.Env();
  Napi::Object out = Napi::Object::New(env);
  for (const auto& [name, type] : kWeightTypeNames) {
    const BlockShape shape = block_shape(type);
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("code", static_cast<double>(static_cast<int>(type)));
    entry.Set("elements", static_cast<double>(shape.elements));
    entry.Set("bytes", static_cast<double>(shape.bytes));
    out.Set(name, entry);
  }
  return out;
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("info", Napi::Function::New(env, info));
  exports.Set("forceKernelPath", Napi::Function::New(env, force_kernel_path_js));
  exports.Set("kernelPaths", Napi::Function::New(env, kernel_paths_js));
  exports.Set("blockLayouts", Napi::Function::New(env, block_layouts_js));
  register_basic_ops(env, exports);
  register_attention_ops(env, exports);
  register_memory_ops(env, exports);
  return exports;
}

}  // namespace
}  // namespace sparq

// The registration macro pastes the name into an identifier, so it needs an unqualified one.
static Napi::Object InitSparqNative(Napi::Env env, Napi::Object exports) { return sparq::init(env, exports); }
NODE_API_MODULE(sparq_native, InitSparqNative)
