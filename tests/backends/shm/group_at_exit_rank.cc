// One rank of shm_group_at_exit_test: `group_at_exit_rank RANK DIR` makes a group of 2 over
// shm in main, sums once, ends it, and registers an atexit handler that does the same again;
// each sum goes to DIR/<main|at_exit>_<RANK>. Exit codes: 0 fine, 2 main failed, 3 the
// handler failed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "api/init.h"
#include "api/process_group.h"
#include "api/tensor.h"

namespace {

int g_rank = 0;
std::string g_dir;

void sum_once(const std::string& what) {
  distcomm::InitOptions o;
  o.backend = "shm";
  o.rank = g_rank;
  o.world_size = 2;
  o.init_method = "file://" + g_dir + "/" + what + "_store";
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
  float sum = 0;
  // Several ops, so that this thread, not only the group's progress thread, ends some (the
  // path through the thread's own list of completions).
  for (int i = 0; i < 20; ++i) {
    distcomm::Tensor one = distcomm::Tensor::of<float>({static_cast<float>(g_rank + 1)});
    pg->all_reduce(one)->wait();
    sum = static_cast<float>(one.item());
  }
  pg.reset();
  distcomm::destroy_process_group();
  std::ofstream(g_dir + "/" + what + "_" + std::to_string(g_rank)) << sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 64;
  g_rank = std::atoi(argv[1]);
  g_dir = argv[2];
  try {
    sum_once("main");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d in main: %s\n", g_rank, e.what());
    return 2;
  }
  std::atexit([] {
    try {
      sum_once("at_exit");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d at exit: %s\n", g_rank, e.what());
      std::_Exit(3);
    }
  });
  return 0;  // exit(): the thread's thread_local objects go, then the handler runs
}
