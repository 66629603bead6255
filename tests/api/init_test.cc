// init_process_group and the launch environment: which variables are read, what a
// missing or malformed one says, and real rendezvous over env://, tcp:// and file://.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/init.h"
#include "tests/api/plugin_test_env.h"
#include "tests/testing/multiprocess.h"

namespace distcomm {
namespace {

const char* kVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                       "DISTCOMM_BACKEND", "DISTCOMM_HOST_ID"};

class InitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_test_plugins();
    for (const char* v : kVars) ::unsetenv(v);
  }
  void TearDown() override { destroy_process_group(); }
};

// What init_process_group refuses a single_rank group of these ranks with ("" if nothing).
std::string init_refusal(int rank, int world_size) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = rank;
  o.world_size = world_size;
  try {
    init_process_group(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST_F(InitTest, ReadsTorchrunThenOpenMpiThenSlurm) {
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  EXPECT_EQ(read_launch_env().source, "slurm");
  EXPECT_EQ(read_launch_env().rank, 5);
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  EXPECT_EQ(read_launch_env().source, "mpirun");
  EXPECT_EQ(read_launch_env().world_size, 4);
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  const LaunchEnv e = read_launch_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 29500);
}

// What a self-launching program asks before it starts its own ranks.
TEST_F(InitTest, LaunchedAsRankOnlyWhenALauncherGaveARank) {
  EXPECT_FALSE(launched_as_rank());
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_as_rank());
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_as_rank());
}

TEST_F(InitTest, MalformedVariableIsNamed) {
  ::setenv("RANK", "one", 1);
  try {
    read_launch_env();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='one'"), std::string::npos) << e.what();
  }
}

// The host id travels in the placements the ranks exchange, where '|' separates what
// nccl needs: refused before anything is sent.
TEST_F(InitTest, AHostIdWithTheSeparatorIsRefused) {
  ::setenv("DISTCOMM_HOST_ID", "rack1|nccl", 1);
  const std::string m = init_refusal(0, 1);
  EXPECT_NE(m.find("DISTCOMM_HOST_ID='rack1|nccl' contains '|'"), std::string::npos) << m;
}

TEST_F(InitTest, MissingRankSaysHowToProvideIt) {
  const std::string m = init_refusal(-1, -1);
  EXPECT_NE(m.find("RANK and WORLD_SIZE"), std::string::npos) << m;
}

TEST_F(InitTest, EnvMethodNeedsMasterAddress) {
  const std::string m = init_refusal(0, 1);
  EXPECT_NE(m.find("MASTER_ADDR and MASTER_PORT"), std::string::npos) << m;
}

TEST_F(InitTest, BadInitMethodsAreRefused) {
  InitOptions o;
  o.backend = "single_rank";
  o.rank = 0;
  o.world_size = 1;
  o.init_method = "tcp://localhost";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.init_method = "tcp://localhost:99999";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.init_method = "udp://x:1";
  EXPECT_THROW(init_process_group(o), InvalidArgument);
  o.rank = 1;
  o.init_method = "tcp://127.0.0.1:1";
  EXPECT_THROW(init_process_group(o), InvalidArgument);  // rank 1 of a world of 1
}

TEST_F(InitTest, EnvRendezvousWithPortZeroMakesTheDefaultGroup) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "0", 1);  // the server in rank 0 picks a free port
  ::setenv("DISTCOMM_BACKEND", "single_rank", 1);
  EXPECT_FALSE(is_initialized());
  auto pg = init_process_group();
  EXPECT_TRUE(is_initialized());
  EXPECT_EQ(&default_group(), pg.get());
  EXPECT_EQ(default_group_ptr(), pg);
  EXPECT_EQ(pg->backend_name(), "single_rank");
  EXPECT_THROW(init_process_group(), InvalidArgument);  // twice
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
  try {
    default_group_ptr();
    ADD_FAILURE() << "default_group_ptr() returned after destroy_process_group()";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "no default process group: call init_process_group() first");
  }
  EXPECT_THROW(default_group(), InvalidArgument);
  EXPECT_EQ(pg.use_count(), 1) << "the default group let go of it";
}

// Four real processes meet through one file and split into two groups by parity.
TEST_F(InitTest, FileRendezvousAndSplitAcrossProcesses) {
  char path[] = "/tmp/distcomm_init_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ::unlink(path);
  testing::run_ranks(4, [&](int r, int world) {
    InitOptions o;
    o.backend = "any_size";
    o.rank = r;
    o.world_size = world;
    o.init_method = std::string("file://") + path;
    o.timeout = std::chrono::seconds(20);
    auto pg = init_process_group(o);
    auto half = pg->split(r % 2, -r);  // key -r: reversed order inside each group
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->size(), 2);
    // Ranks {1, 3} with keys {-1, -3}: rank 3 comes first.
    EXPECT_EQ(half->rank(), r < 2 ? 1 : 0);
    EXPECT_EQ(half->global_rank(0), r % 2 == 0 ? 2 : 3);
  });
  ::unlink(path);
}

}  // namespace
}  // namespace distcomm
