// The mpi backend in a process that no MPI launcher started (a plain `bazel test`).
#include <gtest/gtest.h>

#include <string>

#include "api/errors.h"
#include "api/init.h"

namespace distcomm {
namespace {

TEST(MpiWithoutLauncher, WorldOfTwoSaysToUseMpirun) {
  InitOptions o;
  o.backend = "mpi";
  o.rank = 0;
  o.world_size = 2;
  try {
    init_process_group(o);
    ADD_FAILURE() << "a world of 2 started without mpirun";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 2"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(is_initialized());
}

// Without a launcher and without RANK/WORLD_SIZE, MPI makes a world of one (a singleton).
TEST(MpiWithoutLauncher, WorldOfOneRunsAsASingleton) {
  InitOptions o;
  o.backend = "mpi";
  ProcessGroupPtr pg = init_process_group(o);
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  Tensor t = Tensor::of<float>({1, 2, 3});
  pg->all_reduce(t, {ReduceOp::MAX})->wait();
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 2, 3}));
  pg->barrier()->wait();
  destroy_process_group();
}

}  // namespace
}  // namespace distcomm
