// Element types distcomm moves and reduces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/half.h"

namespace distcomm {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kBool,
};

constexpr int kNumDTypes = 9;

size_t element_size(DType t);
const char* dtype_name(DType t);  // "float32", "bfloat16", ...
// Parses "float32"/"float"/"f32", "float16"/"half", "bfloat16"/"bf16", "int64"/"long", ...
// Throws InvalidArgument naming the accepted spellings.
DType parse_dtype(const std::string& name);
bool is_floating(DType t);
bool is_integral(DType t);  // bool counts as integral

// The C++ type that stores a DType, for templates: CType<DType::kFloat16> is Half.
template <DType T> struct CTypeOf;
template <> struct CTypeOf<DType::kFloat32> { using type = float; };
template <> struct CTypeOf<DType::kFloat64> { using type = double; };
template <> struct CTypeOf<DType::kFloat16> { using type = Half; };
template <> struct CTypeOf<DType::kBFloat16> { using type = BFloat16; };
template <> struct CTypeOf<DType::kInt8> { using type = int8_t; };
template <> struct CTypeOf<DType::kUInt8> { using type = uint8_t; };
template <> struct CTypeOf<DType::kInt32> { using type = int32_t; };
template <> struct CTypeOf<DType::kInt64> { using type = int64_t; };
template <> struct CTypeOf<DType::kBool> { using type = bool; };
template <DType T> using CType = typename CTypeOf<T>::type;

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

// Calls fn(CType<T>{}) -- i.e. fn with a value of the storage type -- for the runtime dtype.
template <typename Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kFloat16: return fn(Half{});
    case DType::kBFloat16: return fn(BFloat16{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kBool: return fn(bool{});
  }
  return fn(float{});
}

}  // namespace distcomm
