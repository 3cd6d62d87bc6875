// Module entry: the info() function, then every op group's bindings.
#include <thread>

#include "bindings.h"
#include "cpu.h"

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
      {"avx2", f.avx2}, {"fma", f.fma}, {"f16c", f.f16c}, {"avx512f", f.avx512f}, {"avx512bw", f.avx512bw},
      {"avx512vl", f.avx512vl}, {"avx512dq", f.avx512dq}, {"avx512vnni", f.avx512vnni}, {"avx512bf16", f.avx512bf16},
      {"amx_tile", f.amx_tile}, {"amx_int8", f.amx_int8}, {"amx_bf16", f.amx_bf16},
  };
  for (const auto& [name, on] : flags) features.Set(name, on);
  out.Set("features", features);
  return out;
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("info", Napi::Function::New(env, info));
  register_basic_ops(env, exports);
  register_attention_ops(env, exports);
  return exports;
}

}  // namespace
}  // namespace sparq

// The registration macro pastes the name into an identifier, so it needs an unqualified one.
static Napi::Object InitSparqNative(Napi::Env env, Napi::Object exports) { return sparq::init(env, exports); }
NODE_API_MODULE(sparq_native, InitSparqNative)
