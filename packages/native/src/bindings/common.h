// Shared helpers for the bindings: typed-array access that re-checks lengths
// before any kernel touches memory, and throws JS errors instead of aborting.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace sparq {

template <typename T>
bool is_array_of(napi_typedarray_type type) {
  if constexpr (std::is_same_v<T, float>) return type == napi_float32_array;
  if constexpr (std::is_same_v<T, double>) return type == napi_float64_array;
  if constexpr (std::is_same_v<T, int32_t>) return type == napi_int32_array;
  if constexpr (std::is_same_v<T, uint16_t>) return type == napi_uint16_array;
  if constexpr (std::is_same_v<T, int8_t>) return type == napi_int8_array;
  if constexpr (std::is_same_v<T, uint8_t>) return type == napi_uint8_array || type == napi_uint8_clamped_array;
  return false;
}

template <typename T>
constexpr const char* array_name() {
  if constexpr (std::is_same_v<T, float>) return "Float32Array";
  if constexpr (std::is_same_v<T, double>) return "Float64Array";
  if constexpr (std::is_same_v<T, int32_t>) return "Int32Array";
  if constexpr (std::is_same_v<T, uint16_t>) return "Uint16Array";
  if constexpr (std::is_same_v<T, int8_t>) return "Int8Array";
  return "Uint8Array";
}

// Elements [offset, offset + count) of typed array `value` as T*, after checking
// that it is the expected kind of array (an Int32Array where a Float32Array
// belongs is a TypeError, not integers read as floats) and long enough.
// Throws Napi::TypeError / Napi::RangeError, which become JS exceptions.
template <typename T>
T* typed_span(const Napi::Value& value, int64_t offset, int64_t count, const char* op, const char* name) {
  const std::string what = std::string(op) + ": " + name;
  if (!value.IsTypedArray()) throw Napi::TypeError::New(value.Env(), what + " must be a typed array");
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  // napi_get_typedarray_info gives the first element's address directly; going
  // through the ArrayBuffer would fail for SharedArrayBuffer-backed arrays (the
  // worker pool's caches), which N-API does not accept as ArrayBuffers.
  if (napi_get_typedarray_info(value.Env(), value, &type, &length, &data, nullptr, nullptr) != napi_ok) {
    throw Napi::TypeError::New(value.Env(), what + " could not be read");
  }
  if (!is_array_of<T>(type)) throw Napi::TypeError::New(value.Env(), what + " must be a " + array_name<T>());
  if (offset < 0 || count < 0 || static_cast<uint64_t>(offset) + static_cast<uint64_t>(count) > length) {
    throw Napi::RangeError::New(value.Env(),
                                what + " holds " + std::to_string(length) + " elements, the call needs " + std::to_string(offset + count));
  }
  return static_cast<T*>(data) + offset;
}

// The first `min_length` elements of typed array `value` as T* (see typed_span).
template <typename T>
T* typed_data(const Napi::Value& value, size_t min_length, const char* op, const char* name) {
  return typed_span<T>(value, 0, static_cast<int64_t>(min_length), op, name);
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
