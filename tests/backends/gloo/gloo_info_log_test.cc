// DISTCOMM_DEBUG=INFO's output, as a user reads it: 3 ranks over gloo, each a process whose
// stdout and stderr go to files of its own. The creation of each group is logged in rank
// order by the group's rank 0 (to stderr), naming the group, each rank's place in it and
// the backend; at destroy each rank logs the ops it issued, counted per op type.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/store/file_store.h"
#include "api/process_group.h"
#include "tests/testing/multiprocess.h"
#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

using testing::read_file;
using testing::temp_path;

std::string stderr_of(int rank) { return temp_path("info_rank" + std::to_string(rank) + ".err"); }
std::string stdout_of(int rank) { return temp_path("info_rank" + std::to_string(rank) + ".out"); }

// This process's stdout and stderr, from now on, into `path`.
void redirect(int fd, const std::string& path) {
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0) << path;
  ASSERT_GE(::dup2(file, fd), 0);
  ::close(file);
}

// What each rank runs: the world group (2 all_reduce and 1 broadcast on every rank; rank 0
// sends rank 1 one tensor), and a subgroup of ranks 1 and 2 (one barrier), each destroyed.
void rank_main(int rank, int size) {
  std::fflush(stdout);
  std::fflush(stderr);
  redirect(STDOUT_FILENO, stdout_of(rank));
  redirect(STDERR_FILENO, stderr_of(rank));
  ProcessGroupOptions o;
  o.store = std::make_shared<FileStore>(temp_path("info_store"), size);
  o.rank = rank;
  o.size = size;
  o.backend = "gloo";
  o.debug = DebugLevel::kInfo;
  auto world = ProcessGroup::create(o);
  Tensor t = Tensor::zeros({4});
  world->all_reduce(t)->wait();
  world->all_reduce(t)->wait();
  world->broadcast(t)->wait();
  if (rank == 0) world->send(t, 1)->wait();
  if (rank == 1) world->recv(t, 0)->wait();
  auto pair = world->new_group({1, 2});
  if (pair) {
    pair->barrier()->wait();
    pair.reset();  // destroyed: its lines come before the world's
  }
  world.reset();
}

// The lines of text that contain `what`, in order.
std::vector<std::string> lines_with(const std::string& text, const std::string& what) {
  std::vector<std::string> found;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.find(what) != std::string::npos) found.push_back(line);
    start = end + 1;
  }
  return found;
}

TEST(GlooInfoLog, CreationInRankOrderAndTheRealOpCountsAtDestroy) {
  testing::run_ranks(3, rank_main);
  if (::testing::Test::HasFailure()) return;
  std::vector<std::string> err(3);
  for (int r = 0; r < 3; ++r) {
    err[r] = read_file(stderr_of(r));
    EXPECT_EQ(read_file(stdout_of(r)), "") << "INFO logs to stderr; rank " << r << "'s stdout is the program's";
  }

  // The world's creation: rank 0 prints every rank's line, in rank order, together.
  const std::vector<std::string> world_created = lines_with(err[0], "group 'world' created");
  ASSERT_EQ(world_created.size(), 3u) << err[0];
  for (int r = 0; r < 3; ++r) {
    const std::string n = std::to_string(r);
    EXPECT_EQ(world_created[r].rfind("[rank " + n + "/3] group 'world' created: rank " + n + " of 3 (global ranks [0, 1, 2]), backend gloo", 0), 0u)
        << world_created[r];
    EXPECT_NE(world_created[r].find("DISTCOMM_DEBUG=INFO"), std::string::npos) << world_created[r];
  }
  EXPECT_NE(err[0].find(world_created[0] + "\n" + world_created[1] + "\n" + world_created[2] + "\n"), std::string::npos)
      << "one block, in rank order:\n" << err[0];
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(lines_with(err[r], "group 'world' created").empty()) << err[r];

  // The subgroup's creation: printed by its rank 0 (global rank 1), in its own numbering.
  const std::vector<std::string> pair_created = lines_with(err[1], "created: rank");
  ASSERT_EQ(pair_created.size(), 2u) << err[1];
  EXPECT_NE(pair_created[0].find("[rank 0/2] group '"), std::string::npos) << pair_created[0];
  EXPECT_NE(pair_created[0].find("created: rank 0 of 2 (global ranks [1, 2])"), std::string::npos) << pair_created[0];
  EXPECT_NE(pair_created[1].find("[rank 1/2] group '"), std::string::npos) << pair_created[1];
  EXPECT_NE(pair_created[1].find("created: rank 1 of 2 (global ranks [1, 2])"), std::string::npos) << pair_created[1];
  const std::string pair_name = pair_created[0].substr(pair_created[0].find('\''),
                                                       pair_created[0].find("' created") - pair_created[0].find('\'') + 1);
  EXPECT_NE(pair_name, "'world'");

  // At destroy, each rank's own counts of what it issued.
  const std::string collectives = "this rank issued 3 collectives (2 all_reduce, 1 broadcast)";
  EXPECT_EQ(lines_with(err[0], "destroyed"),
            std::vector<std::string>{"[rank 0/3] group 'world' destroyed: " + collectives +
                                     " and 1 point-to-point op (1 send)"});
  EXPECT_EQ(lines_with(err[1], "destroyed"),
            (std::vector<std::string>{"[rank 0/2] group " + pair_name +
                                          " destroyed: this rank issued 1 collective (1 barrier) and 0 point-to-point ops",
                                      "[rank 1/3] group 'world' destroyed: " + collectives +
                                          " and 1 point-to-point op (1 recv)"}));
  EXPECT_EQ(lines_with(err[2], "destroyed"),
            (std::vector<std::string>{"[rank 1/2] group " + pair_name +
                                          " destroyed: this rank issued 1 collective (1 barrier) and 0 point-to-point ops",
                                      "[rank 2/3] group 'world' destroyed: " + collectives + " and 0 point-to-point ops"}));
}

}  // namespace
}  // namespace distcomm
