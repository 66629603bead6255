#include "api/dtype.h"

#include <algorithm>
#include <cctype>

#include "api/errors.h"

namespace distcomm {

size_t element_size(DType t) {
  return dispatch_dtype(t, [](auto v) { return sizeof(v); });
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "float32" || n == "float" || n == "f32") return DType::kFloat32;
  if (n == "float64" || n == "double" || n == "f64") return DType::kFloat64;
  if (n == "float16" || n == "half" || n == "f16") return DType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DType::kBFloat16;
  if (n == "int8" || n == "i8") return DType::kInt8;
  if (n == "uint8" || n == "u8" || n == "byte") return DType::kUInt8;
  if (n == "int32" || n == "int" || n == "i32") return DType::kInt32;
  if (n == "int64" || n == "long" || n == "i64") return DType::kInt64;
  if (n == "bool") return DType::kBool;
  throw InvalidArgument("unknown dtype '" + name +
                        "': expected one of float32, float64, float16, bfloat16, int8, uint8, "
                        "int32, int64, bool");
}

bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

bool is_integral(DType t) { return !is_floating(t); }

}  // namespace distcomm
