// A rank for the tests of a store that outlives rank 0, started by tools/launch:
//
//   store_survivor_probe kill|exit
//
// Joins the job (init_process_group from the launcher's environment, gloo), then rank 0
// leaves -- kill: SIGKILL to itself; exit: its program ends, exit code 0 -- and the others
// go on using the world group's store together (store_survivors.h), each printing
// "survived <rank>". Any failure is one line on stderr (run_main) and exit code 1.
#include <cstdio>
#include <string>

#include "api/init.h"
#include "api/run_main.h"
#include "tests/api/store/store_survivors.h"

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "kill" && mode != "exit") {
    std::fprintf(stderr, "usage: store_survivor_probe kill|exit\n");
    return 2;
  }
  return distcomm::run_main("store_survivor_probe", [&] {
    distcomm::InitOptions init;
    init.backend = "gloo";
    init.timeout = std::chrono::seconds(60);
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(init);
    const std::string said = distcomm::testing::outlive_rank_zero(
        *pg, mode == "kill" ? distcomm::testing::RankZeroLeaves::kKilled : distcomm::testing::RankZeroLeaves::kExits);
    std::printf("%s\n", said.c_str());
    std::fflush(stdout);
    return 0;
  });
}
