// A rank that forks after its group was made (a data loader worker, multiprocessing with
// fork, a program's own fork) keeps its group: the child inherits the group's memory but is
// not the rank. An op the child issues on it is refused there (InvalidArgument, naming the
// fork), and the child's end, with the group destroyed there, tells the peers nothing. The
// parents' ops after it are exact. Before: on shm the child's all_reduce ran with the
// peers' parents (one of them then reduced the child's stale data: 'got 1001, want 1'), and
// the child's destroy wrote "rank 1 shut the group down" into the shared segments, failing
// every parent's next op.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "api/errors.h"
#include "api/init.h"
#include "tests/backends/fault/fault_checks.h"
#include "tests/backends/fault/fault_suite.h"

namespace distcomm {
namespace fault {
namespace {

// The child's exit code: 0 when its op was refused as a fork child's, else how it went.
int in_forked_child(ProcessGroupPtr& pg) {
  int code = 0;
  try {
    Tensor t = floats(1000);
    pg->all_reduce(t)->wait();
    code = 2;  // the op ran as if this process were the rank
  } catch (const InvalidArgument& e) {
    code = std::string(e.what()).find("forked from the one that made the group") != std::string::npos ? 0 : 3;
  } catch (...) {
    code = 4;
  }
  // Every other way to the parent's backends or exchange is refused too; abort only marks
  // this copy (it is called from error handlers: it does not throw).
  try {
    pg->split(0, 0);
    code = 5;
  } catch (const InvalidArgument&) {
  } catch (...) {
    code = 6;
  }
  try {
    pg->exchange();
    code = 7;
  } catch (const InvalidArgument&) {
  }
  pg->abort();
  // The child's copies go, as at its exit: the group's destruction here must reach no peer.
  destroy_process_group();
  pg.reset();
  return code;
}

TEST_P(FaultSuite, AForkedChildCannotUseNorEndItsParentsGroup) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << "fork failed";
    if (child == 0) ::_exit(in_forked_child(pg));
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << r.rank() << "'s child ended with status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r.rank()
                                      << "'s child: 2 its op ran, 3 refused in other words, 4 another error, 5/6 split not "
                                         "refused, 7 exchange not refused";
    // The parents' group is whole: exact sums, every rank.
    for (int i = 0; i < 20; ++i) {
      Tensor t = Tensor::zeros({1000});
      for (int64_t k = 0; k < 1000; ++k) t.data_as<float>()[k] = static_cast<float>(r.rank() + 1 + i);
      pg->all_reduce(t)->wait();
      const int n = pg->size();
      const float want = static_cast<float>(n * (n + 1) / 2 + n * i);
      for (int64_t k = 0; k < 1000; ++k) {
        ASSERT_EQ(t.data_as<float>()[k], want) << "rank " << r.rank() << " all_reduce " << i << " element " << k;
      }
    }
    r.leave(pg);
  });
}

// The child's exit code: 0 when waiting on the op its parent had in flight at the fork was
// refused at once, else how it went.
int wait_in_forked_child(const WorkPtr& in_flight) {
  const auto started = std::chrono::steady_clock::now();
  int code = 0;
  try {
    in_flight->wait();
    code = 2;  // the child ran or finished its parent's op
  } catch (const InvalidArgument& e) {
    code = std::string(e.what()).find("forked") != std::string::npos ? 0 : 3;
  } catch (...) {
    code = 4;  // a Timeout: it waited out the op's timeout
  }
  if (code == 0 && std::chrono::steady_clock::now() - started > std::chrono::seconds(2)) code = 5;
  return code;
}

// A child forked while its parent's op ran holds a copy of the op that nothing there can
// end. Before, waiting on it there waited out the op's timeout, and on gloo the child's
// wait ran the op itself over the parent's connections (gloo runs an op nobody started on
// the thread that waits).
TEST_P(FaultSuite, AForkedChildCannotWaitOnItsParentsOpInFlight) {
  runner().run([&](Rank& r) {
    ProcessGroupPtr pg = r.join();
    pg->barrier()->wait();
    Tensor t = Tensor::zeros({1000});
    for (int64_t k = 0; k < 1000; ++k) t.data_as<float>()[k] = static_cast<float>(r.rank() + 1);
    // The other ranks join the op only once rank 0's child has ended: rank 0's op is in
    // flight at the fork for certain, however late each rank leaves the barrier.
    if (r.rank() != 0) {
      r.board().wait({"forked_child_ended"}, std::chrono::duration_cast<std::chrono::milliseconds>(kGroupTimeout));
    }
    WorkPtr work = pg->all_reduce(t);
    if (r.rank() == 0) {
      const pid_t child = ::fork();
      ASSERT_GE(child, 0) << "fork failed";
      if (child == 0) ::_exit(wait_in_forked_child(work));
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFEXITED(status)) << "rank 0's child ended with status " << status;
      EXPECT_EQ(WEXITSTATUS(status), 0) << "rank 0's child: 2 its wait returned, 3 refused in other words, 4 another "
                                           "error (a timeout), 5 refused after more than 2 s";
      r.board().set("forked_child_ended", std::string("1"));
    }
    work->wait();
    const int n = pg->size();
    for (int64_t k = 0; k < 1000; ++k) {
      ASSERT_EQ(t.data_as<float>()[k], static_cast<float>(n * (n + 1) / 2)) << "rank " << r.rank() << " element " << k;
    }
    r.leave(pg);
  });
}

}  // namespace
}  // namespace fault
}  // namespace distcomm
