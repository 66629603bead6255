#include "api/reduce_op.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "api/errors.h"

namespace distcomm {
namespace {

template <typename T>
constexpr bool kIsReduced16 = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Elements per step of the main loop: 64 bytes, a cache line. The inner loop's fixed trip
// count, over pointers declared __restrict in its own scope, is what lets GCC vectorise at
// -O2 (its default cost model there only vectorises loops whose count is a known multiple
// of the vector width, with no aliasing checks); the tail goes one by one.
template <typename T>
constexpr size_t kStep = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;

// a[j] = a[j] (f) b[j] for j < n. Inlined into both loops of combine(), so that the
// vectoriser sees the restrict-qualified pointers of its caller.
template <typename T, typename F>
inline void combine_run(T* __restrict a, const T* __restrict b, size_t n, F f) {
  for (size_t j = 0; j < n; ++j) {
    if constexpr (kIsReduced16<T>) {
      // 16-bit floats are combined in float and rounded once per step, like gloo/NCCL do.
      a[j] = T(f(static_cast<float>(a[j]), static_cast<float>(b[j])));
    } else {
      a[j] = static_cast<T>(f(a[j], b[j]));
    }
  }
}

// MIN and MAX the same whatever the order the ranks' values are combined in: NaN propagates
// (std::min would drop it depending on argument order), and -0 is below +0 (IEEE 754-2019's
// minimum and maximum), where "b < a" kept whichever zero came first. Equal floats are
// combined by their bits -- OR keeps a sign bit (MIN: -0), AND clears it (MAX: +0), and equal
// nonzero values have equal bits -- which keeps the loop branch-free and vectorised.
template <typename V, typename Bits>
inline V combine_bits(V a, V b, bool keep_sign) {
  Bits x, y;
  std::memcpy(&x, &a, sizeof(V));
  std::memcpy(&y, &b, sizeof(V));
  const Bits z = keep_sign ? (x | y) : (x & y);
  V out;
  std::memcpy(&out, &z, sizeof(V));
  return out;
}

template <typename V>
using BitsOf = std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>;

// Both results computed and one selected: an early return for equal values left the double
// loop scalar (in cache, 256K elements: float 1.7x and double 1.7x the old NaN-only ternary,
// where a signbit test per element cost 3x).
template <typename V>
inline V min_of(V a, V b) {
  const V r = (b < a || b != b) ? b : a;
  if constexpr (std::is_floating_point_v<V>) {
    const V equal = combine_bits<V, BitsOf<V>>(a, b, /*keep_sign=*/true);
    return a == b ? equal : r;
  }
  return r;
}

template <typename V>
inline V max_of(V a, V b) {
  const V r = (b > a || b != b) ? b : a;
  if constexpr (std::is_floating_point_v<V>) {
    const V equal = combine_bits<V, BitsOf<V>>(a, b, /*keep_sign=*/false);
    return a == b ? equal : r;
  }
  return r;
}

// x86-64's baseline vectors are SSE2's 16 bytes; where the CPU has AVX2 the loader picks a
// clone of the reductions compiled for it (an ifunc: chosen once, at load). In shm's 64 MiB
// float32 all_reduce between 2 ranks the reduction is a third of the time, and this clone
// made the op 15% faster on an AMD EPYC VM (median of 8 paired runs, faster in all 8;
// docs/performance.md, 2026-12-07).
//
// Tests compile this file again, for tests/api:reduce_clones_test (a CPU with AVX2 never
// runs the "default" clone; a user without AVX2 does), with one of:
//   DISTCOMM_REDUCE_BASELINE_FOR_TEST (//api:reduce_op_baseline_for_test): no clones. A
//     function without target_clones is compiled for the command line's target, as the
//     "default" clone is; noinline keeps it a function of its own, as a clone is (called
//     through the ifunc), so that its loops are compiled alone as theirs are.
//   DISTCOMM_REDUCE_CLONES_FOR_TEST (//api:reduce_op_clones_for_test): the clones, at -O2
//     whatever the build's mode (CI's fastbuild compiles libdistcomm.so unoptimised).
// Either compiles only the kernels, behind reduce_into_baseline_for_test or
// reduce_into_clones_for_test, so that the copy links beside libdistcomm.so.
#if defined(DISTCOMM_REDUCE_BASELINE_FOR_TEST) || defined(DISTCOMM_REDUCE_CLONES_FOR_TEST)
#define DISTCOMM_REDUCE_KERNELS_ONLY
#endif
// Under ThreadSanitizer (--config=tsan) no clones: the clones' ifunc resolver runs while the
// dynamic loader relocates libdistcomm.so, before TSan's runtime has started, and its
// instrumented code crashed every test that loads the library before main.
#if defined(DISTCOMM_REDUCE_BASELINE_FOR_TEST)
#define DISTCOMM_VECTOR_CLONES __attribute__((noinline))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define DISTCOMM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DISTCOMM_VECTOR_CLONES
#endif

// Integer SUM and PRODUCT wrap on overflow (reduce_op.h), computed in the unsigned type
// (at least unsigned int wide, so that no promotion to int can overflow) where wrapping is
// defined: int32 and int64 overflow in their own type is undefined behaviour, which the
// optimiser may assume never happens. Floats and bool are combined as they are.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline T add_of(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
  } else {
    return a + b;
  }
}

template <typename T>
inline T mul_of(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
  } else {
    return a * b;
  }
}

// One loop per (op, type), vectorised for the native types.
template <typename T, typename F>
DISTCOMM_VECTOR_CLONES void combine(T* __restrict acc, const T* __restrict in, size_t n, F f) {
  size_t i = 0;
  for (; i + kStep<T> <= n; i += kStep<T>) combine_run(acc + i, in + i, kStep<T>, f);
  combine_run(acc + i, in + i, n - i, f);
}

template <typename T>
void reduce_typed(T* acc, const T* in, size_t n, ReduceOp::Kind kind) {
  if constexpr (std::is_same_v<T, bool>) {
    // bool: sum and max are "any", product and min are "all".
    switch (kind) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR:
        return combine(acc, in, n, [](bool a, bool b) { return a || b; });
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND:
        return combine(acc, in, n, [](bool a, bool b) { return a && b; });
      case ReduceOp::BXOR:
        return combine(acc, in, n, [](bool a, bool b) { return a != b; });
      default: break;
    }
  } else {
    switch (kind) {
      case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM:
        return combine(acc, in, n, [](auto a, auto b) { return add_of(a, b); });
      case ReduceOp::PRODUCT:
        return combine(acc, in, n, [](auto a, auto b) { return mul_of(a, b); });
      case ReduceOp::MIN:  // min_of, max_of: the same whatever the order of combining
        return combine(acc, in, n, [](auto a, auto b) { return min_of(a, b); });
      case ReduceOp::MAX:
        return combine(acc, in, n, [](auto a, auto b) { return max_of(a, b); });
      default:
        if constexpr (std::is_integral_v<T>) {
          if (kind == ReduceOp::BAND) return combine(acc, in, n, [](T a, T b) { return a & b; });
          if (kind == ReduceOp::BOR) return combine(acc, in, n, [](T a, T b) { return a | b; });
          if (kind == ReduceOp::BXOR) return combine(acc, in, n, [](T a, T b) { return a ^ b; });
        }
        break;
    }
  }
  throw InvalidArgument("internal: reduce_typed reached an unsupported op");
}

}  // namespace

#if defined(DISTCOMM_REDUCE_BASELINE_FOR_TEST)
#define DISTCOMM_REDUCE_INTO reduce_into_baseline_for_test
#elif defined(DISTCOMM_REDUCE_CLONES_FOR_TEST)
#define DISTCOMM_REDUCE_INTO reduce_into_clones_for_test
#endif
#if defined(DISTCOMM_REDUCE_KERNELS_ONLY)
void DISTCOMM_REDUCE_INTO(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);
#else
#define DISTCOMM_REDUCE_INTO reduce_into
#endif

void DISTCOMM_REDUCE_INTO(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  check_reduce_supported(op, dtype);
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    reduce_typed(static_cast<T*>(acc), static_cast<const T*>(in), count, op.kind);
  });
}

// The rest is libdistcomm.so's alone: the test copies take it from there.
#if !defined(DISTCOMM_REDUCE_KERNELS_ONLY)
const char* ReduceOp::name() const {
  switch (kind) {
    case SUM: return "sum";
    case AVG: return "avg";
    case PRODUCT: return "prod";
    case MIN: return "min";
    case MAX: return "max";
    case BAND: return "band";
    case BOR: return "bor";
    case BXOR: return "bxor";
    case PREMUL_SUM: return "premul_sum";
  }
  return "?";
}

bool is_reduce_op_kind(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::MAX:
    case ReduceOp::BAND: case ReduceOp::BOR: case ReduceOp::BXOR: case ReduceOp::PREMUL_SUM:
      return true;
  }
  return false;
}

const char* const kReduceOpKindNames = "sum, avg, prod, min, max, band, bor, bxor or premul_sum";

ReduceOp parse_reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::SUM;
  if (name == "avg") return ReduceOp::AVG;
  if (name == "prod" || name == "product") return ReduceOp::PRODUCT;
  if (name == "min") return ReduceOp::MIN;
  if (name == "max") return ReduceOp::MAX;
  if (name == "band") return ReduceOp::BAND;
  if (name == "bor") return ReduceOp::BOR;
  if (name == "bxor") return ReduceOp::BXOR;
  throw InvalidArgument("unknown reduce op '" + name +
                        "': expected sum, avg, prod, min, max, band, bor or bxor");
}

bool reduce_supported(ReduceOp op, DType dtype, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!is_reduce_op_kind(op.kind)) {
    return no("reduce op kind " + std::to_string(static_cast<int>(op.kind)) + " is not a ReduceOp::Kind (" +
              kReduceOpKindNames + ")");
  }
  const bool bitwise = op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR;
  if (bitwise && is_floating(dtype)) {
    return no(std::string("reduce op ") + op.name() + " is bitwise and needs an integer or bool tensor, not " +
              dtype_name(dtype));
  }
  if (op.kind == ReduceOp::AVG && dtype == DType::kBool) return no("reduce op avg is not defined for bool");
  if (op.kind == ReduceOp::PREMUL_SUM && !is_floating(dtype)) {
    return no(std::string("reduce op premul_sum needs a floating-point tensor, not ") + dtype_name(dtype));
  }
  return true;
}

void check_reduce_supported(ReduceOp op, DType dtype) {
  std::string why;
  if (!reduce_supported(op, dtype, &why)) throw InvalidArgument(why);
}

void scale_in_place(void* data, size_t count, DType dtype, double factor) {
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(data);
    if constexpr (kIsReduced16<T>) {
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) p[i] = T(static_cast<float>(p[i]) * f);
    } else if constexpr (std::is_floating_point_v<T>) {
      const T f = static_cast<T>(factor);
      for (size_t i = 0; i < count; ++i) p[i] *= f;
    } else {
      throw InvalidArgument(std::string("cannot scale a ") + dtype_name(dtype) + " tensor by a real factor");
    }
  });
}

bool avg_scales_inputs(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

double reference_reduction(ReduceOp op, DType dtype, const std::vector<int64_t>& inputs) {
  if (inputs.empty()) throw InvalidArgument("reference_reduction: no inputs");
  int64_t acc = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    const int64_t v = inputs[r];
    switch (op.kind) {
      case ReduceOp::PRODUCT: acc *= v; break;
      case ReduceOp::MIN: acc = std::min(acc, v); break;
      case ReduceOp::MAX: acc = std::max(acc, v); break;
      case ReduceOp::BAND: acc &= v; break;
      case ReduceOp::BOR: acc |= v; break;
      case ReduceOp::BXOR: acc ^= v; break;
      default: acc += v; break;  // SUM, AVG, PREMUL_SUM
    }
  }
  if (dtype == DType::kBool) return acc != 0 ? 1 : 0;
  const auto n = static_cast<int64_t>(inputs.size());
  if (op.kind == ReduceOp::AVG) return is_floating(dtype) ? static_cast<double>(acc) / n : static_cast<double>(acc / n);
  if (op.kind == ReduceOp::PREMUL_SUM) return static_cast<double>(acc) * op.factor;
  return static_cast<double>(acc);
}

void divide_in_place(void* data, size_t count, DType dtype, int64_t divisor) {
  if (divisor == 0) throw InvalidArgument("divide_in_place: divisor is 0");
  dispatch_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(data);
    if constexpr (std::is_same_v<T, bool>) {
      throw InvalidArgument("cannot average a bool tensor");
    } else if constexpr (kIsReduced16<T>) {
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < count; ++i) p[i] = T(static_cast<float>(p[i]) / d);
    } else {
      const T d = static_cast<T>(divisor);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / d);
    }
  });
}
#endif  // !DISTCOMM_REDUCE_KERNELS_ONLY

}  // namespace distcomm
