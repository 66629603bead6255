// The checker against in-process reference collectives: results computed with distcomm's
// own reduction kernels, in different rank orders, must count 0 wrong; one changed
// element must count 1.
#include "tools/bench/result_check.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "api/tensor.h"

namespace distcomm {
namespace bench {
namespace {

using Buffer = std::vector<uint8_t>;

struct Case {
  BenchOp op;
  DType dtype;
  ReduceOp redop;
  int nranks;
  int root;
  int64_t chunk;
};

std::string describe(const Case& c) {
  return std::string(bench_op_name(c.op)) + " " + dtype_name(c.dtype) + " " + c.redop.name() + " n=" +
         std::to_string(c.nranks) + " root=" + std::to_string(c.root) + " chunk=" + std::to_string(c.chunk);
}

Buffer zeros(int64_t count, DType dtype) { return Buffer(count * element_size(dtype) + 1, 0); }

// Combines block `block` of every rank's input in the given rank order, as a backend would.
Buffer fold(const Case& c, const std::vector<Buffer>& inputs, int64_t block, const std::vector<int>& order) {
  const size_t es = element_size(c.dtype);
  Buffer acc = zeros(c.chunk, c.dtype);
  std::memcpy(acc.data(), inputs[order[0]].data() + block * c.chunk * es, c.chunk * es);
  const ReduceOp combine = c.redop.kind == ReduceOp::AVG ? ReduceOp(ReduceOp::SUM) : c.redop;
  for (size_t i = 1; i < order.size(); ++i) {
    reduce_into(acc.data(), inputs[order[i]].data() + block * c.chunk * es, c.chunk, c.dtype, combine);
  }
  if (c.redop.kind == ReduceOp::AVG) divide_in_place(acc.data(), c.chunk, c.dtype, c.nranks);
  return acc;
}

void copy_block(Buffer& out, int64_t out_block, const Buffer& in, int64_t in_block, const Case& c) {
  const size_t es = element_size(c.dtype);
  std::memcpy(out.data() + out_block * c.chunk * es, in.data() + in_block * c.chunk * es, c.chunk * es);
}

// Every rank's output of c.op, computed directly from every rank's input.
std::vector<Buffer> reference_outputs(const Case& c, const std::vector<Buffer>& in, const std::vector<int>& order) {
  const int n = c.nranks;
  std::vector<Buffer> out(n, zeros(c.chunk * n, c.dtype));
  for (int q = 0; q < n; ++q) {
    switch (c.op) {
      case BenchOp::kAllReduce: out[q] = fold(c, in, 0, order); break;
      case BenchOp::kReduce: if (q == c.root) out[q] = fold(c, in, 0, order); break;
      case BenchOp::kReduceScatter: out[q] = fold(c, in, q, order); break;
      case BenchOp::kBroadcast: copy_block(out[q], 0, in[c.root], 0, c); break;
      case BenchOp::kGather: if (q != c.root) break; [[fallthrough]];
      case BenchOp::kAllGather: for (int s = 0; s < n; ++s) copy_block(out[q], s, in[s], 0, c); break;
      case BenchOp::kAllToAll: for (int s = 0; s < n; ++s) copy_block(out[q], s, in[s], q, c); break;
      case BenchOp::kScatter: copy_block(out[q], 0, in[c.root], q, c); break;
      case BenchOp::kSendRecv: copy_block(out[q], 0, in[(q + n - 1) % n], 0, c); break;
      case BenchOp::kBarrier: break;
    }
  }
  return out;
}

std::vector<Buffer> inputs_for(const Case& c, const DataPattern& p) {
  std::vector<Buffer> in;
  for (int r = 0; r < c.nranks; ++r) {
    in.push_back(zeros(c.chunk * c.nranks, c.dtype));
    p.fill(r, 0, in.back().data(), c.chunk * c.nranks);
  }
  return in;
}

// Runs one case: right results count 0 in every rank order; one changed element counts 1.
void check_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  const DataPattern pattern(c.dtype, c.redop, op_reduces(c.op), c.nranks, 42);
  const std::vector<Buffer> in = inputs_for(c, pattern);
  std::vector<int> forward(c.nranks), backward(c.nranks);
  std::iota(forward.begin(), forward.end(), 0);
  backward.assign(forward.rbegin(), forward.rend());
  const std::vector<Buffer> out = reference_outputs(c, in, forward);
  const std::vector<Buffer> out_reversed = reference_outputs(c, in, backward);
  for (int q = 0; q < c.nranks; ++q) {
    const auto segments = expected_segments(c.op, q, c.nranks, c.root, c.chunk);
    EXPECT_EQ(count_wrong(pattern, segments, out[q].data()), 0) << "rank " << q;
    EXPECT_EQ(out[q], out_reversed[q]) << "rank " << q << ": the result depends on the reduction order";
    if (segments.empty() || c.chunk == 0) continue;
    // Corrupt the last element this rank checks.
    Buffer bad = out[q];
    const ExpectedSegment& last = segments.back();
    Tensor view = Tensor::from_blob(bad.data(), {last.offset + last.count}, c.dtype);
    const double v = view.item(last.offset + last.count - 1);
    view.set_item(last.offset + last.count - 1, c.dtype == DType::kBool ? 1 - v : (v == 1 ? 3 : 1));
    EXPECT_EQ(count_wrong(pattern, segments, bad.data()), 1) << "rank " << q;
  }
}

TEST(ResultCheck, EveryOpDtypeAndRedopIsExactInAnyOrder) {
  const ReduceOp redops[] = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,
                             ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR};
  int cases = 0;
  for (BenchOp op : all_bench_ops()) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType dtype = static_cast<DType>(d);
      for (ReduceOp redop : redops) {
        if (!reduce_supported(redop, dtype)) continue;
        if (!op_reduces(op) && redop.kind != ReduceOp::SUM) continue;  // redop is irrelevant there
        for (int n : {1, 2, 3, 4, 7}) {
          for (int64_t chunk : {0, 1, 333}) {
            check_case({op, dtype, redop, n, n - 1, chunk});
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 500);
}

TEST(ResultCheck, ValuesVaryAcrossElementsRanksAndSeeds) {
  const DataPattern p(DType::kFloat32, ReduceOp::SUM, true, 4, 7);
  std::set<int64_t> distinct;
  int differ_between_ranks = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    distinct.insert(p.value(0, i));
    differ_between_ranks += p.value(0, i) != p.value(1, i);
  }
  EXPECT_GT(distinct.size(), 900u);
  EXPECT_GT(differ_between_ranks, 990);
  const DataPattern other_seed(DType::kFloat32, ReduceOp::SUM, true, 4, 8);
  int differ_between_seeds = 0;
  for (int64_t i = 0; i < 1000; ++i) differ_between_seeds += p.value(0, i) != other_seed.value(0, i);
  EXPECT_GT(differ_between_seeds, 990);
}

TEST(ResultCheck, SumsStayExactAtTheEdgeOfTheType) {
  // bfloat16 holds integers exactly only up to 256: with 4 ranks every value is <= 64.
  const DataPattern p(DType::kBFloat16, ReduceOp::SUM, true, 4, 1);
  int64_t largest = 0;
  for (int64_t i = 0; i < 10000; ++i) largest = std::max(largest, p.value(3, i));
  EXPECT_EQ(largest, 64);
  // Products: at most log2(127) = 6 factors of two for int8.
  const DataPattern prod(DType::kInt8, ReduceOp::PRODUCT, true, 8, 1);
  for (int64_t i = 0; i < 1000; ++i) EXPECT_LE(prod.reduced_value(i), 64);
}

TEST(ResultCheck, ZeroedOutputIsWrong) {
  // A backend that does nothing must not pass: a zeroed all_reduce output is mostly wrong.
  const DataPattern p(DType::kInt32, ReduceOp::SUM, true, 2, 3);
  std::vector<int32_t> out(1000, 0);
  const auto segs = expected_segments(BenchOp::kAllReduce, 0, 2, 0, 1000);
  EXPECT_GT(count_wrong(p, segs, out.data()), 990);
}

TEST(ResultCheck, AverageOnFloatsAllowsRoundingOnly) {
  const DataPattern p(DType::kFloat16, ReduceOp::AVG, true, 3, 5);
  const double exact = p.reduced_value(10);
  Half close(static_cast<float>(exact));
  EXPECT_EQ(p.count_wrong_reduced(&close, 1, 10), 0);
  Half far(static_cast<float>(exact + 1));
  EXPECT_EQ(p.count_wrong_reduced(&far, 1, 10), 1);
}

// At any rank count, every rank's input shows in the result: for each rank some element's
// reference result changes (beyond the tolerance of avg) when that rank's contribution is
// dropped. Before, sums of int8 over 128 ranks were all 0 (each rank's value at most
// 127 / 128) and products saw only the first floor(log2(limit)) ranks.
TEST(ResultCheck, EveryRanksContributionIsVisibleAtAnyRankCount) {
  const ReduceOp redops[] = {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT, ReduceOp::MIN,
                             ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR,
                             ReduceOp::premul_sum(0.5)};
  int combinations = 0;
  for (int n : {2, 3, 128, 300}) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType dtype = static_cast<DType>(d);
      for (ReduceOp redop : redops) {
        if (!reduce_supported(redop, dtype)) continue;
        const std::string what = std::string(dtype_name(dtype)) + " " + redop.name() + " n=" + std::to_string(n);
        std::string why;
        if (!DataPattern::checkable(dtype, redop, true, n, &why)) {
          // Only the truncated average of a narrow integer over more ranks than it counts.
          EXPECT_EQ(redop.kind, ReduceOp::AVG) << what;
          EXPECT_GT(n, dtype == DType::kInt8 ? 127 : 255) << what;
          EXPECT_NE(why.find("always 0"), std::string::npos) << why;
          continue;
        }
        ++combinations;
        const DataPattern p(dtype, redop, true, n, 1000);
        const int64_t elements = 64 * p.stride() + 512;
        std::vector<double> expected(static_cast<size_t>(elements));
        for (int64_t i = 0; i < elements; ++i) expected[i] = p.reduced_value(i);
        int invisible = 0;
        for (int r = 0; r < n; ++r) {
          bool seen = false;
          for (int64_t i = 0; i < elements && !seen; ++i) {
            seen = !p.matches(p.reduced_value_without(i, r), expected[i]);
          }
          invisible += !seen;
        }
        EXPECT_EQ(invisible, 0) << what << ": ranks whose contribution no element shows";
        // And the sums stay exact: no reference result past the dtype's exact range.
        if (redop.kind == ReduceOp::SUM && !is_floating(dtype) && dtype != DType::kBool) {
          for (int64_t i = 0; i < elements; ++i) ASSERT_LE(expected[i], dtype == DType::kInt8 ? 127 : 1e18) << what;
        }
      }
    }
  }
  EXPECT_GT(combinations, 100);
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
