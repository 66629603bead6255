// Ranks that disagree on an op, over gloo, 3 ranks: what the fault suite
// (tests/backends/fault, which has every default-settings mismatch case) does not cover:
// a per-op timeout behind an op that waits for the group's long (60 s) timeout, and the
// cases of tests/backends/mismatch under DISTCOMM_DEBUG=DETAIL. Every rank ends with a named
// distcomm error well before the group's timeout, never a success with wrong data.
#include <chrono>
#include <functional>

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

}  // namespace
}  // namespace distcomm
