// Each group of ops adds its functions to the addon's exports.
#pragma once
#include <napi.h>

namespace sparq {
void register_basic_ops(Napi::Env env, Napi::Object exports);      // bind_basic.cc
void register_attention_ops(Napi::Env env, Napi::Object exports);  // bind_attention.cc
void register_memory_ops(Napi::Env env, Napi::Object exports);     // bind_memory.cc
}  // namespace sparq
