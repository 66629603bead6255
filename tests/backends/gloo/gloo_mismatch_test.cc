// Ranks that disagree on an op, over gloo, 3 ranks, default settings (no debug level): every
// rank ends with a named distcomm error well before the group's timeout -- never a crash
// on gloo's thread, never a success with wrong data. The cases of tests/backends/mismatch, plus a
// skipped collective, an all_to_all whose splits do not pair, and a per-op timeout behind
// a stuck op.
#include <chrono>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "api/errors.h"
#include "tests/backends/mismatch/mismatch_cases.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

using testing::GroupHarnessOptions;
using testing::run_group;
using namespace mismatch;

// The group's timeout: far above what a named error may take (probe after 3 s, then a
// tick or two; a loaded machine adds some).
constexpr std::chrono::milliseconds kOpTimeout{60000};
constexpr double kNamedWithin = 25;

void on_three_ranks(const std::function<void(ProcessGroup&)>& fn) {
  GroupHarnessOptions options;
  options.op_timeout = kOpTimeout;
  run_group(3, "gloo", fn, options);
}

TEST(GlooMismatch, CountsDifferIsDesyncWithTheTable) {
  on_three_ranks([](ProcessGroup& pg) {
    const std::string msg = expect_failure_within<Desync>(all_reduce_counts(pg), 0, kNamedWithin, "all_reduce 10 vs 20");
    EXPECT_NE(msg.find("float32[10]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float32[20]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ranks [1, 2]"), std::string::npos) << msg;
  });
}

TEST(GlooMismatch, SameBytesOtherDtypeIsDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    const std::string msg = expect_failure_within<Desync>(all_reduce_dtypes(pg, DType::kInt32), 0, kNamedWithin, "int32");
    EXPECT_NE(msg.find("int32[10]"), std::string::npos) << msg;
  });
}

TEST(GlooMismatch, Float64AgainstFloat32IsDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    expect_failure_within<Desync>(all_reduce_dtypes(pg, DType::kFloat64), 0, kNamedWithin, "float64");
  });
}

TEST(GlooMismatch, SumAgainstMaxIsDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    const std::string msg = expect_failure_within<Desync>(all_reduce_ops(pg), 0, kNamedWithin, "sum vs max");
    EXPECT_NE(msg.find(" max"), std::string::npos) << msg;
  });
}

TEST(GlooMismatch, AllReduceAgainstBroadcastIsDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    const std::string msg = expect_failure_within<Desync>(all_reduce_or_broadcast(pg), 0, kNamedWithin, "op");
    EXPECT_NE(msg.find("broadcast #1"), std::string::npos) << msg;
  });
}

// Ranks 1 and 2 agree (root 1): rank 2 gets rank 1's tensor, as it asked, and may leave
// (its closed connections cut rank 0's broadcast off); ranks 0 and 1 cannot finish. Both
// must end with the Desync and its table, whichever of them finds it first: the other is
// cut off by the finder, and reports the finder's Desync, never "connection closed".
TEST(GlooMismatch, RootsDifferIsDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    if (pg.rank() == 2) {
      Tensor t;
      try {
        broadcast_roots(pg, &t)();
        EXPECT_EQ(t.item(9), 2) << "rank 1's tensor";
      } catch (const Desync&) {
        // also right: rank 1 sends to rank 0 and rank 2 in gloo's order, and may be cut
        // off before it gets to rank 2
      }
      return;
    }
    const std::string msg = expect_failure_within<Desync>(broadcast_roots(pg), 0, kNamedWithin, "roots");
    EXPECT_NE(msg.find("broadcast #1 float32[10] root 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("broadcast #1 float32[10] root 1"), std::string::npos) << msg;
  });
}

TEST(GlooMismatch, AllToAllSplitsThatDoNotPairAreDesync) {
  on_three_ranks([](ProcessGroup& pg) {
    const std::string msg = expect_failure_within<Desync>(all_to_all_splits(pg), 0, kNamedWithin, "splits");
    EXPECT_NE(msg.find("rank 2 sends 1 elements to rank 0, which expects 2"), std::string::npos) << msg;
  });
}

// The receiver's tensor is smaller than the message (gloo would abort on its thread), or
// larger (gloo would fill part of it): both ends get InvalidArgument naming both counts.
TEST(GlooMismatch, RecvSmallerThanTheMessage) {
  on_three_ranks([](ProcessGroup& pg) {
    p2p_sizes(pg, /*sent=*/4, /*received=*/2, kNamedWithin);
  });
}

TEST(GlooMismatch, RecvLargerThanTheMessage) {
  on_three_ranks([](ProcessGroup& pg) {
    p2p_sizes(pg, /*sent=*/2, /*received=*/4, kNamedWithin);
  });
}

// Rank 2 skips an all_reduce: the others time out naming it, and where it is.
TEST(GlooMismatch, SkippedCollectiveTimesOutNamingTheRank) {
  GroupHarnessOptions options;
  options.op_timeout = std::chrono::milliseconds(4000);
  run_group(3, "gloo", [](ProcessGroup& pg) { skipped_collective(pg, 4.0); }, options);
}

// A 1.5 s per-op timeout on an op queued behind one that waits for a silent rank fires
// 1.5 s after the op was issued, not after the op in front ends.
TEST(GlooMismatch, PerOpTimeoutCountsFromIssueWhileQueued) {
  on_three_ranks([](ProcessGroup& pg) { queued_op_times_out(pg); });
}

// DISTCOMM_DEBUG=DETAIL: every collective case is found before the op runs, by comparing
// whole fingerprints, and the group stays usable.
TEST(GlooMismatch, DetailFindsEveryCollectiveCaseBeforeTheOp) {
  GroupHarnessOptions options;
  options.op_timeout = kOpTimeout;
  options.debug = DebugLevel::kDetail;
  run_group(3, "gloo", [](ProcessGroup& pg) { detail_finds_every_collective_case(pg, kNamedWithin); }, options);
}

// DISTCOMM_DEBUG=DETAIL with recv_any_source and batch_isend_irecv: matching transfers
// deliver (each recv compared with what its sender posted); a float32 send into an int32
// recv never matches in gloo (its slots carry the dtype), and the stall watch names both
// sides on both ends, for a recv from any rank and for a batch's recv alike.
TEST(GlooMismatch, DetailChecksRecvFromAnyRank) {
  GroupHarnessOptions options;
  options.op_timeout = kOpTimeout;
  options.debug = DebugLevel::kDetail;
  run_group(3, "gloo", [](ProcessGroup& pg) { detail_any_source(pg, kNamedWithin, "any rank", true); },
            options);
}

TEST(GlooMismatch, DetailChecksBatchedTransfers) {
  GroupHarnessOptions options;
  options.op_timeout = kOpTimeout;
  options.debug = DebugLevel::kDetail;
  run_group(3, "gloo", [](ProcessGroup& pg) { detail_batch(pg, kNamedWithin, "same count and dtype", true); }, options);
}

// A float32 send into an int32 recv of the same bytes: gloo's slots carry the dtype, so the
// transfer waits and the stall watch names both sides.
TEST(GlooMismatch, P2PDtypesDifferIsInvalidArgument) {
  on_three_ranks([](ProcessGroup& pg) { p2p_dtypes(pg, kNamedWithin, "int32", /*sender_told=*/true); });
}

}  // namespace
}  // namespace distcomm
