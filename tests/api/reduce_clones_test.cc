// The reduction kernels' "default" clone (x86-64's baseline, SSE2) against the clone this
// CPU's loader picks (AVX2 where the CPU has it), bit for bit, for every (op, dtype) pair
// the table allows. libdistcomm.so builds its kernels with target_clones, an ifunc resolved
// at load, so on an AVX2 machine no other test runs the default clone, which a user without
// AVX2 runs. //api:reduce_op_baseline_for_test compiles the same source without the clones
// (what the default clone is compiled as: the command line's target) as
// reduce_into_baseline_for_test, and this test calls it and reduce_into on the same inputs.
// CI builds libdistcomm.so unoptimised (fastbuild), where the loops are not vectorised and
// the clones hardly differ, so the baseline is also compared with the clones of a copy
// compiled at -O2 (//api:reduce_op_clones_for_test); the baseline copy is -O2 too.
//
// Ranks may run different clones (a job across machines of different CPUs), and every rank
// must get the same bits of an all_reduce: so NaN payloads, -0 against +0, and the
// NaN and zero rules of MIN and MAX must agree too, not only the ordinary values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "api/half.h"
#include "api/reduce_op.h"

namespace distcomm {
// reduce_op.cc's kernels compiled again (//api:reduce_op_baseline_for_test, without the
// clones; //api:reduce_op_clones_for_test, with them, at -O2). A declaration that differs
// from the definition fails to link (the parameters are in the name).
void reduce_into_baseline_for_test(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);
void reduce_into_clones_for_test(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);

namespace {

const ReduceOp::Kind kAllKinds[] = {ReduceOp::SUM,  ReduceOp::AVG, ReduceOp::PRODUCT,
                                    ReduceOp::MIN,  ReduceOp::MAX, ReduceOp::BAND,
                                    ReduceOp::BOR,  ReduceOp::BXOR, ReduceOp::PREMUL_SUM};

// Lengths around the kernels' 64-byte step and its tail (a step is 1 to 64 elements).
const size_t kLengths[] = {0, 1, 7, 8, 31, 1000, 4099};

// Element offsets of acc and in from a 64-byte boundary: aligned, both off by the same
// amount, and off by different amounts (the vector loop then cannot align both).
struct Offsets {
  size_t acc, in;
};
const Offsets kOffsets[] = {{0, 0}, {1, 1}, {1, 3}, {3, 0}};

constexpr size_t kTailGuard = 16;  // elements after the range, which must stay as they were

// Bit patterns that the ordinary values miss: zeros of both signs, infinities, quiet and
// signalling NaNs of both signs with and without payloads, the smallest subnormal, 1, -1 and
// the largest finite value.
std::vector<uint64_t> special_bits(DType t) {
  switch (t) {
    case DType::kFloat32:
      return {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fc12345,
              0xffc54321, 0x7f800001, 0x00000001, 0x3f800000, 0xbf800000, 0x7f7fffff};
    case DType::kFloat64:
      return {0x0000000000000000, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
              0x7ff8000000000000, 0xfff8000000000000, 0x7ff8000000012345, 0xfff8000000054321,
              0x7ff0000000000001, 0x0000000000000001, 0x3ff0000000000000, 0xbff0000000000000,
              0x7fefffffffffffff};
    case DType::kFloat16:
      return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7e55,
              0xfe2a, 0x7c01, 0x0001, 0x3c00, 0xbc00, 0x7bff};
    case DType::kBFloat16:
      return {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7fd5,
              0xffaa, 0x7f81, 0x0001, 0x3f80, 0xbf80, 0x7f7f};
    case DType::kInt8: return {0, 1, 0xff, 0x7f, 0x80};
    case DType::kUInt8: return {0, 1, 0xff, 0x7f, 0x80};
    case DType::kInt32: return {0, 1, 0xffffffff, 0x7fffffff, 0x80000000};
    case DType::kInt64: return {0, 1, ~uint64_t{0}, 0x7fffffffffffffff, 0x8000000000000000};
    case DType::kBool: return {0, 1};
  }
  return {};
}

// An element's bits as an integer (for messages and for writing patterns).
uint64_t read_bits(const unsigned char* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian: the low bytes
  return v;
}
void write_bits(unsigned char* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

// The bits of an ordinary value of dtype: finite floats of moderate size (sums and products
// that stay finite, so the arithmetic itself is compared), or any integer.
uint64_t ordinary_bits(DType t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> real(-100.0, 100.0);
  uint64_t out = 0;
  switch (t) {
    case DType::kFloat32: { const float f = static_cast<float>(real(rng)); std::memcpy(&out, &f, 4); break; }
    case DType::kFloat64: { const double d = real(rng); std::memcpy(&out, &d, 8); break; }
    case DType::kFloat16: out = Half(static_cast<float>(real(rng))).bits; break;
    case DType::kBFloat16: out = BFloat16(static_cast<float>(real(rng))).bits; break;
    case DType::kBool: out = rng() & 1; break;
    default: out = rng(); break;  // integers: every bit pattern, overflow included
  }
  return out;
}

// Fills a[i], b[i] (n elements of dtype) with a mix that reaches every branch of MIN and MAX:
// ordinary pairs, equal pairs (their bits decide: -0 and +0), specials against specials and
// against ordinary values, zeros of both signs, and random bit patterns (any NaN payload).
void fill_pairs(DType t, unsigned char* a, unsigned char* b, size_t n, std::mt19937_64& rng) {
  const size_t size = element_size(t);
  const std::vector<uint64_t> special = special_bits(t);
  const bool raw_bits_ok = t != DType::kBool;  // a bool is 0 or 1
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = ordinary_bits(t, rng), y = ordinary_bits(t, rng);
    switch (rng() % 8) {
      case 3: y = x; break;
      case 4: x = special[rng() % special.size()]; y = special[rng() % special.size()]; break;
      case 5: x = special[rng() % special.size()]; break;
      case 6: if (raw_bits_ok) { x = rng(); y = rng(); } break;
      case 7: x = special[rng() % 2]; y = special[rng() % 2]; break;  // +0/-0 (0/1 for integers)
      default: break;
    }
    write_bits(a + i * size, size, x);
    write_bits(b + i * size, size, y);
  }
}

// A byte buffer whose data starts 64-byte aligned, plus offset elements.
struct Buffer {
  std::vector<unsigned char> storage;
  unsigned char* base = nullptr;  // 64-byte aligned
  size_t bytes = 0;

  explicit Buffer(size_t n_bytes) : storage(n_bytes + 64), bytes(n_bytes) {
    const auto addr = reinterpret_cast<uintptr_t>(storage.data());
    base = storage.data() + ((64 - addr % 64) % 64);
  }
  void copy_from(const Buffer& other) { std::memcpy(base, other.base, bytes); }
};

bool is_nan_bits(DType t, uint64_t v) {
  switch (t) {
    case DType::kFloat32: return (v & 0x7fffffff) > 0x7f800000;
    case DType::kFloat64: return (v & 0x7fffffffffffffff) > 0x7ff0000000000000;
    case DType::kFloat16: return (v & 0x7fff) > 0x7c00;
    case DType::kBFloat16: return (v & 0x7fff) > 0x7f80;
    default: return false;
  }
}

// The one difference allowed, and counted (see the report at the end of each test). Where
// both inputs of a float sum or product are NaN, which of the two NaNs comes out (sign and
// payload) is the CPU's choice of operand order: x86 returns the first operand's, and GCC
// orders the operands of the commutative + and * differently in the two clones (opt build,
// GCC 12: for float32 the AVX2 clone returns acc's NaN and the baseline in's, for float64
// the other way round; float16 and bfloat16 differ too). IEEE 754 leaves that choice open;
// both clones must still give a NaN. Set this false once the kernels pick the NaN
// themselves (e.g. sum as (a != a ? a : b) + a), and the test then wants every bit.
constexpr bool kNanPairMayGiveEitherNan = true;

bool arithmetic(ReduceOp op) { return op.kind != ReduceOp::MIN && op.kind != ReduceOp::MAX; }

int nan_pairs_differing = 0;  // elements let through by kNanPairMayGiveEitherNan

std::string hex(uint64_t v, size_t size) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%0*" PRIx64, static_cast<int>(size * 2), v);
  return text;
}

using ReduceInto = void (*)(void*, const void*, size_t, DType, ReduceOp);

// What the baseline is compared with: the clone this CPU picks in libdistcomm.so (the
// shipped code; vectorised in opt builds only), and in the -O2 copy (vectorised always).
struct Candidate {
  const char* name;
  ReduceInto reduce;
};
const Candidate kCandidates[] = {
    {"libdistcomm.so's clone for this CPU", &reduce_into},
    {"the -O2 copy's clone for this CPU", &reduce_into_clones_for_test},
};

// Runs the baseline and each candidate on copies of acc (the first acc_offset + n +
// kTailGuard elements, the range at acc_offset) and in, and expects every byte the same:
// the range's results, and the elements around it untouched. Returns false on a difference.
bool clones_agree(DType t, ReduceOp op, const Buffer& acc, const Buffer& in, Offsets off, size_t n,
                  const std::string& what) {
  const size_t size = element_size(t);
  const std::string where = std::string(dtype_name(t)) + " " + op.name() + ", " + what + ", n=" +
                            std::to_string(n) + ", acc offset " + std::to_string(off.acc) +
                            ", in offset " + std::to_string(off.in) + " elements";
  Buffer acc_baseline(acc.bytes), in_baseline(in.bytes);
  acc_baseline.copy_from(acc);
  in_baseline.copy_from(in);
  reduce_into_baseline_for_test(acc_baseline.base + off.acc * size, in_baseline.base + off.in * size, n, t, op);
  if (std::memcmp(in_baseline.base, in.base, in.bytes) != 0) {
    ADD_FAILURE() << where << ": the baseline clone wrote to its input";
    return false;
  }
  for (const Candidate& candidate : kCandidates) {
    Buffer acc_picked(acc.bytes), in_picked(in.bytes);
    acc_picked.copy_from(acc);
    in_picked.copy_from(in);
    candidate.reduce(acc_picked.base + off.acc * size, in_picked.base + off.in * size, n, t, op);
    if (std::memcmp(in_picked.base, in.base, in.bytes) != 0) {
      ADD_FAILURE() << where << ": " << candidate.name << " wrote to its input";
      return false;
    }
    for (size_t e = 0; e < acc.bytes / size; ++e) {
      const uint64_t picked = read_bits(acc_picked.base + e * size, size);
      const uint64_t baseline = read_bits(acc_baseline.base + e * size, size);
      const uint64_t before = read_bits(acc.base + e * size, size);
      const bool in_range = e >= off.acc && e < off.acc + n;
      if (picked == baseline && (in_range || picked == before)) continue;
      const uint64_t other = in_range ? read_bits(in.base + (e - off.acc + off.in) * size, size) : 0;
      if (kNanPairMayGiveEitherNan && in_range && arithmetic(op) && is_nan_bits(t, before) &&
          is_nan_bits(t, other) && is_nan_bits(t, picked) && is_nan_bits(t, baseline)) {
        ++nan_pairs_differing;
        continue;
      }
      std::string inputs = "acc " + hex(before, size);
      if (in_range) inputs += ", in " + hex(other, size);
      ADD_FAILURE() << where << ": element " << e << (in_range ? " (in the range)" : " (outside the range)")
                    << ": " << candidate.name << " gives " << hex(picked, size)
                    << ", the baseline (SSE2) clone " << hex(baseline, size) << "; " << inputs;
      return false;
    }
  }
  return true;
}

// Which clone reduce_into runs here: the test compares something only where it is not the
// baseline itself.
const char* picked_clone() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("avx2") ? "avx2" : "default (this CPU lacks AVX2: both sides run the baseline)";
#else
  return "none (no clones on this target: both sides run the same code)";
#endif
}

TEST(ReduceClones, BaselineCloneMatchesThisCpusCloneBitForBit) {
  std::printf("reduce_into's clone on this CPU: %s\n", picked_clone());
  nan_pairs_differing = 0;
  std::mt19937_64 rng(20261207);
  int pairs = 0, cases = 0;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto t = static_cast<DType>(d);
    const size_t size = element_size(t);
    for (auto kind : kAllKinds) {
      const ReduceOp op(kind);
      if (!reduce_supported(op, t)) continue;
      ++pairs;
      for (size_t n : kLengths) {
        for (Offsets off : kOffsets) {
          const size_t acc_elems = off.acc + n + kTailGuard, in_elems = off.in + n + kTailGuard;
          Buffer acc(acc_elems * size), in(in_elems * size);
          // Everything, guards included, from the mix; the range's pairs line up element by element.
          Buffer scratch(std::max(acc_elems, in_elems) * size);
          fill_pairs(t, acc.base, scratch.base, acc_elems, rng);
          fill_pairs(t, scratch.base, in.base, in_elems, rng);
          fill_pairs(t, acc.base + off.acc * size, in.base + off.in * size, n, rng);
          ++cases;
          if (!clones_agree(t, op, acc, in, off, n, "mixed values")) return;
        }
      }
    }
  }
  // 4 float dtypes x 6 ops, 4 integer dtypes x 8 ops, bool x 7 ops (no avg): reduce_supported's table.
  EXPECT_EQ(pairs, 4 * 6 + 4 * 8 + 7);
  EXPECT_EQ(cases, pairs * 7 * 4);
  std::printf("float sums and products of two NaNs that gave different NaNs: %d elements\n", nan_pairs_differing);
}

// Every special value against every other (both orders), placed both in the vector loop and
// in its tail: NaN propagation and the sign of a zero result, for MIN and MAX above all.
TEST(ReduceClones, EverySpecialPairAgrees) {
  nan_pairs_differing = 0;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto t = static_cast<DType>(d);
    const size_t size = element_size(t);
    const std::vector<uint64_t> special = special_bits(t);
    const size_t s = special.size(), n = s * s + 7;  // 7 more: the last pairs fall in the tail
    for (auto kind : kAllKinds) {
      const ReduceOp op(kind);
      if (!reduce_supported(op, t)) continue;
      for (Offsets off : {Offsets{0, 0}, Offsets{1, 3}}) {
        Buffer acc((off.acc + n + kTailGuard) * size), in((off.in + n + kTailGuard) * size);
        for (size_t i = 0; i < n; ++i) {
          write_bits(acc.base + (off.acc + i) * size, size, special[i % s]);
          write_bits(in.base + (off.in + i) * size, size, special[(i / s) % s]);
        }
        if (!clones_agree(t, op, acc, in, off, n, "every pair of special values")) return;
      }
    }
  }
  std::printf("float sums and products of two NaNs that gave different NaNs: %d elements\n", nan_pairs_differing);
}

}  // namespace
}  // namespace distcomm
