// A distcomm program for the launcher tests: each rank says hello through ordered_print,
// the higher ranks first in time, so that only ordering can put the lines in rank order.
// Runs on any backend that can create a group (the tests use the store-only any_size one).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "api/init.h"
#include "api/logging.h"

// With "late_store_use": afterwards, the ranks of nodes other than 0 use the job's store once
// more, 1.5 s later (their groups' teardown, say), while node 0's ranks have long exited.
int main(int argc, char** argv) {
  distcomm::ProcessGroupPtr pg = distcomm::init_process_group();
  ::usleep(50000 * (pg->size() - 1 - pg->rank()));
  distcomm::ordered_print(*pg, "hello from rank " + std::to_string(pg->rank()) + "\nsecond line of rank " +
                                   std::to_string(pg->rank()));
  const char* group_rank = std::getenv("GROUP_RANK");
  if (argc > 1 && std::string(argv[1]) == "late_store_use" && group_rank && std::string(group_rank) != "0") {
    ::usleep(1500000);
    try {
      pg->store()->set("late/" + std::to_string(pg->rank()), std::string("1"));
      std::printf("rank %d: late store op ok\n", pg->rank());
    } catch (const std::exception& e) {
      std::printf("rank %d: late store op failed: %s\n", pg->rank(), e.what());
      return 1;
    }
  }
  return 0;
}
