// What a backend cannot do in the fault suite, and why: the one place a backend is let off
// a case. A case in kCannot is skipped with its reason printed; a difference in
// kDifferences makes the case check the backend's documented behaviour instead, and the
// case prints the reason in its log. Everything not listed here must meet the suite's
// expectations (fault_suite.h).
#include <cstdio>
#include <string>

#include "tests/backends/fault/fault_suite.h"
#include "tests/testing/require.h"

namespace distcomm {
namespace fault {
namespace {

struct Entry {
  const char* backend;
  const char* what;  // a case (TEST_P name) in kCannot, a difference in kDifferences
  const char* why;
};

constexpr char kMpirunEndsTheJob[] =
    "under mpirun a process that dies ends the whole job: mpirun kills the survivors before they can "
    "report, so no rank can name the dead one (tests/backends/mpi:peer_death_test checks that such a job "
    "ends well before the op's timeout)";
constexpr char kOneProcess[] =
    "the in_process backend's ranks are threads of one process: one of them cannot die alone";

constexpr char kNoGroupFailure[] =
    "the in_process backend (the suite's check of itself) fails its groups itself, without the core's "
    "GroupFailure, which adds a subgroup's map to world ranks (tests/api/diagnostics:group_failure_test checks it)";

const Entry kCannot[] = {
    {"mpi", "KilledInALargeOp", kMpirunEndsTheJob},
    {"mpi", "StoreHostKilledInALargeOp", kMpirunEndsTheJob},
    {"mpi", "KilledWithAForkedChildAlive", kMpirunEndsTheJob},
    {"mpi", "StoreHostKilledWithAForkedChildAlive", kMpirunEndsTheJob},
    {"in_process", "KilledInALargeOp", kOneProcess},
    {"in_process", "StoreHostKilledInALargeOp", kOneProcess},
    {"in_process", "KilledWithAForkedChildAlive", kOneProcess},
    {"in_process", "StoreHostKilledWithAForkedChildAlive", kOneProcess},
    {"in_process", "KilledWhileOthersWaitInAHostExchange", kOneProcess},
    {"mpi", "KilledWhileOthersWaitInAHostExchange", kMpirunEndsTheJob},
    {"in_process", "KilledWhileOthersSplit", kOneProcess},
    {"mpi", "KilledWhileOthersSplit", kMpirunEndsTheJob},
    {"in_process", "KilledWhileOthersCreateASubgroup", kOneProcess},
    {"mpi", "KilledWhileOthersCreateASubgroup", kMpirunEndsTheJob},
    {"in_process", "KilledInASubgroupIsNamedByItsWorldRank", kOneProcess},
    {"mpi", "TwoKilledTogetherAreBothNamed", kMpirunEndsTheJob},
    {"in_process", "TwoKilledTogetherAreBothNamed", kOneProcess},
    {"mpi", "KilledRightAfterItsGroupWasMadeIsNamedByItsProcess", kMpirunEndsTheJob},
    {"in_process", "KilledRightAfterItsGroupWasMadeIsNamedByItsProcess", kOneProcess},
    {"mpi", "KilledInASubgroupIsNamedByItsWorldRank", kMpirunEndsTheJob},
    {"mpi", "RecvFromAKilledRankAfterAnotherLeft", kMpirunEndsTheJob},
    {"in_process", "RecvFromAKilledRankAfterAnotherLeft", kOneProcess},
    {"in_process", "ATimeoutCutsOffAWaitingOpAndEndsAnIdleRank",
     "the in_process backend (the suite's check of itself) fails its groups itself, without the core's "
     "GroupFailure, whose words for a failure met with and without an op in flight this case checks"},
    {"in_process", "SkippedCollectiveInASubgroupMapsItsRanksToWorldRanks", kNoGroupFailure},
    {"in_process", "DesyncInASubgroupMapsItsRanksToWorldRanks", kNoGroupFailure},
    {"in_process", "SlowRankIsNamedWhileTheOthersWait",
     "the in_process backend (the suite's check of itself) has no stall watch, and its ranks are threads of one "
     "process, whose stderr cannot be told apart"},
    {"hier", "StoreHostKilledWithAForkedChildAlive",
     "hier's hosts here are DISTCOMM_HOST_IDs of one machine, and a rank of another host is judged as on a real "
     "second machine: not by its pid, but by its connections, which the dead store host's forked child holds open "
     "until it exits (kChildOutlivesParent; docs/failures.md's limit), and no store is left to tell it sooner. "
     "KilledWithAForkedChildAlive, whose culprit's host-mates see the death by its pid and fail the group through "
     "the store, runs"},
    {"in_process", "AStoppedRankIsNotTakenForASilentStore",
     "the in_process backend has no stall watch, and its ranks are threads of one process: one of them cannot be "
     "stopped alone"},
    {"in_process", "StoppedRankInAP2pRingIsNamedByEverySurvivor",
     "the in_process backend has no stall watch to follow the waits, and its ranks are threads of one process: one "
     "of them cannot be stopped alone"},
    {"in_process", "StoreHostStoppedBeforeACollective",
     "the in_process backend's ranks are threads of one process: one of them cannot be stopped alone"},
    {"in_process", "StoppedPastThePeersTimeoutIsNamedAndEndsWithTheirFailureOnResume",
     "the in_process backend's ranks are threads of one process: one of them cannot be stopped alone (the core's net "
     "across a stop is tested on a Work, tests/api:work_stop_resume_test)"},
    {"in_process", "BackendFailsOnOneRankAfterItsRendezvous",
     "the in_process backend (the suite's check of itself) has no stall watch to refuse a setting, and its ranks "
     "are threads of one process, which share its environment"},
    {"in_process", "RecvDtypeDiffers",
     "the in_process backend delivers a message into a recv of another dtype and the same bytes, as MPI does, "
     "so that tests/api:detail_native_batch_test can show DISTCOMM_DEBUG=DETAIL naming such a recv"},
};

const Entry kDifferences[] = {
    // The two sides of a point-to-point transfer of another size or dtype.
    {"mpi", "send completes",
     "MPI's send completes once the receiver has taken the message (the recv discards it and fails); the "
     "sender cannot tell"},
    {"shm", "send completes",
     "shm's send completes once its last chunk is in the ring to the receiver (the caller's buffer is then "
     "free, as with MPI's eager sends); the receiver checks the chunk's size and dtype, and the sender "
     "has gone on by then"},
    {"auto", "send completes", "auto runs shm on one host: shm's send completes once its last chunk is in the ring"},
    {"in_process", "send completes",
     "the in_process backend buffers every send: it completes before any receive has looked at it"},
    // Ranks that disagree on a collective.
    {"gloo", "a bystander that agrees with the root finishes",
     "gloo checks an op through the fingerprints in its message tags: rank 2's part of the broadcast is one "
     "message from rank 0, which agrees with it, so it arrives and rank 2 returns it, as the tags promise "
     "(no rank reads data from a rank that posted another op); nothing tells rank 2 that rank 1 disagrees "
     "but an extra exchange per op (mpi's agreement check)"},
    {"gloo", "a rank whose transfers all pair up finishes",
     "gloo's all_to_all checks each transfer through its tag (the op's fingerprint, which leaves out the "
     "splits: they differ from rank to rank by design) and its size: a rank whose every transfer pairs up "
     "receives exactly what its peers sent it and returns; telling it that two other ranks disagree takes an "
     "extra exchange per op (mpi's agreement check, shm's round 0 of split sizes)"},
    {"hier", "a rank whose transfers all pair up finishes", "hier runs all_to_all flat on gloo (see gloo's entry)"},
    {"hier", "a bystander that agrees with the root finishes",
     "hier runs a broadcast this small flat on gloo (and checks a larger one with a one-element gloo broadcast under "
     "its fingerprint), which checks an op through the fingerprints in its message tags (see gloo's entry)"},
    // A rank killed in the middle of a large op.
    {"hier", "a rank past its part finishes",
     "hier's larger ops are steps over groups within and across hosts: a rank on another host than the dead "
     "one, whose steps are done once the dead rank's data is in (it dies as its result arrives), ends the op with "
     "the right values, as the last ranks of a ring past their last step would; its next op fails naming the "
     "dead rank"},
    // A stopped rank, as the has-waited lines name it.
    {"hier", "a stopped rank is named by its pid",
     "hier's hosts here are DISTCOMM_HOST_IDs of one machine, and a rank of another host than the stopped one "
     "judges it as on a real second machine, whose processes it cannot look at: only rank 1's host-mates name "
     "its process (gloo, shm and auto, one host, check it on every rank)"},
    // Ranks killed together.
    {"hier", "names the loss its first failed group saw",
     "hier's group fails with the first failure of its groups within and across hosts: with one dead rank on this "
     "rank's host and one on another, each lies in another of those groups, and the first to fail names its own "
     "(gloo and shm name every rank that went together within their group)"},
};

std::string find(const Entry* table, size_t n, const std::string& backend, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (backend == table[i].backend && what == table[i].what) return table[i].why;
  }
  return "";
}

// The TEST_P's own name, without the instantiation's "/<param>".
std::string case_name() {
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return name.substr(0, name.find('/'));
}

}  // namespace

void FaultSuite::SetUp() {
  backend_ = runner().backend();
  const std::string unavailable = runner().unavailable();
  if (!unavailable.empty()) {
    DISTCOMM_SKIP_WITHOUT(backend_) << "the " << backend_ << " backend cannot run here: " << unavailable;
  }
  const std::string why = find(kCannot, std::size(kCannot), backend_, case_name());
  if (!why.empty()) GTEST_SKIP() << backend_ << " cannot meet " << case_name() << ": " << why;
}

std::string FaultSuite::differs(const std::string& difference) const {
  const std::string why = find(kDifferences, std::size(kDifferences), backend_, difference);
  if (!why.empty()) {
    std::fprintf(stderr, "[%s on %s] expected difference '%s': %s\n", case_name().c_str(), backend_.c_str(),
                 difference.c_str(), why.c_str());
  }
  return why;
}

void PrintTo(const RunnerPtr& runner, std::ostream* out) { *out << runner->backend(); }

std::string runner_name(const ::testing::TestParamInfo<RunnerPtr>& info) { return info.param->backend(); }

}  // namespace fault
}  // namespace distcomm
