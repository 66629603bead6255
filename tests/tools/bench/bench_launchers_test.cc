// The bench and the overhead programs started the other ways a user starts ranks: by
// tools/launch, by mpirun (gloo and mpi backends), and the overhead programs' own runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "api/process/local_processes.h"
#include "tests/testing/require.h"
#include "tests/testing/subprocess.h"

namespace distcomm {
namespace bench {
namespace {

using testing::on_path;
using testing::ProgramOutcome;
using testing::run_program;
using testing::runfile;

const std::vector<std::string> kSmall = {"-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1"};

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// mpirun with the settings a 2-core test machine needs (as tests/backends/mpi does):
// oversubscription, no binding, shared memory + TCP, and session folders of its own.
class MpirunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!on_path("mpirun")) DISTCOMM_SKIP_WITHOUT("mpi") << "mpirun not found; install openmpi-bin (tools/setup.sh)";
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char scratch[] = "/tmp/distcomm-bench.XXXXXX";  // short: PMIx puts a socket path in it
    ASSERT_NE(mkdtemp(scratch), nullptr);
    scratch_ = scratch;
  }
  void TearDown() override {
    if (!scratch_.empty()) run_program({"rm", "-rf", scratch_});
  }
  ProgramOutcome mpirun(int np, const std::vector<std::string>& command, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", std::to_string(np),
                                     "--mca", "btl", "self,vader,tcp", "--mca", "pml", "ob1",
                                     "--mca", "orte_tmpdir_base", scratch_,
                                     "--mca", "btl_vader_backing_directory", scratch_};
    for (const std::string& e : env) argv.insert(argv.end(), {"-x", e});
    return run_program(concat(argv, command));
  }
  std::string scratch_;
};

TEST(BenchLaunchers, UnderToolsLaunch) {
  const ProgramOutcome out = run_program(concat(
      {runfile("tools/launch/launch"), "--nproc_per_node=3", "--", runfile("tools/bench/bench"), "--op=all_gather"},
      kSmall));
  ASSERT_EQ(out.exit_code, 0) << out.output;
  // No backend named: init_process_group's default, auto, which is shm on one host.
  EXPECT_NE(out.output.find("all_gather, backend auto (cpu: shm"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("Out of bounds values : 0 OK"), std::string::npos) << out.output;
}

TEST(BenchLaunchers, UnderToolsLaunchAWrongValueFailsTheJob) {
  const ProgramOutcome out = run_program(concat({runfile("tools/launch/launch"), "--nproc_per_node=2", "--",
                                                 runfile("tools/bench/bench"), "--corrupt_for_test"},
                                                kSmall));
  EXPECT_NE(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("FAILED"), std::string::npos) << out.output;
}

TEST_F(MpirunTest, BenchWithTheMpiBackend) {
  for (int np : {2, 3}) {
    for (const char* op : {"--op=all_reduce", "--op=all_to_all", "--op=scatter"}) {
      const ProgramOutcome out = mpirun(np, concat({runfile("tools/bench/bench"), "--backend=mpi", op, "-r", "1"}, kSmall));
      ASSERT_EQ(out.exit_code, 0) << out.output;
      EXPECT_NE(out.output.find("backend mpi, " + std::to_string(np) + " ranks"), std::string::npos) << out.output;
      EXPECT_NE(out.output.find("Out of bounds values : 0 OK"), std::string::npos) << out.output;
    }
  }
}

TEST_F(MpirunTest, BenchWithGlooRanksFromMpirun) {
  const ProgramOutcome out =
      mpirun(2, concat({runfile("tools/bench/bench"), "--backend=gloo", "--op=reduce_scatter"}, kSmall),
             {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(local::pick_free_port())});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("backend gloo, 2 ranks"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("Out of bounds values : 0 OK"), std::string::npos) << out.output;
}

TEST_F(MpirunTest, MpiOverheadPrintsTheSideBySideTable) {
  const ProgramOutcome out =
      mpirun(2, {runfile("tools/bench/overhead/mpi_overhead"), "--sizes=8,1M", "--iters=2", "--rounds=2", "--warmup=1"});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("vs MPI_Allreduce called directly, 2 ranks"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("busbw ratio"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("         8 "), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("     1048576 "), std::string::npos) << out.output;
}

// Open MPI's own collectives, as tools/bench/shm_vs_mpi.sh runs them: one line per size, the
// sizes laid out as bench lays them out.
TEST_F(MpirunTest, RawMpiCollectivesPrintOneLinePerSize) {
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}) {
    const ProgramOutcome out =
        mpirun(2, {runfile("tools/bench/reference/raw_mpi_collectives"), std::string("--op=") + op, "8", "65536"});
    ASSERT_EQ(out.exit_code, 0) << op << ": " << out.output;
    const std::string line = std::string("raw-mpi op=") + op + " n=2 bytes=";
    EXPECT_NE(out.output.find(line + "8 time_us="), std::string::npos) << out.output;
    EXPECT_NE(out.output.find(line + "65536 time_us="), std::string::npos) << out.output;
  }
  const ProgramOutcome bad = run_program({runfile("tools/bench/reference/raw_mpi_collectives"), "--op=gather"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("unknown --op=gather"), std::string::npos) << bad.output;
}

TEST(OverheadPrograms, MpiOverheadWithoutMpirunSaysHow) {
  const ProgramOutcome out = run_program({runfile("tools/bench/overhead/mpi_overhead")});
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.output.find("mpirun -np 2"), std::string::npos) << out.output;
}

TEST(OverheadPrograms, GlooOverheadRunsSeparateJobsAndPrintsTheTable) {
  const ProgramOutcome out =
      run_program({runfile("tools/bench/overhead/gloo_overhead"), "--sizes=8,1M", "--iters=2", "--large_iters=2",
                   "--rounds=2", "--warmup=1"});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("vs gloo called directly (gloo::allreduce ring), 2 ranks"), std::string::npos)
      << out.output;
  EXPECT_NE(out.output.find("separate jobs, 2 alternating rounds"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("\n           8 "), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("\n     1048576 "), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("gloo_overhead: done"), std::string::npos) << out.output;

  const ProgramOutcome gather = run_program({runfile("tools/bench/overhead/gloo_overhead"), "--op=all_gather",
                                             "--nproc=3", "--sizes=96", "--iters=2", "--rounds=1", "--warmup=1"});
  ASSERT_EQ(gather.exit_code, 0) << gather.output;
  EXPECT_NE(gather.output.find("distcomm all_gather"), std::string::npos) << gather.output;

  const ProgramOutcome bad = run_program({runfile("tools/bench/overhead/gloo_overhead"), "--algorithm=tree"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--algorithm expects ring or bcube"), std::string::npos) << bad.output;
}

TEST(OverheadPrograms, RawGlooBenchPrintsOneLinePerSize) {
  for (const char* op : {"all_reduce", "broadcast", "all_gather", "reduce_scatter"}) {
    const ProgramOutcome out =
        run_program({runfile("tools/bench/overhead/raw_gloo_bench"), std::string("--op=") + op, "--nproc=3",
                     "--sizes=96,3K", "--iters=2", "--warmup=1"});
    ASSERT_EQ(out.exit_code, 0) << op << ": " << out.output;
    const std::string line = std::string("impl=raw_gloo op=") + op + " nranks=3 bytes=";
    EXPECT_NE(out.output.find(line + "96 iters=2 median_us="), std::string::npos) << out.output;
    EXPECT_NE(out.output.find(line + "3072 iters=2 median_us="), std::string::npos) << out.output;
  }
  const ProgramOutcome bad = run_program({runfile("tools/bench/overhead/raw_gloo_bench"), "--op=gather"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--op expects all_reduce, broadcast, all_gather or reduce_scatter"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace bench
}  // namespace distcomm
