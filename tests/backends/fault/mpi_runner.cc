#include "tests/backends/fault/mpi_runner.h"

#include <cstdlib>

#include "api/store/file_store.h"
#include "api/init.h"
#include "tests/testing/failure_checks.h"

namespace distcomm {
namespace fault {
namespace {

// "<TEST_TMPDIR>/fault_<what>_<mpirun job>_<test>": the same on every rank of this job, for
// this test alone.
std::string job_path(const std::string& what) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const char* job = std::getenv("PMIX_NAMESPACE");
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : test) {
    if (c == '/') c = '_';
  }
  return std::string(dir ? dir : "/tmp") + "/fault_" + what + "_" + (job ? job : "nojob") + "_" + test;
}

class MpiRank : public Rank {
 public:
  MpiRank() : board_(job_path("board")) {
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    rank_ = r ? std::atoi(r) : 0;
  }
  ~MpiRank() override {
    if (is_initialized()) destroy_process_group();
  }

  int rank() const override { return rank_; }

  ProcessGroupPtr join(std::chrono::milliseconds timeout) override {
    InitOptions o;
    o.backend = "mpi";
    o.timeout = timeout;
    o.init_method = "file://" + job_path("store");
    ProcessGroupPtr pg = init_process_group(o);
    EXPECT_EQ(pg->size(), kRanks) << "run with mpirun -np " << kRanks;
    return pg;
  }

  void leave(ProcessGroupPtr& pg) override {
    pg.reset();
    destroy_process_group();
  }

  Store& board() override { return board_; }

 private:
  int rank_ = 0;
  FileStore board_;
};

class MpiRunner : public Runner {
 public:
  std::string backend() const override { return "mpi"; }

  void run(const std::function<void(Rank&)>& fn, const std::set<int>&) override {
    MpiRank r;
    try {
      fn(r);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r.rank() << ": uncaught " << e.what();
    }
    // The next case makes its group within the group's timeout: no rank may start it while
    // another is still in this one (a rank that never started would wait for the others'
    // init to time out).
    testing::mark_done(r.board(), r.rank());
    testing::wait_for_done(r.board(), {0, 1, 2});
  }
};

}  // namespace

RunnerPtr mpi_runner() { return std::make_shared<MpiRunner>(); }

}  // namespace fault
}  // namespace distcomm
