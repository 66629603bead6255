// The hierarchy under mpirun: shm within each host and mpi across (hier_across = auto picks
// mpi for the world group when every rank was started by mpirun; api/group/auto_backend.h),
// through part of the shared conformance suite. mpirun_test.sh starts 4 ranks on this machine; each rank counts as
// being on the host its --hosts entry names (DISTCOMM_HOST_ID, set before init), so that
// the group spans simulated hosts. Arguments (after gtest's own):
//   --hosts=a,a,b,b        each rank's host
//   --backend=hier|auto    the group's backend spec
//   --across=gloo|mpi|auto DISTCOMM_HIER_ACROSS, when given
//   --expect=TEXT          the backend_name() the group must give
//   --config=KEY=VALUE     a backend setting, when given (mpi's own: they reach mpi across)
// The world has a file store (in TEST_TMPDIR): shm and the hierarchy need one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "api/init.h"
#include "tests/backends/conformance/conformance.h"

namespace distcomm {
namespace {

using namespace conformance;  // NOLINT: the suite's check_* names read best unqualified here

// The value of --name=VALUE among the program's arguments ("" when absent).
std::string argument(const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (const std::string& arg : ::testing::internal::GetArgvs()) {
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return "";
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

class HierWorld : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
    ASSERT_NE(rank_text, nullptr) << "run under mpirun (tests/backends/mpi/mpirun_test.sh)";
    const std::vector<std::string> hosts = split_commas(argument("hosts"));
    const int rank = std::atoi(rank_text);
    ASSERT_LT(rank, static_cast<int>(hosts.size())) << "--hosts names fewer hosts than mpirun started ranks";
    ::setenv("DISTCOMM_HOST_ID", hosts[static_cast<size_t>(rank)].c_str(), 1);
    if (!argument("across").empty()) ::setenv("DISTCOMM_HIER_ACROSS", argument("across").c_str(), 1);
    const char* dir = std::getenv("TEST_TMPDIR");
    InitOptions o;
    o.backend = argument("backend");
    o.timeout = std::chrono::seconds(60);
    o.init_method = std::string("file://") + (dir ? dir : "/tmp") + "/hier_over_mpi_store";
    const std::string config = argument("config");
    if (!config.empty()) o.backend_config[config.substr(0, config.find('='))] = config.substr(config.find('=') + 1);
    init_process_group(o);
  }
  void TearDown() override { destroy_process_group(); }
};
[[maybe_unused]] ::testing::Environment* const kWorld = ::testing::AddGlobalTestEnvironment(new HierWorld);

ProcessGroup& world() { return default_group(); }

TEST(HierOverMpi, NamesItsLayout) {
  EXPECT_EQ(world().backend_name(), argument("expect"));
  EXPECT_EQ(world().backend_for(DeviceType::kCPU).name(), "hier");
}

TEST(HierOverMpi, Reductions) {
  for (int64_t count : {0, 1, 7, 1000}) sweep_reductions(world(), count);
}

// Past the hierarchy's flat thresholds (api/hierarchical_backend.cc), in several 4 MiB
// pieces with a short, padded tail: each op's steps across hosts run over mpi.
TEST(HierOverMpi, OpsByHosts) {
  ProcessGroup& pg = world();
  constexpr int64_t kPieces = (3 << 20) + 5;
  const int last = pg.size() - 1;
  check_all_reduce(pg, DType::kFloat32, ReduceOp::SUM, kPieces);
  check_all_reduce(pg, DType::kFloat64, ReduceOp::MAX, (1 << 18) + 3);
  check_broadcast(pg, DType::kFloat32, kPieces, last);
  check_reduce(pg, DType::kInt64, ReduceOp::MIN, (1 << 18) + 3, 1);
  check_all_gather(pg, DType::kFloat32, kPieces / pg.size(), conformance::Layout::kTensor);
  check_reduce_scatter(pg, DType::kFloat32, ReduceOp::SUM, kPieces / pg.size(), conformance::Layout::kTensor);
  check_many_in_flight(pg, 20, 1 << 16);
}

TEST(HierOverMpi, DataMovementPointToPointAndGroups) {
  ProcessGroup& pg = world();
  for (int64_t count : {0, 1, 7, 1000}) sweep_data_movement(pg, count);
  sweep_point_to_point(pg, 1000);
  check_new_group(pg);
  check_split(pg);
  check_invalid_arguments(pg);
}

// A hierarchical subgroup of 3 of the 4 ranks (across both hosts, except on 3 + 1): never
// mpi across, whatever hier_across says (MPI starts with the whole job: a subgroup's members
// alone cannot), and it works.
TEST(HierOverMpi, AHierarchicalSubgroupNeverRunsMpiAcross) {
  ProcessGroup& pg = world();
  ProcessGroupPtr sub = pg.new_group({0, 1, 2}, "hier");
  if (!sub) return;  // rank 3
  EXPECT_EQ(sub->backend_name().find("mpi across"), std::string::npos) << sub->backend_name();
  check_all_reduce(*sub, DType::kFloat32, ReduceOp::SUM, (1 << 20) + 3);
}

// The survivors of a shrink are not the job mpirun started either: a shrunk hierarchical
// world goes across over gloo as a subgroup does (mpi there would need rank 3 to take part
// in making the communicators, and wait for it until the deadline), and it works.
TEST(HierOverMpi, AShrunkWorldNeverRunsMpiAcross) {
  ProcessGroup& pg = world();
  if (pg.rank() == 3) return;  // left out: it does not call shrink
  ProcessGroupPtr shrunk = pg.shrink({3}, std::chrono::seconds(20));
  ASSERT_NE(shrunk, nullptr);
  EXPECT_EQ(shrunk->backend_name().find("mpi across"), std::string::npos) << shrunk->backend_name();
  check_all_reduce(*shrunk, DType::kFloat32, ReduceOp::SUM, (1 << 20) + 3);
}

}  // namespace
}  // namespace distcomm
