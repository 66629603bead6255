// group_create: what creating groups costs at many ranks on one host, per backend (the
// shm backend's rendezvous against gloo's). Run it under the launcher:
//
//   bazel build -c opt //tools/launch //tools/bench:group_create //backends:plugins
//   bazel-bin/tools/launch/launch --nproc_per_node 96 bazel-bin/tools/bench/group_create --backend=shm
//
// Rank 0 prints one line: the seconds for init_process_group with a first all_reduce, and
// for --rounds split_group calls that each make --parts disjoint groups (every rank in one).
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "api/init.h"
#include "api/run_main.h"

DEFINE_string(backend, "shm", "the backend (gloo, shm, auto)");
DEFINE_int32(rounds, 20, "split_group calls");
DEFINE_int32(parts, 8, "groups each split_group call makes");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return distcomm::run_main("group_create", [&] {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    distcomm::InitOptions init;
    init.backend = FLAGS_backend;
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    distcomm::Tensor t = distcomm::Tensor::zeros({16});
    pg->all_reduce(t)->wait();
    const auto t1 = Clock::now();
    const int size = pg->size();
    std::vector<std::vector<int>> lists(static_cast<size_t>(FLAGS_parts));
    for (int r = 0; r < size; ++r) lists[static_cast<size_t>(r % FLAGS_parts)].push_back(r);
    for (int i = 0; i < FLAGS_rounds; ++i) {
      auto sub = pg->split_group(lists, FLAGS_backend);
      if (sub) sub->all_reduce(t)->wait();
    }
    pg->barrier()->wait();
    const auto t2 = Clock::now();
    if (pg->rank() == 0) {
      std::printf("group_create: %d ranks %s init+all_reduce %.2f s, %d split_groups of %d groups %.2f s\n", size,
                  FLAGS_backend.c_str(), std::chrono::duration<double>(t1 - t0).count(), FLAGS_rounds, FLAGS_parts,
                  std::chrono::duration<double>(t2 - t1).count());
      std::fflush(stdout);
    }
    distcomm::destroy_process_group();
    return 0;
  });
}
