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

namespace {

constexpr int64_t kValueCap = int64_t{1} << 16;  // plenty of distinct values; keeps sums far from limits
// Sums: below this many distinct values per rank, fewer ranks contribute to each element.
constexpr int64_t kMinSumRange = 8;
// min, max, band, bor and bool's any/all: ranks active per element, so that one rank's value
// decides the result often (among 300 random values one is rarely the only largest).
constexpr int kExtremeRanks = 4;
// bool's any / all: one rank shows only where it alone differs from the identity.
constexpr int kBoolRanks = 2;

bool is_sum(ReduceOp op) {
  return op.kind == ReduceOp::SUM || op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

bool DataPattern::checkable(DType dtype, ReduceOp redop, bool reduced, int nranks, std::string* why) {
  if (!reduced || redop.kind != ReduceOp::AVG || is_floating(dtype) || dtype == DType::kBool) return true;
  const int64_t limit = exact_limit(dtype);
  if (nranks <= limit) return true;
  if (why != nullptr) {
    *why = std::string("the average of ") + dtype_name(dtype) + " over " + std::to_string(nranks) +
           " ranks is always 0 for inputs whose sum is exact in " + dtype_name(dtype) + " (at most " +
           std::to_string(limit) + "), so a lost rank cannot be seen";
  }
  return false;
}

DataPattern::DataPattern(DType dtype, ReduceOp redop, bool reduced, int nranks, uint64_t seed)
    : dtype_(dtype), redop_(redop), reduced_(reduced), nranks_(std::max(nranks, 1)), seed_(seed) {
  const int64_t limit = exact_limit(dtype);
  max_value_ = std::min(limit, kValueCap);
  equal_average_ = false;
  tolerance_ = 0.0;
  if (!reduced_) return;
  // Ranks that may contribute a non-identity value to one element.
  int active_ranks = nranks_;
  if (dtype == DType::kBool) {
    if (redop.kind != ReduceOp::BXOR) active_ranks = std::min(nranks_, kBoolRanks);
  } else {
    switch (redop.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
      case ReduceOp::PREMUL_SUM:
        if (redop.kind == ReduceOp::AVG && !is_floating(dtype)) {
          // The truncated average sees a rank only near a multiple of nranks: every rank
          // contributes, and on half the elements all hold the same b, so the average is b
          // exactly and any lost rank makes it smaller.
          equal_average_ = true;
          max_value_ = std::max<int64_t>(std::min(limit / nranks_, kValueCap), 1);
        } else if (limit / nranks_ >= kMinSumRange) {
          max_value_ = std::min(limit / nranks_, kValueCap);
        } else {
          active_ranks = static_cast<int>(std::max<int64_t>(limit / kMinSumRange, 1));
          max_value_ = std::min(limit / active_ranks, kValueCap);
        }
        break;
      case ReduceOp::PRODUCT: {
        // Factors of 1 or 2, at most floor(log2(limit)) twos per element.
        max_value_ = 2;
        int twos = 0;
        while ((limit >> (twos + 1)) > 0) ++twos;
        active_ranks = std::min(nranks_, std::max(twos, 1));
        break;
      }
      case ReduceOp::BAND:
      case ReduceOp::BOR:
        max_value_ = std::min<int64_t>(limit, 0xffff);  // 0x7f, 0xff or 0xffff: a bit mask
        active_ranks = std::min(nranks_, kExtremeRanks);
        break;
      case ReduceOp::BXOR:
        max_value_ = std::min<int64_t>(limit, 0xffff);  // every rank's bits show
        break;
      case ReduceOp::MIN:
      case ReduceOp::MAX:
        active_ranks = std::min(nranks_, kExtremeRanks);
        break;
      default:
        break;
    }
  }
  stride_ = ceil_div(nranks_, active_ranks);  // then at most active_ranks ranks per element
  if (redop.kind == ReduceOp::AVG || redop.kind == ReduceOp::PREMUL_SUM) tolerance_ = relative_tolerance(dtype);
}

uint64_t DataPattern::hash(int rank, int64_t index) const {
  // splitmix64's finaliser over a mix of the three inputs.
  uint64_t x = seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull +
               static_cast<uint64_t>(index) + 0x632BE59BD9B4E019ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool DataPattern::active(int rank, int64_t index) const {
  if (stride_ <= 1) return true;
  const auto s = static_cast<uint64_t>(stride_);
  return (static_cast<uint64_t>(index) + seed_) % s == static_cast<uint64_t>(rank) % s;
}

int64_t DataPattern::identity() const {
  switch (redop_.kind) {
    case ReduceOp::PRODUCT: return 1;
    case ReduceOp::MIN: return dtype_ == DType::kBool ? 1 : max_value_;  // the values' top
    case ReduceOp::BAND: return max_value_;                              // all bits (bool: 1)
    default: return 0;                                                   // sums, max, bor, bxor
  }
}

int64_t DataPattern::value(int rank, int64_t index) const {
  const uint64_t h = hash(rank, index);
  if (dtype_ == DType::kBool) return reduced_ && !active(rank, index) ? identity() : static_cast<int64_t>(h & 1);
  if (!reduced_) return static_cast<int64_t>(h % static_cast<uint64_t>(max_value_ + 1));
  if (!active(rank, index)) return identity();
  switch (redop_.kind) {
    case ReduceOp::PRODUCT: return (h & 1) ? 2 : 1;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: return static_cast<int64_t>(h & static_cast<uint64_t>(max_value_));
    case ReduceOp::MIN:
    case ReduceOp::MAX: return static_cast<int64_t>(h % static_cast<uint64_t>(max_value_ + 1));
    default: break;
  }
  if (equal_average_) {
    const uint64_t e = hash(-1, index);  // the element's own draw, the same on every rank
    if (e & 1) return 1 + static_cast<int64_t>((e >> 1) % static_cast<uint64_t>(max_value_));
  }
  // A sum over few active ranks: never 0 there, so each active rank shows.
  if (stride_ > 1) return 1 + static_cast<int64_t>(h % static_cast<uint64_t>(max_value_));
  return static_cast<int64_t>(h % static_cast<uint64_t>(max_value_ + 1));
}

double DataPattern::reduced_value(int64_t index) const { return reduced_value_without(index, -1); }

double DataPattern::reduced_value_without(int64_t index, int dropped) const {
  std::vector<int64_t> inputs(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) inputs[static_cast<size_t>(r)] = r == dropped ? identity() : value(r, index);
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
