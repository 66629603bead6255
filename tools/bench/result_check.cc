#include "tools/bench/result_check.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace distcomm {
namespace bench {
namespace {

// The largest L such that every integer in [0, L] is exact in the dtype.
int64_t exact_limit(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 2048;
    case DType::kBFloat16: return 256;
    case DType::kFloat32: return int64_t{1} << 24;
    case DType::kFloat64: return int64_t{1} << 53;
    case DType::kInt8: return 127;
    case DType::kUInt8: return 255;
    case DType::kInt32: return 0x7fffffff;
    case DType::kInt64: return int64_t{1} << 62;
    case DType::kBool: return 1;
  }
  return 1;
}

// One part in 2^mantissa-bits, doubled: the rounding of one division (avg) or one
// multiplication per input (premul_sum) stays well inside it.
double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 2.0 * std::ldexp(1.0, -10);
    case DType::kBFloat16: return 2.0 * std::ldexp(1.0, -7);
    case DType::kFloat32: return 2.0 * std::ldexp(1.0, -23);
    case DType::kFloat64: return 2.0 * std::ldexp(1.0, -52);
    default: return 0.0;
  }
}

bool is_bitwise(ReduceOp op) {
  return op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR;
}

template <typename T>
constexpr bool kIs16BitFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
T from_integer(int64_t v) {
  if constexpr (kIs16BitFloat<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double to_double(T x) {
  if constexpr (kIs16BitFloat<T>) {
    return static_cast<double>(static_cast<float>(x));
  } else {
    return static_cast<double>(x);
  }
}

}  // namespace

DataPattern::DataPattern(DType dtype, ReduceOp redop, bool reduced, int nranks, uint64_t seed)
    : dtype_(dtype), redop_(redop), reduced_(reduced), nranks_(std::max(nranks, 1)), seed_(seed) {
  const int64_t limit = exact_limit(dtype);
  const int64_t cap = int64_t{1} << 16;  // plenty of distinct values; keeps sums far from limits
  max_value_ = std::min(limit, cap);
  product_ranks_ = 0;
  tolerance_ = 0.0;
  if (reduced_ && dtype != DType::kBool) {
    switch (redop.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
      case ReduceOp::PREMUL_SUM:
        max_value_ = std::min(limit / nranks_, cap);
        break;
      case ReduceOp::PRODUCT:
        // Factors of 1 or 2, at most log2(limit) of them per element.
        max_value_ = 2;
        while ((limit >> (product_ranks_ + 1)) > 0) ++product_ranks_;  // floor(log2(limit))
        break;
      case ReduceOp::BAND:
      case ReduceOp::BOR:
      case ReduceOp::BXOR:
        max_value_ = std::min<int64_t>(limit, 0xffff);  // 0x7f, 0xff or 0xffff: a bit mask
        break;
      default:
        break;
    }
    if (redop.kind == ReduceOp::AVG || redop.kind == ReduceOp::PREMUL_SUM) {
      tolerance_ = relative_tolerance(dtype);
    }
  }
}

uint64_t DataPattern::hash(int rank, int64_t index) const {
  // splitmix64's finaliser over a mix of the three inputs.
  uint64_t x = seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull +
               static_cast<uint64_t>(index) + 0x632BE59BD9B4E019ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int64_t DataPattern::value(int rank, int64_t index) const {
  const uint64_t h = hash(rank, index);
  if (dtype_ == DType::kBool) return static_cast<int64_t>(h & 1);
  if (reduced_ && redop_.kind == ReduceOp::PRODUCT) return (rank < product_ranks_ && (h & 1)) ? 2 : 1;
  if (reduced_ && is_bitwise(redop_)) return static_cast<int64_t>(h & static_cast<uint64_t>(max_value_));
  return static_cast<int64_t>(h % static_cast<uint64_t>(max_value_ + 1));
}

double DataPattern::reduced_value(int64_t index) const {
  std::vector<int64_t> inputs(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) inputs[static_cast<size_t>(r)] = value(r, index);
  return reference_reduction(redop_, dtype_, inputs);
}

bool DataPattern::matches(double got, double expected) const {
  if (tolerance_ == 0.0) return got == expected;
  return std::fabs(got - expected) <= tolerance_ * std::fabs(expected);
}

void DataPattern::fill(int rank, int64_t first_index, void* data, int64_t count) const {
  dispatch_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(data);
    for (int64_t i = 0; i < count; ++i) out[i] = from_integer<T>(value(rank, first_index + i));
  });
}

int64_t DataPattern::count_wrong_reduced(const void* data, int64_t count, int64_t first_index) const {
  return dispatch_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(data);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (!matches(to_double(in[i]), reduced_value(first_index + i))) ++wrong;
    }
    return wrong;
  });
}

int64_t DataPattern::count_wrong_copied(const void* data, int64_t count, int src_rank,
                                        int64_t first_index) const {
  return dispatch_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(data);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      // Compared in the dtype, so that a copy is checked exactly whatever the values.
      const double expected = to_double(from_integer<T>(value(src_rank, first_index + i)));
      if (to_double(in[i]) != expected) ++wrong;
    }
    return wrong;
  });
}

std::vector<ExpectedSegment> expected_segments(BenchOp op, int rank, int nranks, int root,
                                               int64_t chunk) {
  auto reduced = [](int64_t offset, int64_t count, int64_t first) {
    return ExpectedSegment{offset, count, true, 0, first};
  };
  auto copied = [](int64_t offset, int64_t count, int src, int64_t first) {
    return ExpectedSegment{offset, count, false, src, first};
  };
  std::vector<ExpectedSegment> out;
  switch (op) {
    case BenchOp::kAllReduce:
      out.push_back(reduced(0, chunk, 0));
      break;
    case BenchOp::kReduceScatter:
      out.push_back(reduced(0, chunk, rank * chunk));
      break;
    case BenchOp::kReduce:
      if (rank == root) out.push_back(reduced(0, chunk, 0));
      break;
    case BenchOp::kGather:
      if (rank != root) break;
      [[fallthrough]];
    case BenchOp::kAllGather:
      for (int s = 0; s < nranks; ++s) out.push_back(copied(s * chunk, chunk, s, 0));
      break;
    case BenchOp::kBroadcast:
      out.push_back(copied(0, chunk, root, 0));
      break;
    case BenchOp::kAllToAll:
      for (int s = 0; s < nranks; ++s) out.push_back(copied(s * chunk, chunk, s, rank * chunk));
      break;
    case BenchOp::kScatter:
      out.push_back(copied(0, chunk, root, rank * chunk));
      break;
    case BenchOp::kSendRecv:
      out.push_back(copied(0, chunk, (rank + nranks - 1) % nranks, 0));
      break;
    case BenchOp::kBarrier:
      break;
  }
  return out;
}

int64_t count_wrong(const DataPattern& pattern, const std::vector<ExpectedSegment>& segments,
                    const void* data) {
  const size_t element = element_size(pattern.dtype());
  int64_t wrong = 0;
  for (const ExpectedSegment& s : segments) {
    const void* at = static_cast<const char*>(data) + static_cast<size_t>(s.offset) * element;
    wrong += s.reduced ? pattern.count_wrong_reduced(at, s.count, s.first_index)
                       : pattern.count_wrong_copied(at, s.count, s.src_rank, s.first_index);
  }
  return wrong;
}

}  // namespace bench
}  // namespace distcomm
