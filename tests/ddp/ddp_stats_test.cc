// Statistics arithmetic and text, and the replica-mismatch messages, without processes.
#include "ddp/ddp_stats.h"

#include <gtest/gtest.h>

#include <limits>

#include "ddp/replica_check.h"

namespace distcomm {
namespace ddp {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(CoveredLength, UnionOfOverlappingIntervals) {
  EXPECT_DOUBLE_EQ(covered_length({{0, 2}, {1, 3}, {5, 6}}, -kInf, kInf), 4.0);
  EXPECT_DOUBLE_EQ(covered_length({{5, 6}, {0, 10}}, -kInf, kInf), 10.0);
  EXPECT_DOUBLE_EQ(covered_length({}, -kInf, kInf), 0.0);
}

TEST(CoveredLength, ClipsToTheWindow) {
  // Communication 2..8 and 9..12, backward ends at 10: 6 + 1 overlapped.
  EXPECT_DOUBLE_EQ(covered_length({{2, 8}, {9, 12}}, 0, 10), 7.0);
  EXPECT_DOUBLE_EQ(covered_length({{11, 12}}, 0, 10), 0.0);
}

TEST(IterationStats, Summary) {
  IterationStats s;
  s.iteration = 3;
  s.bucket_bytes = {1048576, 512};
  s.bucket_grads = {2, 1};
  s.bytes_reduced = 1049088;
  s.backward_ms = 12.0;
  s.comm_ms = 4.0;
  s.overlapped_ms = 3.0;
  s.wait_ms = 1.0;
  EXPECT_DOUBLE_EQ(s.overlap_fraction(), 0.75);
  EXPECT_EQ(s.summary(),
            "iteration 3: 2 buckets (1.00 MiB, 512 B), 1.00 MiB reduced; backward 12.0 ms; "
            "communication 4.0 ms, 3.0 ms (75%) overlapped with backward; waited 1.0 ms");
}

TEST(IterationStats, SummaryShortensLongBucketLists) {
  IterationStats s;
  s.bucket_bytes.assign(20, 4);
  EXPECT_NE(s.summary().find("20 buckets (4 B, 4 B, 4 B, 4 B, 4 B, 4 B, 4 B, 4 B, ... 12 more)"), std::string::npos)
      << s.summary();
}

ReplicaDescription entries(std::vector<std::string> e) { return {std::move(e), "", {}}; }

TEST(ReplicaMismatch, AgreeingRanks) {
  EXPECT_EQ(describe_replica_mismatch({entries({"a", "b"}), entries({"a", "b"})}), "");
}

constexpr const char* kModelAdvice =
    ". Every rank must wrap the same parameters and buffers (names, dtypes, shapes, order); build the model "
    "identically on every rank";

TEST(ReplicaMismatch, NamesTheEntryAndTheRanks) {
  const std::string m = describe_replica_mismatch(
      {entries({"a", "w float32[4]"}), entries({"a", "w float32[5]"}), entries({"a", "w float32[4]"})});
  EXPECT_EQ(m, std::string("entry 1: w float32[4] on ranks 0, 2; w float32[5] on rank 1") + kModelAdvice);
}

TEST(ReplicaMismatch, CountsDifferAndTheExtraEntryIsNamed) {
  const std::string m = describe_replica_mismatch({entries({"a", "b"}), entries({"a"})});
  EXPECT_EQ(m, std::string("the ranks hold different numbers of tensors: 2 on rank 0; 1 on rank 1; "
                           "entry 1: b on rank 0; no tensor on rank 1") + kModelAdvice);
}

TEST(ReplicaMismatch, LocalProblemsComeFirstWithoutTheModelAdvice) {
  const std::string m = describe_replica_mismatch({entries({"a"}), {{}, "grad does not match", {}}});
  EXPECT_EQ(m, "invalid arguments on rank 1: grad does not match");
}

TEST(ReplicaMismatch, OptionsThatDifferAreNamedWithTheirOwnAdvice) {
  ReplicaDescription r0 = entries({"a"}), r1 = entries({"a"}), r2 = entries({"b"});
  r0.options = {{"find_unused_parameters", "false"}, {"log_every_n", "0"}};
  r1.options = {{"find_unused_parameters", "true"}, {"log_every_n", "0"}};
  r2.options = r0.options;
  EXPECT_EQ(describe_replica_mismatch({r0, r1, r0}),
            "find_unused_parameters differs between ranks: false on ranks 0, 2; true on rank 1. Every rank must "
            "pass the same DdpOptions (all but gradient_as_bucket_view; see DdpOptions in "
            "ddp/distributed_data_parallel.h)");
  // With the model's own difference too: each part with its advice.
  const std::string both = describe_replica_mismatch({r0, r1, r2});
  EXPECT_NE(both.find("see DdpOptions in ddp/distributed_data_parallel.h). entry 0: a on ranks 0, 1; b on rank 2"),
            std::string::npos)
      << both;
  EXPECT_NE(both.find(kModelAdvice), std::string::npos) << both;
}

TEST(ReplicaMismatch, ManyDifferencesAreSummarised) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 8; ++i) {
    a.push_back("x" + std::to_string(i));
    b.push_back("y" + std::to_string(i));
  }
  const std::string m = describe_replica_mismatch({entries(a), entries(b)});
  EXPECT_NE(m.find("entry 4: x4 on rank 0; y4 on rank 1; and 3 more differing entries"), std::string::npos) << m;
}

}  // namespace
}  // namespace ddp
}  // namespace distcomm
