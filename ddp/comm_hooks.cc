#include "ddp/comm_hooks.h"

#include <memory>
#include <type_traits>
#include <utility>

#include "api/errors.h"

namespace distcomm {
namespace ddp {
namespace {

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// dst[i] = src[i] * scale, converting between floating dtypes.
void convert(const Tensor& src, Tensor& dst, double scale) {
  dispatch_dtype(src.dtype(), [&](auto src_zero) {
    using S = decltype(src_zero);
    dispatch_dtype(dst.dtype(), [&](auto dst_zero) {
      using D = decltype(dst_zero);
      const S* in = static_cast<const S*>(src.data());
      D* out = static_cast<D*>(dst.data());
      for (int64_t i = 0; i < src.numel(); ++i) out[i] = from_double<D>(to_double(in[i]) * scale);
    });
  });
}

// The hooks below, as one type so that is_builtin_hook can tell them from a program's own.
// compress: cast to wire_dtype for the wire (float32/float64 buckets only).
struct BuiltinHook {
  bool compress = false;
  DType wire_dtype = DType::kFloat32;

  WorkPtr operator()(ProcessGroup& pg, GradBucket& bucket) const {
    const DType dtype = bucket.buffer.dtype();
    if (!compress || (dtype != DType::kFloat32 && dtype != DType::kFloat64)) {
      AllReduceOptions avg;
      avg.op = ReduceOp::AVG;
      return pg.all_reduce(bucket.buffer, avg);
    }
    // Held by shared_ptr and captured below: the wire buffer lives until the op ends.
    auto wire = std::make_shared<Tensor>(Tensor::empty({bucket.buffer.numel()}, wire_dtype));
    convert(bucket.buffer, *wire, 1.0 / pg.size());
    WorkPtr work = pg.all_reduce(*wire);
    Tensor result = bucket.buffer;
    return then(work, [wire, result]() mutable { convert(*wire, result, 1.0); });
  }
};

}  // namespace

CommHook allreduce_hook() { return BuiltinHook{}; }
CommHook fp16_compress_hook() { return BuiltinHook{true, DType::kFloat16}; }
CommHook bf16_compress_hook() { return BuiltinHook{true, DType::kBFloat16}; }

bool is_builtin_hook(const CommHook& hook) { return hook.target<BuiltinHook>() != nullptr; }

std::string hook_name(const CommHook& hook) {
  if (!hook) return "allreduce_hook";
  const BuiltinHook* builtin = hook.target<BuiltinHook>();
  if (!builtin) return "a hook of the program's own";
  if (!builtin->compress) return "allreduce_hook";
  return builtin->wire_dtype == DType::kFloat16 ? "fp16_compress_hook" : "bf16_compress_hook";
}

}  // namespace ddp
}  // namespace distcomm
