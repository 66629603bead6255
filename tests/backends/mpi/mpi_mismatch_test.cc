// Ranks that disagree on an op, over mpi, 3 ranks under mpirun: what the fault suite
// (tests/backends/fault, which has every default-settings mismatch case) does not cover:
// counts far apart (Open MPI's heap), a recv's size mismatch leaving the group usable, a
// message beyond MPI's eager limit, a per-op timeout behind an op that waits for the
// group's long (60 s) timeout, a dtype mismatch through recv_any_source and batches, and
// the cases of tests/backends/mismatch under DISTCOMM_DEBUG=DETAIL. Every rank ends with a named distcomm error well before the
// group's timeout -- never a rank killed inside MPI, a corrupted heap, or a success with
// wrong data.
//
// Each test gets a group of its own (a failed group stays failed), over a file store in
// the test's folder, so that a Timeout can name the rank that did not come.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/mismatch/mismatch_cases.h"

namespace distcomm {
namespace {

using namespace mismatch;

constexpr std::chrono::milliseconds kOpTimeout{60000};
constexpr double kNamedWithin = 25;

// A fresh world group for this test, with op timeout `timeout`; destroyed at the end.
void in_group(const std::function<void(ProcessGroup&)>& fn, std::chrono::milliseconds timeout = kOpTimeout,
              const std::string& debug = "", const std::string& agreement_check = "") {
  const char* dir = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  InitOptions o;
  o.backend = "mpi";
  o.timeout = timeout;
  o.init_method = std::string("file://") + (dir ? dir : "/tmp") + "/store_" + test->name();
  o.debug = debug;
  if (!agreement_check.empty()) o.backend_config["agreement_check"] = agreement_check;
  ProcessGroupPtr pg = init_process_group(o);
  ASSERT_EQ(pg->size(), 3) << "run with mpirun -np 3";
  fn(*pg);
  destroy_process_group();
}

// 1000 against 100000 floats corrupted Open MPI's heap before the check.
TEST(MpiMismatch, FarApartCountsAreDesync) {
  in_group([](ProcessGroup& pg) {
    auto op = [&pg] {
      pg.barrier()->wait();
      Tensor t = Tensor::zeros({pg.rank() == 0 ? 1000 : 100000});
      pg.all_reduce(t)->wait();
    };
    expect_failure_within<Desync>(op, 0, kNamedWithin, "all_reduce 1000 vs 100000");
  });
}

// A recv smaller than the message (MPI_ERR_TRUNCATE before) or larger (a partial fill):
// InvalidArgument on the receiver naming both counts, the tensor untouched; the sender's
// send completes (MPI cannot tell it), and the group stays usable.
TEST(MpiMismatch, RecvSmallerThanTheMessage) {
  in_group([](ProcessGroup& pg) {
    p2p_sizes(pg, /*sent=*/4, /*received=*/2, kNamedWithin, /*sender_told=*/false);
    Tensor t = Tensor::zeros({4});
    t.fill(1);
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.item(3), 3) << "the group is still usable";
  });
}

// A message too large for MPI's eager protocol: the receiver discards it, and the sender's
// send still completes.
TEST(MpiMismatch, LargeMessageIntoASmallRecv) {
  in_group([](ProcessGroup& pg) {
    p2p_sizes(pg, /*sent=*/1 << 18, /*received=*/2, kNamedWithin, /*sender_told=*/false);
  });
}

TEST(MpiMismatch, PerOpTimeoutCountsFromIssueWhileQueued) {
  in_group([](ProcessGroup& pg) { queued_op_times_out(pg); });
}

// DISTCOMM_DEBUG=DETAIL finds every collective case by comparing whole fingerprints before
// the op -- here with the agreement check off, so that DETAIL is what finds them -- and the
// group stays usable.
TEST(MpiMismatch, DetailFindsEveryCollectiveCaseBeforeTheOp) {
  in_group([](ProcessGroup& pg) { detail_finds_every_collective_case(pg, kNamedWithin); }, kOpTimeout, "DETAIL",
           "0");
}

// A float32[4] send into an int32[4] recv (the same 16 bytes, which MPI alone accepts) is
// refused by the recv from the dtype the message's tag carries (backends/mpi/p2p_tag.h),
// naming both: here through recv_any_source (the sender known only from the message) and
// batch_isend_irecv (which mpi runs as single sends and recvs), after transfers of both
// kinds that match and deliver; the plain recv is the fault suite's RecvDtypeDiffers.
constexpr char kBackendNames[] = "holds 4 int32 (16 bytes) but rank 0 sends 4 float32 (16 bytes)";

TEST(MpiMismatch, RecvFromAnyRankOfAnotherDtype) {
  in_group([](ProcessGroup& pg) { detail_any_source(pg, kNamedWithin, kBackendNames, /*sender_told=*/false); });
}

TEST(MpiMismatch, BatchedRecvOfAnotherDtype) {
  in_group([](ProcessGroup& pg) { detail_batch(pg, kNamedWithin, kBackendNames, /*sender_told=*/false); });
}

// Under DISTCOMM_DEBUG=DETAIL, which would compare the recv's fingerprint with the one its
// sender posted on the store once the recv has ended: the backend's refusal comes first.
TEST(MpiMismatch, RecvOfAnotherDtypeUnderDetail) {
  in_group([](ProcessGroup& pg) { p2p_dtypes(pg, kNamedWithin, kBackendNames, /*sender_told=*/false); }, kOpTimeout,
           "DETAIL");
}

}  // namespace
}  // namespace distcomm
