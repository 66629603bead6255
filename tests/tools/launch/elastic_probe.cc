// A distcomm program for the elastic launcher tests: real ranks over real gloo that stay in
// one job until told to finish.
//
//   elastic_probe <finish_file>
//
// Each rank prints "joined rank R of W (node G, restart C)" once its group is made, then
// the ranks run a broadcast from rank 0 every 100 ms, saying whether <finish_file> exists:
// all leave together once it does, after an all_reduce that checks the world adds up
// ("finished: W ranks"). A rank lost on another machine ends the others' broadcast with a
// PeerFailure (or a Timeout: the group's timeout is 10 s), which fails this rank.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/init.h"
#include "api/run_main.h"

int main(int argc, char** argv) {
  return distcomm::run_main("elastic_probe", [&] {
    if (argc != 2) throw std::invalid_argument("usage: elastic_probe <finish_file>");
    distcomm::InitOptions init;
    init.backend = "gloo";
    init.timeout = std::chrono::seconds(10);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    const char* group = std::getenv("GROUP_RANK");
    const char* restart = std::getenv("DISTCOMM_RESTART_COUNT");
    std::printf("joined rank %d of %d (node %s, restart %s)\n", pg->rank(), pg->size(), group ? group : "?",
                restart ? restart : "?");
    std::fflush(stdout);
    while (true) {
      distcomm::Tensor finish = distcomm::Tensor::of<int32_t>({pg->rank() == 0 && ::access(argv[1], F_OK) == 0});
      pg->broadcast(finish)->wait();
      if (finish.item() != 0) break;
      ::usleep(100000);
    }
    distcomm::Tensor one = distcomm::Tensor::of<int32_t>({1});
    pg->all_reduce(one)->wait();
    std::printf("finished: %d ranks\n", static_cast<int>(one.item()));
    return static_cast<int>(one.item()) == pg->size() ? 0 : 1;
  });
}
