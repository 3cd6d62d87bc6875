// Shared helpers for the bindings: typed-array access that re-checks lengths
// before any kernel touches memory, and throws JS errors instead of aborting.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparq {

// Elements of typed array `value` as T*, after checking it is the expected
// kind and holds at least `min_length` elements. Throws Napi::TypeError /
// Napi::RangeError (caught by node-addon-api and turned into a JS exception).
template <typename T>
T* typed_data(const Napi::Value& value, size_t min_length, const char* op, const char* name) {
  if (!value.IsTypedArray()) {
    throw Napi::TypeError::New(value.Env(), std::string(op) + ": " + name + " must be a typed array");
  }
  Napi::TypedArray array = value.As<Napi::TypedArray>();
  const size_t element_size = array.ElementSize();
  if (element_size != sizeof(T)) {
    throw Napi::TypeError::New(value.Env(), std::string(op) + ": " + name + " has " + std::to_string(element_size) +
                                                "-byte elements, expected " + std::to_string(sizeof(T)));
  }
  if (array.ElementLength() < min_length) {
    throw Napi::RangeError::New(value.Env(), std::string(op) + ": " + name + " holds " + std::to_string(array.ElementLength()) +
                                                 " elements, the call needs " + std::to_string(min_length));
  }
  // napi_get_typedarray_info gives the first element's address directly. Going
  // through array.ArrayBuffer().Data() would fail for SharedArrayBuffer-backed
  // arrays (the worker pool's caches): N-API rejects them as ArrayBuffers.
  void* data = nullptr;
  napi_status status = napi_get_typedarray_info(value.Env(), array, nullptr, nullptr, &data, nullptr, nullptr);
  if (status != napi_ok) throw Napi::Error::New(value.Env(), std::string(op) + ": cannot read the memory of " + name);
  return static_cast<T*>(data);
}

// A non-negative integer argument, checked.
inline int64_t int_arg(const Napi::Value& value, const char* op, const char* name) {
  if (!value.IsNumber()) throw Napi::TypeError::New(value.Env(), std::string(op) + ": " + name + " must be a number");
  const double d = value.As<Napi::Number>().DoubleValue();
  if (d < 0 || d != static_cast<double>(static_cast<int64_t>(d))) {
    throw Napi::RangeError::New(value.Env(), std::string(op) + ": " + name + " must be a non-negative integer");
  }
  return static_cast<int64_t>(d);
}

}  // namespace sparq
